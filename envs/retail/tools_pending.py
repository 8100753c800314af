"""Write tools for pending orders: cancel, swap item variants, change address or payment.

Every check runs before the first write, so a refused call changes nothing even before the
framework rolls its transaction back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy.orm import Session

from app.environment import ToolArgs, ToolContext, ToolError, tool
from envs.retail.models import Order, OrderItem, PaymentMethod, Variant
from envs.retail.ops import (
    AddressFields,
    active_lines,
    audit,
    cents,
    charge,
    get_payment_method,
    get_variant,
    money,
    net_paid,
    order_view,
    owned_order,
    refund,
    require_status,
    settle,
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
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "cancelled")
    for method_id, amount in net_paid(order).items():
        refund(order, db.get_one(PaymentMethod, method_id), amount, ctx.now)
    for line in order.items:
        if line.status == "active":
            line.variant.stock += line.quantity
            line.status = "cancelled"
    order.status = "cancelled"
    audit(db, ctx, "cancel_order", "orders", order.order_number, reason=args.reason)
    db.flush()
    return order_view(db, order.id)


def check_swaps(
    db: Session, order: Order, from_skus: list[str], to_skus: list[str]
) -> list[tuple[OrderItem, Variant]]:
    """Pair each active line with its new variant: same product, available and in stock."""
    if len(from_skus) != len(to_skus):
        raise ToolError(
            "from_skus and to_skus must have the same length (one new SKU per item).",
            code="invalid_arguments",
        )
    lines = active_lines(order, from_skus)
    pairs = [(line, get_variant(db, sku)) for line, sku in zip(lines, to_skus, strict=True)]
    needed: dict[int, int] = {}
    for line, new in pairs:
        old = line.variant
        if new.product_id != old.product_id:
            raise ToolError(
                f"{new.sku} is a {new.product.name}, but {old.sku} is a {old.product.name}; "
                "an item can only be changed to another variant of the same product.",
                hint="For a different product the customer must place a new order.",
            )
        if new.id == old.id:
            raise ToolError(f"Item {old.sku} already is that variant.", code="invalid_arguments")
        needed[new.id] = needed.get(new.id, 0) + line.quantity
        if not new.available or new.stock < needed[new.id]:
            state = "discontinued" if not new.available else f"{new.stock} in stock"
            raise ToolError(
                f"{new.sku} ({new.options}) is not available: {state}, {needed[new.id]} needed.",
                hint="get_product_details shows which variants are available and in stock.",
            )
    return pairs


def optional_method(order: Order, code: str | None) -> PaymentMethod | None:
    return None if code is None else get_payment_method(order.customer, code)


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
    pairs = check_swaps(db, order, args.from_skus, args.to_skus)
    diff = cents(sum((new.price - line.unit_price) * line.quantity for line, new in pairs))
    method = optional_method(order, args.payment_method_id)
    settle(order, method, diff, ctx.now)
    swapped = [(line.variant.sku, new.sku) for line, new in pairs]
    for line, new in pairs:
        line.variant.stock += line.quantity
        new.stock -= line.quantity
        line.variant, line.unit_price = new, new.price
    order.total = cents(order.total + diff)
    audit(
        db,
        ctx,
        "modify_items",
        "orders",
        order.order_number,
        swaps=swapped,
        price_difference=money(diff),
        payment_method_id=method.code if method and diff else None,
    )
    db.flush()
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
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "modified")
    order.ship_line1, order.ship_line2 = args.line1, args.line2 or None
    order.ship_city, order.ship_state = args.city, args.state
    order.ship_zip, order.ship_country = args.zip, args.country
    audit(db, ctx, "modify_address", "orders", order.order_number, zip=args.zip)
    db.flush()
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
    order = owned_order(db, args.order_number, args.customer_id)
    require_status(order, "pending", "modified")
    paid = net_paid(order)
    if len(paid) != 1:
        raise ToolError(
            f"Order {order.order_number} is paid with {len(paid)} payment methods; "
            "only an order paid by a single method can switch payment method."
        )
    (old_id, amount), new = (
        next(iter(paid.items())),
        get_payment_method(order.customer, args.payment_method_id),
    )
    if new.id == old_id:
        raise ToolError(
            f"Order {order.order_number} is already paid with {new.code}.", code="invalid_arguments"
        )
    charge(order, new, amount, ctx.now)
    refund(order, db.get_one(PaymentMethod, old_id), amount, ctx.now)
    audit(db, ctx, "modify_payment", "orders", order.order_number, payment_method_id=new.code)
    db.flush()
    return order_view(db, order.id)
