"""Write tools for delivered orders: return items for a refund, or exchange them for a variant."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.retail.models import Exchange, Order, PaymentMethod, Return, ReturnItem
from envs.retail.ops import (
    active_lines,
    audit,
    cents,
    get_payment_method,
    money,
    order_view,
    owned_order,
    refund,
    require_status,
    settle,
)
from envs.retail.tools_pending import check_swaps, optional_method


def close_if_done(order: Order) -> None:
    """A delivered order closes once no line is left active: returned if every line came back."""
    if any(line.status == "active" for line in order.items):
        return
    everything_returned = all(line.status == "returned" for line in order.items)
    order.status = "returned" if everything_returned else "exchanged"


def refund_target(order: Order, code: str) -> PaymentMethod:
    """The original payment method of the order, or any gift card of its customer."""
    method = get_payment_method(order.customer, code)
    charged = {p.payment_method_id for p in order.payments if p.kind == "charge"}
    if method.id not in charged and method.kind != "gift_card":
        originals = sorted({p.payment_method.code for p in order.payments if p.kind == "charge"})
        raise ToolError(
            f"{method.code} did not pay for order {order.order_number}; a refund goes back to the "
            "original payment method or to one of the customer's gift cards.",
            hint=f"The order was paid with: {', '.join(originals)}.",
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
    order = db.get_one(Order, owned_order(db, args.order_number, args.customer_id).id)
    require_status(order, "delivered", "returned")
    lines = active_lines(order, args.skus)
    method = refund_target(order, args.refund_method_id)
    amount = cents(sum(line.unit_price * line.quantity for line in lines))
    code = f"RT-{order.order_number.lstrip('#')}-{len(order.returns) + 1}"
    order.returns.append(
        Return(
            code=code,
            reason=args.reason,
            status="requested",
            refund_method_id=method.id,
            refund_amount=amount,
            created_at=ctx.now,
            items=[ReturnItem(order_item=line, quantity=line.quantity) for line in lines],
        )
    )
    if amount > 0:
        refund(db, order.id, method.id, amount, ctx.now)
    for line in lines:
        line.status = "returned"
    close_if_done(order)
    audit(
        db,
        ctx,
        "return_items",
        "returns",
        code,
        order_number=order.order_number,
        skus=[line.variant.sku for line in lines],
        refund=money(amount),
        refund_method_id=method.code,
    )
    db.flush()
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
    order = db.get_one(Order, owned_order(db, args.order_number, args.customer_id).id)
    require_status(order, "delivered", "exchanged")
    pairs = check_swaps(db, order, args.from_skus, args.to_skus)
    diff = cents(sum((new.price - line.unit_price) * line.quantity for line, new in pairs))
    method = optional_method(order, args.payment_method_id)
    settle(db, order.id, method, diff, ctx.now)
    number = order.order_number.lstrip("#")
    codes = []
    for line, new in pairs:
        # The new variant ships now; the old one is restocked only when it arrives back.
        new.stock -= line.quantity
        line.status = "exchanged"
        code = f"EX-{number}-{line.line_no}"
        codes.append(code)
        order.exchanges.append(
            Exchange(
                code=code,
                order_item=line,
                from_variant=line.variant,
                to_variant=new,
                quantity=line.quantity,
                price_difference=cents((new.price - line.unit_price) * line.quantity),
                payment_method_id=method.id if method and diff else None,
                status="requested",
                created_at=ctx.now,
            )
        )
    close_if_done(order)
    audit(
        db,
        ctx,
        "exchange_items",
        "orders",
        order.order_number,
        swaps=[(line.variant.sku, new.sku) for line, new in pairs],
        price_difference=money(diff),
        payment_method_id=method.code if method and diff else None,
    )
    db.flush()
    return {"exchange_codes": codes, "price_difference": diff, "order": order_view(db, order.id)}
