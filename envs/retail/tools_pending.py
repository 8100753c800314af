"""Write tools for pending orders: cancel, swap item variants, change address or payment.

Every check runs before the first write, so a refused call changes nothing even before the
framework rolls its transaction back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.retail.ops import (
    ORDER_ITEMS,
    PRODUCTS,
    VARIANTS,
    AddressFields,
    active_lines,
    audit,
    cents,
    customer_methods,
    debited,
    get_variant,
    insert_payment,
    money,
    net_paid,
    order_lines,
    order_payments,
    order_view,
    owned_order,
    pick_method,
    refund,
    require_status,
    set_balance,
    settle,
    update_order,
)


class CancelArgs(ToolArgs):
    order_number: str = Field(description="The pending order to cancel, e.g. '#W1234567'.")
    customer_id: int = Field(description="The authenticated customer's id; must own the order.")
    reason: Literal["no_longer_needed", "ordered_by_mistake"] = Field(
        description="Why the customer cancels: 'no_longer_needed' or 'ordered_by_mistake'."
    )


@tool
def cancel_pending_order(db: Session, args: CancelArgs, ctx: ToolContext) -> dict[str, Any]:
    """Cancel a pending order: every payment is refunded to the method it came from (gift card and
    store credit balances go back up at once, cards get a refund), and the items go back in stock.

    Only pending orders can be cancelled; delivered ones are returned instead.
    """
    # Core, not ORM: hot write path; see bench/history/suite.md.
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "cancelled")
    for method_id, amount in net_paid(order_payments(db, order.id)).items():
        refund(db, order.id, method_id, amount, ctx.now)
    active = [i for i in db.execute(_ORDER_LINES, {"order_id": order.id}) if i.status == "active"]
    # The statements keep the order of the ORM version this replaced: each line but the last,
    # then the audit row and the order, then the last.
    for line in active[:-1]:
        cancel_line(db, line)
    audit(db, ctx, "cancel_order", "orders", order.order_number, reason=args.reason)
    update_order(db, order, {"status": "cancelled"})
    for line in active[-1:]:
        cancel_line(db, line)
    return order_view(db, order.id)


_ORDER_LINES = (
    select(ORDER_ITEMS.c.id, ORDER_ITEMS.c.variant_id, ORDER_ITEMS.c.quantity, ORDER_ITEMS.c.status)
    .where(ORDER_ITEMS.c.order_id == bindparam("order_id"))
    .order_by(ORDER_ITEMS.c.line_no)
)
_RESTOCK = (
    update(VARIANTS)
    .where(VARIANTS.c.id == bindparam("variant_id"))
    .values(stock=VARIANTS.c.stock + bindparam("quantity"))
)
_SET_LINE_STATUS = (
    update(ORDER_ITEMS)
    .where(ORDER_ITEMS.c.id == bindparam("item_id"))
    .values(status=bindparam("status"))
)


def cancel_line(db: Session, line: AnyRow) -> None:
    """Put an active line's units back in stock and mark it cancelled."""
    db.execute(_RESTOCK, {"variant_id": line.variant_id, "quantity": line.quantity})
    db.execute(_SET_LINE_STATUS, {"item_id": line.id, "status": "cancelled"})


_PRODUCT_NAME = select(PRODUCTS.c.name).where(PRODUCTS.c.id == bindparam("product_id"))
_SET_STOCK = (
    update(VARIANTS)
    .where(VARIANTS.c.id == bindparam("variant_id"))
    .values(stock=bindparam("stock"))
)
_SET_LINE_VARIANT = (
    update(ORDER_ITEMS)
    .where(ORDER_ITEMS.c.id == bindparam("item_id"))
    .values(variant_id=bindparam("variant_id"))
)
_SET_LINE_VARIANT_PRICE = _SET_LINE_VARIANT.values(unit_price=bindparam("unit_price"))
_STOCK = select(VARIANTS.c.stock).where(VARIANTS.c.id == bindparam("variant_id"))


def check_swaps(
    db: Session, order: AnyRow, items: list[AnyRow], from_skus: list[str], to_skus: list[str]
) -> list[tuple[AnyRow, AnyRow]]:
    """Pair each active line (of `items`, the order's `order_lines`) with its new variant: same
    product, available and in stock."""
    if len(from_skus) != len(to_skus):
        raise ToolError(
            "from_skus and to_skus must have the same length (one new SKU per item).",
            code="invalid_arguments",
        )
    lines = active_lines(order, items, from_skus)
    pairs = [(line, get_variant(db, sku)) for line, sku in zip(lines, to_skus, strict=True)]
    needed: dict[int, int] = {}
    for line, new in pairs:
        if new.product_id != line.product_id:
            new_name, old_name = (
                db.execute(_PRODUCT_NAME, {"product_id": pid}).scalar_one()
                for pid in (new.product_id, line.product_id)
            )
            raise ToolError(
                f"{new.sku} is a {new_name}, but {line.sku} is a {old_name}; "
                "an item can only be changed to another variant of the same product.",
                hint="For a different product the customer must place a new order.",
                code="different_product",
            )
        if new.id == line.variant_id:
            raise ToolError(f"Item {line.sku} already is that variant.", code="invalid_arguments")
        needed[new.id] = needed.get(new.id, 0) + line.quantity
        if not new.available or new.stock < needed[new.id]:
            state = "discontinued" if not new.available else f"{new.stock} in stock"
            raise ToolError(
                f"{new.sku} ({new.options}) is not available: {state}, {needed[new.id]} needed.",
                hint="get_product_details shows which variants are available and in stock.",
                code="out_of_stock",
            )
    return pairs


def optional_method(db: Session, order: AnyRow, code: str | None) -> AnyRow | None:
    if code is None:
        return None
    return pick_method(order.customer_id, customer_methods(db, order.customer_id), code)


def set_stocks(db: Session, deltas: list[tuple[int, int]]) -> None:
    """Apply (variant id, units) stock changes in turn; then UPDATE each variant whose stock
    ends changed, by id (what an ORM flush of the same in-memory changes wrote)."""
    start: dict[int, int] = {}
    stock: dict[int, int] = {}
    for variant_id, units in deltas:
        if variant_id not in stock:
            current = db.execute(_STOCK, {"variant_id": variant_id}).scalar_one()
            start[variant_id] = stock[variant_id] = current
        stock[variant_id] += units
    for variant_id in sorted(stock):
        if stock[variant_id] != start[variant_id]:
            db.execute(_SET_STOCK, {"variant_id": variant_id, "stock": stock[variant_id]})


class ModifyItemsArgs(ToolArgs):
    order_number: str = Field(description="The pending order, e.g. '#W1234567'.")
    customer_id: int = Field(description="The authenticated customer's id; must own the order.")
    from_skus: list[str] = Field(description="SKUs of the order's items to change, each once.")
    to_skus: list[str] = Field(
        description="The new SKU for each item of from_skus, in the same order; same product."
    )
    payment_method_id: str | None = Field(
        None,
        description="The customer's payment method that pays or receives the price difference, "
        "e.g. 'gift_card_1234567'; null only if the prices are equal.",
    )


@tool
def modify_pending_order_items(
    db: Session, args: ModifyItemsArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Change items of a pending order to other variants of the same product (another size or
    colour). New variants must be available and in stock. The price difference is charged to, or
    refunded to, the given payment method; a gift card must hold enough balance to pay it.

    Only pending orders can be modified. Collect every change first and make them in one call.
    """
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "modified")
    items = order_lines(db, order.id)
    pairs = check_swaps(db, order, items, args.from_skus, args.to_skus)
    diff = cents(sum((new.price - line.unit_price) * line.quantity for line, new in pairs))
    method = optional_method(db, order, args.payment_method_id)
    settle(db, order.id, method, diff, ctx.now)
    # As the ORM flush wrote them: the order's total, the variants' stocks, then the lines.
    update_order(db, order, {"total": cents(order.total + diff)})
    moves = [((line.variant_id, line.quantity), (new.id, -line.quantity)) for line, new in pairs]
    set_stocks(db, [move for pair in moves for move in pair])
    for line, new in sorted(pairs, key=lambda pair: pair[0].id):
        if new.price != line.unit_price:
            db.execute(
                _SET_LINE_VARIANT_PRICE,
                {"item_id": line.id, "variant_id": new.id, "unit_price": new.price},
            )
        else:
            db.execute(_SET_LINE_VARIANT, {"item_id": line.id, "variant_id": new.id})
    audit(
        db,
        ctx,
        "modify_items",
        "orders",
        order.order_number,
        swaps=[(line.sku, new.sku) for line, new in pairs],
        price_difference=money(diff),
        payment_method_id=method.code if method and diff else None,
    )
    return order_view(db, order.id)


class PendingOrderRef(ToolArgs):
    order_number: str = Field(description="The pending order, e.g. '#W1234567'.")
    customer_id: int = Field(description="The authenticated customer's id; must own the order.")


# Bases listed last come first in the schema: the order reference, then the address.
class ModifyAddressArgs(AddressFields, PendingOrderRef):
    pass


@tool
def modify_pending_order_address(
    db: Session, args: ModifyAddressArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Change the shipping address of a pending order (the address book is not changed).

    Only pending orders can be modified; processed and shipped orders are already on their way.
    """
    # Core, not ORM: hot write path; see bench/history/suite.md.
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "modified")
    new = {
        "ship_line1": args.line1,
        "ship_line2": args.line2 or None,
        "ship_city": args.city,
        "ship_state": args.state,
        "ship_zip": args.zip,
        "ship_country": args.country,
    }
    # The audit row first, as the ORM version this replaced wrote it.
    audit(db, ctx, "modify_address", "orders", order.order_number, zip=args.zip)
    update_order(db, order, new)
    return order_view(db, order.id)


class ModifyPaymentArgs(ToolArgs):
    order_number: str = Field(description="The pending order, e.g. '#W1234567'.")
    customer_id: int = Field(description="The authenticated customer's id; must own the order.")
    payment_method_id: str = Field(
        description="The customer's payment method that should pay the order instead."
    )


@tool
def modify_pending_order_payment(
    db: Session, args: ModifyPaymentArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Pay a pending order with another of the customer's payment methods: the amount paid is
    refunded to the old method and charged to the new one (a gift card needs enough balance).

    Only for pending orders paid by a single method; the new method must be a different one.
    """
    # Core, not ORM: hot write path; see bench/history/suite.md.
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "modified")
    paid = net_paid(order_payments(db, order.id))
    if len(paid) != 1:
        raise ToolError(
            f"Order {order.order_number} is paid with {len(paid)} payment methods; "
            "only an order paid by a single method can switch payment method.",
            code="split_payment",
        )
    methods = customer_methods(db, order.customer_id)
    (old_id, amount), new = (
        next(iter(paid.items())),
        pick_method(order.customer_id, methods, args.payment_method_id),
    )
    if new.id == old_id:
        raise ToolError(
            f"Order {order.order_number} is already paid with {new.code}.", code="invalid_arguments"
        )
    amount = cents(amount)
    old = next(m for m in methods if m.id == old_id)
    balances = {}  # method id -> new balance, for gift cards and store credit
    if new.balance is not None:
        balances[new.id] = debited(new, amount)
    if old.balance is not None:
        balances[old.id] = cents(old.balance + amount)
    # In the order of the ORM version this replaced: audit row, balances by method id, charge,
    # then refund.
    audit(db, ctx, "modify_payment", "orders", order.order_number, payment_method_id=new.code)
    for method_id in sorted(balances):
        set_balance(db, method_id, balances[method_id])
    insert_payment(db, order.id, new.id, "charge", amount, ctx.now)
    insert_payment(db, order.id, old.id, "refund", amount, ctx.now)
    return order_view(db, order.id)
