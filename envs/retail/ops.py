"""Shared helpers of the retail tools: lookups that fail helpfully, money movements, audit rows,
and the order view (read with Core: see `order_view`)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any, TypeVar, cast

from pydantic import Field
from sqlalchemy import Integer, Table, bindparam, exists, insert, select, update
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError
from app.sdk.money import cents, money
from app.sdk.rows import AnyRow
from envs.retail.models import (
    Address,
    AuditLog,
    Customer,
    Exchange,
    Order,
    OrderItem,
    Payment,
    PaymentMethod,
    Product,
    Return,
    ReturnItem,
    Variant,
)

# The mapped tables, for the hot read paths that use Core instead of ORM entities.
CUSTOMERS = cast(Table, Customer.__table__)
ADDRESSES = cast(Table, Address.__table__)
PRODUCTS = cast(Table, Product.__table__)
VARIANTS = cast(Table, Variant.__table__)
PAYMENT_METHODS = cast(Table, PaymentMethod.__table__)
ORDERS = cast(Table, Order.__table__)
ORDER_ITEMS = cast(Table, OrderItem.__table__)
PAYMENTS = cast(Table, Payment.__table__)
RETURNS = cast(Table, Return.__table__)
RETURN_ITEMS = cast(Table, ReturnItem.__table__)
EXCHANGES = cast(Table, Exchange.__table__)
AUDIT_LOG = cast(Table, AuditLog.__table__)


def normalize_order_number(raw: str) -> str:
    """Accept "W1234567", "#w1234567" or "#W1234567" for the same order."""
    text = raw.strip().upper().lstrip("#")
    return f"#{text}"


def no_such_customer(customer_id: int) -> ToolError:
    return ToolError(
        f"No customer has id {customer_id}.",
        hint="Authenticate the customer with find_customer_by_email or "
        "find_customer_by_name_zip and use the customer_id it returns.",
        code="not_found",
    )


def no_such_order(number: str) -> ToolError:
    return ToolError(
        f"No order has number {number}.",
        hint="Order numbers look like #W1234567; list_customer_orders lists a customer's.",
        code="not_found",
    )


def no_such_product(product_id: int) -> ToolError:
    return ToolError(
        f"No product has id {product_id}.",
        hint="list_products shows every product and its id.",
        code="not_found",
    )


def not_owned(number: str, customer_id: int) -> ToolError:
    return ToolError(
        f"Order {number} does not belong to customer {customer_id}.",
        hint="Only act on orders of the authenticated customer; never on someone else's.",
        code="other_customer",
    )


def require_status(order: Order | AnyRow, allowed: str, instead: str) -> None:
    if order.status != allowed:
        raise ToolError(
            f"Order {order.order_number} is {order.status}; "
            f"only {allowed} orders can be {instead}.",
            hint=STATUS_HINTS.get((allowed, order.status)),
            code=STATUS_RULES[allowed],
        )


# The rule (decline reason code, envs/retail/policy.py) a wrong order status breaks.
STATUS_RULES: dict[str, str] = {"pending": "order_not_pending", "delivered": "order_not_delivered"}


STATUS_HINTS: dict[tuple[str, str], str] = {
    ("pending", "delivered"): "Use return_delivered_order_items or "
    "exchange_delivered_order_items for delivered orders.",
    ("pending", "processed"): "A processed order is being packed and can no longer be changed.",
    ("pending", "shipped"): "A shipped order can be returned or exchanged once it is delivered.",
    ("delivered", "pending"): "A pending order can be cancelled or modified instead.",
    ("delivered", "shipped"): "Wait until the order is delivered, then return or exchange it.",
    ("delivered", "processed"): "The order has not shipped yet; it cannot be returned.",
}


_Method = TypeVar("_Method", PaymentMethod, AnyRow)


def pick_method(customer_id: int, methods: list[_Method], code: str) -> _Method:
    """The customer's method (ORM object or row, of all theirs in id order) with this code."""
    method = next((m for m in methods if m.code == code.strip().lower()), None)
    if method is None:
        owned = ", ".join(m.code for m in methods)
        raise ToolError(
            f"Customer {customer_id} has no payment method {code!r}.",
            hint=f"Their payment methods are: {owned}.",
            code="not_found",
        )
    return method


_VARIANT_BY_SKU = select(
    VARIANTS.c.id,
    VARIANTS.c.product_id,
    VARIANTS.c.sku,
    VARIANTS.c.options,
    VARIANTS.c.price,
    VARIANTS.c.stock,
    VARIANTS.c.available,
).where(VARIANTS.c.sku == bindparam("sku"))


def get_variant(db: Session, sku: str) -> AnyRow:
    """The variant's row (id, product_id, sku, options, price, stock, available)."""
    variant = db.execute(_VARIANT_BY_SKU, {"sku": sku.strip().upper()}).first()
    if variant is None:
        raise ToolError(
            f"No product variant has SKU {sku!r}.",
            hint="get_product_details lists every variant (SKU, options, price, stock).",
            code="not_found",
        )
    return variant


# An order's lines with what the write tools check and change, in line_no order (the ORM
# relationship `Order.items` they replace).
_LINES = (
    select(
        ORDER_ITEMS.c.id,
        ORDER_ITEMS.c.line_no,
        ORDER_ITEMS.c.variant_id,
        ORDER_ITEMS.c.quantity,
        ORDER_ITEMS.c.unit_price,
        ORDER_ITEMS.c.status,
        VARIANTS.c.sku,
        VARIANTS.c.product_id,
    )
    .select_from(ORDER_ITEMS)
    .join(VARIANTS, VARIANTS.c.id == ORDER_ITEMS.c.variant_id)
    .where(ORDER_ITEMS.c.order_id == bindparam("order_id"))
    .order_by(ORDER_ITEMS.c.line_no)
)


def order_lines(db: Session, order_id: int) -> list[AnyRow]:
    """The order's lines (id, line_no, variant_id, quantity, unit_price, status, sku,
    product_id) in line_no order."""
    return list(db.execute(_LINES, {"order_id": order_id}))


def active_lines(order: AnyRow, items: list[AnyRow], skus: list[str]) -> list[AnyRow]:
    """The order's active lines (of `items`, its `order_lines`) for the given SKUs, each named
    once."""
    wanted = [s.strip().upper() for s in skus]
    if not wanted:
        raise ToolError("Name at least one item SKU.", code="invalid_arguments")
    if len(set(wanted)) != len(wanted):
        raise ToolError("Each SKU may be named only once.", code="invalid_arguments")
    lines = []
    for sku in wanted:
        line = next((i for i in items if i.sku == sku), None)
        if line is None:
            listed = ", ".join(i.sku for i in items)
            raise ToolError(
                f"Order {order.order_number} has no item with SKU {sku}.",
                hint=f"Its items are: {listed}.",
                code="not_found",
            )
        if line.status != "active":
            raise ToolError(
                f"Item {sku} of order {order.order_number} is already {line.status}.",
                code="already_returned",
            )
        lines.append(line)
    return lines


# --- write paths ---------------------------------------------------------------------------
# Core statements built once (hot write paths; see bench/history/suite.md). Each rule has this one
# implementation, for the Core tools and the ORM ones alike: a statement run through the Session
# first flushes the ORM changes pending, so the rows come out as a single ORM flush wrote them.
# Like the ORM's unit of work, they UPDATE only the columns whose value changes.

_AUDIT = insert(AUDIT_LOG)
_CUSTOMER_EXISTS = select(CUSTOMERS.c.id).where(CUSTOMERS.c.id == bindparam("customer_id"))
_ORDER_BY_NUMBER_FOR_WRITE = select(ORDERS).where(ORDERS.c.order_number == bindparam("number"))


def audit(
    db: Session, ctx: ToolContext, action: str, entity: str, entity_id: str, **detail: Any
) -> None:
    """One audit_log row for an agent action, inserted at once."""
    db.execute(
        _AUDIT,
        {
            "ts": ctx.now,
            "actor": "agent",
            "action": action,
            "entity": entity,
            "entity_id": entity_id,
            "detail": json.dumps(detail, sort_keys=True),
        },
    )


def changed_columns(row: AnyRow, new: dict[str, Any]) -> dict[str, Any]:
    """The values of `new` that differ from the row's: what an ORM flush would UPDATE."""
    current = row._mapping
    return {k: v for k, v in new.items() if current[k] != v}


def owned_order(db: Session, order_number: str, customer_id: int) -> AnyRow:
    """The order's row (every column), provided the customer exists and owns it.

    Tools that work on ORM entities load it with `db.get_one(Order, row.id)`.
    """
    if db.execute(_CUSTOMER_EXISTS, {"customer_id": customer_id}).first() is None:
        raise no_such_customer(customer_id)
    number = normalize_order_number(order_number)
    order = db.execute(_ORDER_BY_NUMBER_FOR_WRITE, {"number": number}).first()
    if order is None:
        raise no_such_order(number)
    if order.customer_id != customer_id:
        raise not_owned(order.order_number, customer_id)
    return order


# The SET list follows the parameters given (one cached statement per set of columns).
_UPDATE_ORDER = update(ORDERS).where(ORDERS.c.id == bindparam("order_id_"))


def update_order(db: Session, order: AnyRow, new: dict[str, Any]) -> None:
    """UPDATE the order's columns that change (an ORM flush would skip the others)."""
    values = changed_columns(order, new)
    if values:
        db.execute(_UPDATE_ORDER, {"order_id_": order.id, **values})


_ORDER_PAYMENTS = (
    select(PAYMENTS.c.payment_method_id, PAYMENTS.c.kind, PAYMENTS.c.amount)
    .where(PAYMENTS.c.order_id == bindparam("order_id"))
    .order_by(PAYMENTS.c.id)
)
_METHOD_BALANCE = select(PAYMENT_METHODS.c.balance).where(
    PAYMENT_METHODS.c.id == bindparam("method_id")
)
_SET_BALANCE = (
    update(PAYMENT_METHODS)
    .where(PAYMENT_METHODS.c.id == bindparam("method_id"))
    .values(balance=bindparam("balance"))
)
_INSERT_PAYMENT = insert(PAYMENTS)
_CUSTOMER_METHODS = (
    select(
        PAYMENT_METHODS.c.id,
        PAYMENT_METHODS.c.code,
        PAYMENT_METHODS.c.kind,
        PAYMENT_METHODS.c.balance,
    )
    .where(PAYMENT_METHODS.c.customer_id == bindparam("customer_id"))
    .order_by(PAYMENT_METHODS.c.id)
)


def customer_methods(db: Session, customer_id: int) -> list[AnyRow]:
    """The customer's payment methods (id, code, kind, balance) in id order, for
    `pick_method`."""
    return list(db.execute(_CUSTOMER_METHODS, {"customer_id": customer_id}))


def set_balance(db: Session, method_id: int, balance: float) -> None:
    db.execute(_SET_BALANCE, {"method_id": method_id, "balance": balance})


def insert_payment(
    db: Session, order_id: int, method_id: int, kind: str, amount: float, now: datetime
) -> None:
    db.execute(
        _INSERT_PAYMENT,
        {
            "order_id": order_id,
            "payment_method_id": method_id,
            "kind": kind,
            "amount": amount,
            "created_at": now,
        },
    )


def order_payments(db: Session, order_id: int) -> list[AnyRow]:
    """The order's payment rows (method id, kind, amount) in id order, for `net_paid`."""
    return list(db.execute(_ORDER_PAYMENTS, {"order_id": order_id}))


def net_paid(payments: list[AnyRow]) -> dict[int, float]:
    """Per payment method id: charges minus refunds on an order so far (its `order_payments`)."""
    net: dict[int, float] = defaultdict(float)
    for p in payments:
        net[p.payment_method_id] += p.amount if p.kind == "charge" else -p.amount
    return {k: cents(v) for k, v in net.items() if cents(v) > 0}


def debited(method: PaymentMethod | AnyRow, amount: float) -> float:
    """A gift card or store credit balance after paying `amount`; refused if it is short."""
    assert method.balance is not None
    if method.balance + 1e-9 < amount:
        raise ToolError(
            f"{method.code} has a balance of {money(method.balance)}, "
            f"not enough to pay {money(amount)}.",
            hint="Ask the customer for another payment method.",
            code="insufficient_balance",
        )
    return cents(method.balance - amount)


def charge(
    db: Session, order_id: int, method: PaymentMethod | AnyRow, amount: float, now: datetime
) -> None:
    """Charge the order to the method: a gift card or store credit balance goes down at once
    (refused if it is short); every method gets a charge row."""
    amount = cents(amount)
    if method.balance is not None:
        balance = debited(method, amount)
        if balance != method.balance:
            set_balance(db, method.id, balance)
    insert_payment(db, order_id, method.id, "charge", amount, now)


def refund(db: Session, order_id: int, method_id: int, amount: float, now: datetime) -> None:
    """Refunds to a gift card or store credit raise its balance at once; every method gets a
    refund row (cards are refunded by the payment processor)."""
    amount = cents(amount)
    balance = db.execute(_METHOD_BALANCE, {"method_id": method_id}).scalar_one()
    if balance is not None and cents(balance + amount) != balance:
        set_balance(db, method_id, cents(balance + amount))
    insert_payment(db, order_id, method_id, "refund", amount, now)


def settle(
    db: Session, order_id: int, method: PaymentMethod | AnyRow | None, diff: float, now: datetime
) -> None:
    """Charge (diff > 0) or refund (diff < 0) a price difference to the chosen method."""
    if cents(diff) == 0:
        return
    if method is None:
        raise ToolError(
            f"The price difference is {money(diff)}; a payment_method_id is required to settle it.",
            hint="Ask the customer which of their payment methods to use.",
            code="invalid_arguments",
        )
    if diff > 0:
        charge(db, order_id, method, diff, now)
    else:
        refund(db, order_id, method.id, -diff, now)


# --- the order view, read with Core ----------------------------------------------------------
# Core, not ORM lazy loads: this is the hottest read; see bench/history/suite.md. The statements are
# built once, with bind parameters: building and cache-keying a select per call costs more than
# running it. Each list keeps the order of the ORM relationship it replaces (items by line_no,
# the others by id).

_ORDER_ID = bindparam("order_id", type_=Integer)

_ORDER = select(
    ORDERS.c.id,
    ORDERS.c.order_number,
    ORDERS.c.customer_id,
    ORDERS.c.status,
    ORDERS.c.created_at,
    ORDERS.c.total,
    ORDERS.c.ship_line1,
    ORDERS.c.ship_line2,
    ORDERS.c.ship_city,
    ORDERS.c.ship_state,
    ORDERS.c.ship_zip,
    ORDERS.c.ship_country,
    # Most orders have neither: their two lists are then not queried at all.
    exists().where(RETURNS.c.order_id == ORDERS.c.id).label("has_returns"),
    exists().where(EXCHANGES.c.order_id == ORDERS.c.id).label("has_exchanges"),
)
_ORDER_BY_ID = _ORDER.where(ORDERS.c.id == _ORDER_ID)
_ORDER_BY_NUMBER = _ORDER.where(ORDERS.c.order_number == bindparam("number"))

_ITEMS = (
    select(
        VARIANTS.c.sku,
        VARIANTS.c.product_id,
        PRODUCTS.c.name,
        VARIANTS.c.options,
        ORDER_ITEMS.c.quantity,
        ORDER_ITEMS.c.unit_price,
        ORDER_ITEMS.c.status,
    )
    .select_from(ORDER_ITEMS)
    .join(VARIANTS, VARIANTS.c.id == ORDER_ITEMS.c.variant_id)
    .join(PRODUCTS, PRODUCTS.c.id == VARIANTS.c.product_id)
    .where(ORDER_ITEMS.c.order_id == _ORDER_ID)
    .order_by(ORDER_ITEMS.c.line_no)
)

_PAYMENTS = (
    select(
        PAYMENTS.c.kind,
        PAYMENT_METHODS.c.code,
        PAYMENT_METHODS.c.kind.label("method_kind"),
        PAYMENTS.c.amount,
    )
    .select_from(PAYMENTS)
    .join(PAYMENT_METHODS, PAYMENT_METHODS.c.id == PAYMENTS.c.payment_method_id)
    .where(PAYMENTS.c.order_id == _ORDER_ID)
    .order_by(PAYMENTS.c.id)
)

# One row per returned line (outer joins: a return without lines still shows, with no SKU).
_RETURN_LINES = (
    select(
        RETURNS.c.id,
        RETURNS.c.code,
        RETURNS.c.status,
        RETURNS.c.reason,
        RETURNS.c.refund_amount,
        VARIANTS.c.sku,
    )
    .select_from(RETURNS)
    .outerjoin(RETURN_ITEMS, RETURN_ITEMS.c.return_id == RETURNS.c.id)
    .outerjoin(ORDER_ITEMS, ORDER_ITEMS.c.id == RETURN_ITEMS.c.order_item_id)
    .outerjoin(VARIANTS, VARIANTS.c.id == ORDER_ITEMS.c.variant_id)
    .where(RETURNS.c.order_id == _ORDER_ID)
    .order_by(RETURNS.c.id, RETURN_ITEMS.c.id)
)

_FROM_VARIANT, _TO_VARIANT = VARIANTS.alias("from_variant"), VARIANTS.alias("to_variant")
_EXCHANGES = (
    select(
        EXCHANGES.c.code,
        EXCHANGES.c.status,
        _FROM_VARIANT.c.sku.label("from_sku"),
        _TO_VARIANT.c.sku.label("to_sku"),
        EXCHANGES.c.price_difference,
    )
    .select_from(EXCHANGES)
    .join(_FROM_VARIANT, _FROM_VARIANT.c.id == EXCHANGES.c.from_variant_id)
    .join(_TO_VARIANT, _TO_VARIANT.c.id == EXCHANGES.c.to_variant_id)
    .where(EXCHANGES.c.order_id == _ORDER_ID)
    .order_by(EXCHANGES.c.id)
)


def order_view(db: Session, order_id: int) -> dict[str, Any]:
    """Everything support may see about one order, as stored.

    Write tools call it after `db.flush()` on their ORM objects (Session.execute autoflushes
    before Core statements too, so the read sees every pending change either way).
    """
    return _order_view(db, db.execute(_ORDER_BY_ID, {"order_id": order_id}).one())


def order_view_by_number(db: Session, order_number: str) -> dict[str, Any]:
    """The order view of an order number as the agent typed it; not_found like get_order."""
    number = normalize_order_number(order_number)
    row = db.execute(_ORDER_BY_NUMBER, {"number": number}).first()
    if row is None:
        raise no_such_order(number)
    return _order_view(db, row)


def _order_view(db: Session, o: AnyRow) -> dict[str, Any]:
    """Core, not ORM lazy loads: this is the hottest read; see bench/history/suite.md."""
    key = {"order_id": o.id}
    return {
        "order_number": o.order_number,
        "customer_id": o.customer_id,
        "status": o.status,
        "created_at": o.created_at.isoformat(),
        "total": cents(o.total),
        "shipping_address": {
            "line1": o.ship_line1,
            "line2": o.ship_line2,
            "city": o.ship_city,
            "state": o.ship_state,
            "zip": o.ship_zip,
            "country": o.ship_country,
        },
        "items": [
            {
                "sku": i.sku,
                "product_id": i.product_id,
                "product_name": i.name,
                "options": i.options,
                "quantity": i.quantity,
                "unit_price": cents(i.unit_price),
                "status": i.status,
            }
            for i in db.execute(_ITEMS, key)
        ],
        "payments": [
            {
                "type": p.kind,
                "payment_method_id": p.code,
                "method_kind": p.method_kind,
                "amount": cents(p.amount),
            }
            for p in db.execute(_PAYMENTS, key)
        ],
        "returns": _order_returns(db, key) if o.has_returns else [],
        "exchanges": _order_exchanges(db, key) if o.has_exchanges else [],
    }


def _order_returns(db: Session, key: dict[str, int]) -> list[dict[str, Any]]:
    """Returns with the SKUs of their lines, grouped from one row per returned line."""
    returns: dict[int, dict[str, Any]] = {}
    for r in db.execute(_RETURN_LINES, key):
        view = returns.get(r.id)
        if view is None:
            view = returns[r.id] = {
                "code": r.code,
                "status": r.status,
                "reason": r.reason,
                "refund_amount": cents(r.refund_amount),
                "skus": [],
            }
        if r.sku is not None:
            view["skus"].append(r.sku)
    return list(returns.values())


def _order_exchanges(db: Session, key: dict[str, int]) -> list[dict[str, Any]]:
    """Exchanged lines with the SKUs they went from and to."""
    return [
        {
            "code": e.code,
            "status": e.status,
            "from_sku": e.from_sku,
            "to_sku": e.to_sku,
            "price_difference": cents(e.price_difference),
        }
        for e in db.execute(_EXCHANGES, key)
    ]


class AddressFields(ToolArgs):
    """A full postal address, as the customer states it."""

    line1: str = Field(description="Street address, e.g. '742 Evergreen Terrace'.")
    line2: str | None = Field(None, description="Apartment, suite or unit; null if none.")
    city: str = Field(description="City.")
    state: str = Field(description="State or region code, e.g. 'CA'.")
    zip: str = Field(description="Postal (zip) code.")
    country: str = Field(description="Country, e.g. 'USA'.")
