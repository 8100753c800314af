"""Helpers for retail tests: run tools directly on an in-memory database, pick base rows."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.testing import ToolCalls
from envs.retail import ENVIRONMENT
from envs.retail.models import Customer, Order, PaymentMethod, Variant

NOW = ENVIRONMENT.default_now


CALLS = ToolCalls(ENVIRONMENT)
run, fails = CALLS.run, CALLS.fails


def an_order(db: Session, status: str, *, single_payer: bool = False, items: int = 1) -> Order:
    for order in db.scalars(select(Order).where(Order.status == status).order_by(Order.id)):
        payers = {p.payment_method_id for p in order.payments}
        if len(order.items) >= items and (not single_payer or len(payers) == 1):
            return order
    raise LookupError(status)


def swappable(db: Session, order: Order, *, in_stock: bool = True) -> tuple[str, Variant]:
    """An item of the order and another variant of its product (in stock or sold out)."""
    for line in order.items:
        for v in line.variant.product.variants:
            if v.id != line.variant_id and v.available and (v.stock > 2) == in_stock:
                return line.variant.sku, v
    raise LookupError("no swap")


def gift_card(db: Session, customer: Customer, balance: float) -> PaymentMethod:
    card = PaymentMethod(
        code=f"gift_card_99{customer.id:05d}",
        customer_id=customer.id,
        kind="gift_card",
        balance=balance,
    )
    db.add(card)
    db.commit()
    return card
