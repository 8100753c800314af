"""Write tools for delivered orders: return items for a refund, or exchange them for a variant.

Core, not ORM: hot write paths (a generated task replays them twice; bench/history/taskgen.md). The
statements keep the order of the ORM versions they replaced: the new rows, then the order, the
variants and the lines, then the audit row.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.retail.ops import (
    EXCHANGES,
    ORDER_ITEMS,
    PAYMENT_METHODS,
    PAYMENTS,
    RETURN_ITEMS,
    RETURNS,
    active_lines,
    audit,
    cents,
    customer_methods,
    money,
    order_lines,
    order_payments,
    order_view,
    owned_order,
    pick_method,
    refund,
    require_status,
    settle,
    update_order,
)
from envs.retail.tools_pending import check_swaps, optional_method, set_stocks

_RETURN_COUNT = select(func.count()).where(RETURNS.c.order_id == bindparam("order_id"))
_INSERT_RETURN = insert(RETURNS).returning(RETURNS.c.id)
_INSERT_RETURN_ITEM = insert(RETURN_ITEMS)
_INSERT_EXCHANGE = insert(EXCHANGES)
_SET_LINE_STATUS = (
    update(ORDER_ITEMS)
    .where(ORDER_ITEMS.c.id == bindparam("item_id"))
    .values(status=bindparam("status"))
)
_CHARGED_CODES = (
    select(PAYMENT_METHODS.c.code)
    .select_from(PAYMENTS)
    .join(PAYMENT_METHODS, PAYMENT_METHODS.c.id == PAYMENTS.c.payment_method_id)
    .where(PAYMENTS.c.order_id == bindparam("order_id"), PAYMENTS.c.kind == "charge")
)


def closed_status(items: list[AnyRow], changed: dict[int, str]) -> str | None:
    """A delivered order closes once no line is left active: returned if every line came back.
    `changed`: line id -> its new status in this call. None: still open."""
    statuses = [changed.get(line.id, line.status) for line in items]
    if any(status == "active" for status in statuses):
        return None
    return "returned" if all(status == "returned" for status in statuses) else "exchanged"


def close_lines(db: Session, order: AnyRow, items: list[AnyRow], changed: dict[int, str]) -> None:
    """The order's status if it closes, then each changed line's (by id, as a flush wrote them)."""
    status = closed_status(items, changed)
    if status is not None:
        update_order(db, order, {"status": status})
    for item_id in sorted(changed):
        db.execute(_SET_LINE_STATUS, {"item_id": item_id, "status": changed[item_id]})


def refund_target(db: Session, order: AnyRow, code: str) -> AnyRow:
    """The original payment method of the order, or any gift card of its customer."""
    method = pick_method(order.customer_id, customer_methods(db, order.customer_id), code)
    charged = {p.payment_method_id for p in order_payments(db, order.id) if p.kind == "charge"}
    if method.id not in charged and method.kind != "gift_card":
        originals = sorted(set(db.scalars(_CHARGED_CODES, {"order_id": order.id})))
        raise ToolError(
            f"{method.code} did not pay for order {order.order_number}; a refund goes back to the "
            "original payment method or to one of the customer's gift cards.",
            hint=f"The order was paid with: {', '.join(originals)}.",
            code="refund_method",
        )
    return method


class ReturnArgs(ToolArgs):
    order_number: str = Field(description="The delivered order, e.g. '#W1234567'.")
    customer_id: int = Field(description="The authenticated customer's id; must own the order.")
    skus: list[str] = Field(description="SKUs of the order's items to return, each once.")
    reason: Literal["defective", "wrong_item", "not_as_described", "no_longer_needed"] = Field(
        description="Why the items come back."
    )
    refund_method_id: str = Field(
        description="Where the refund goes: a payment method that paid for this order, or one "
        "of the customer's gift cards, e.g. 'gift_card_1234567'."
    )


@tool
def return_delivered_order_items(db: Session, args: ReturnArgs, ctx: ToolContext) -> dict[str, Any]:
    """Return items of a delivered order. The items' price is refunded at once to the original
    payment method or to one of the customer's gift cards. Creates a return with code
    RT-<order number>-<n>, which the customer uses to ship the items back.

    Only delivered orders; each item can be returned or exchanged once. Collect every item to
    return from the order first and return them in one call.
    """
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "delivered", "returned")
    items = order_lines(db, order.id)
    lines = active_lines(order, items, args.skus)
    method = refund_target(db, order, args.refund_method_id)
    amount = cents(sum(line.unit_price * line.quantity for line in lines))
    count = db.execute(_RETURN_COUNT, {"order_id": order.id}).scalar_one()
    code = f"RT-{order.order_number.lstrip('#')}-{count + 1}"
    return_id = db.execute(
        _INSERT_RETURN,
        {
            "code": code,
            "order_id": order.id,
            "reason": args.reason,
            "status": "requested",
            "refund_method_id": method.id,
            "refund_amount": amount,
            "created_at": ctx.now,
        },
    ).scalar_one()
    for line in lines:
        db.execute(
            _INSERT_RETURN_ITEM,
            {"return_id": return_id, "order_item_id": line.id, "quantity": line.quantity},
        )
    if amount > 0:
        refund(db, order.id, method.id, amount, ctx.now)
    close_lines(db, order, items, {line.id: "returned" for line in lines})
    audit(
        db,
        ctx,
        "return_items",
        "returns",
        code,
        order_number=order.order_number,
        skus=[line.sku for line in lines],
        refund=money(amount),
        refund_method_id=method.code,
    )
    return {"return_code": code, "refund_amount": amount, "order": order_view(db, order.id)}


class ExchangeArgs(ToolArgs):
    order_number: str = Field(description="The delivered order, e.g. '#W1234567'.")
    customer_id: int = Field(description="The authenticated customer's id; must own the order.")
    from_skus: list[str] = Field(description="SKUs of the order's items to exchange, each once.")
    to_skus: list[str] = Field(
        description="The new SKU for each item of from_skus, in the same order; same product."
    )
    payment_method_id: str | None = Field(
        None,
        description="The customer's payment method that pays or receives the price difference; "
        "null only if the prices are equal.",
    )


@tool
def exchange_delivered_order_items(
    db: Session, args: ExchangeArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Exchange items of a delivered order for other variants of the same product (another size
    or colour). The new variants must be available and in stock; the price difference is charged
    to, or refunded to, the given payment method (a gift card needs enough balance). Each
    exchanged line gets code EX-<order number>-<line>.

    Only delivered orders; each item can be returned or exchanged once. Collect every item to
    exchange from the order first and exchange them in one call.
    """
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "delivered", "exchanged")
    items = order_lines(db, order.id)
    pairs = check_swaps(db, order, items, args.from_skus, args.to_skus)
    diff = cents(sum((new.price - line.unit_price) * line.quantity for line, new in pairs))
    method = optional_method(db, order, args.payment_method_id)
    settle(db, order.id, method, diff, ctx.now)
    number = order.order_number.lstrip("#")
    codes, exchanges = [], []
    for line, new in pairs:
        # The new variant ships now; the old one is restocked only when it arrives back.
        code = f"EX-{number}-{line.line_no}"
        codes.append(code)
        exchanges.append(
            {
                "code": code,
                "order_id": order.id,
                "order_item_id": line.id,
                "from_variant_id": line.variant_id,
                "to_variant_id": new.id,
                "quantity": line.quantity,
                "price_difference": cents((new.price - line.unit_price) * line.quantity),
                "payment_method_id": method.id if method and diff else None,
                "status": "requested",
                "created_at": ctx.now,
            }
        )
    status = closed_status(items, {line.id: "exchanged" for line, _ in pairs})
    if status is not None:
        update_order(db, order, {"status": status})
    set_stocks(db, [(new.id, -line.quantity) for line, new in pairs])
    for line, _ in sorted(pairs, key=lambda pair: pair[0].id):
        db.execute(_SET_LINE_STATUS, {"item_id": line.id, "status": "exchanged"})
    for row in exchanges:
        db.execute(_INSERT_EXCHANGE, row)
    audit(
        db,
        ctx,
        "exchange_items",
        "orders",
        order.order_number,
        swaps=[(line.sku, new.sku) for line, new in pairs],
        price_difference=money(diff),
        payment_method_id=method.code if method and diff else None,
    )
    return {"exchange_codes": codes, "price_difference": diff, "order": order_view(db, order.id)}
