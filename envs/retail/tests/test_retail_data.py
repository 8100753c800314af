"""The base dataset: the promised size, internally consistent, drawn from its rng."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.authoring.replay import dump, memory_engine
from envs.retail import ENVIRONMENT
from envs.retail.models import (
    ORDER_STATUSES,
    Address,
    Customer,
    Order,
    OrderItem,
    PaymentMethod,
    Product,
    Variant,
)


def build(seed: int = ENVIRONMENT.base_seed) -> Session:
    db = Session(memory_engine(ENVIRONMENT))
    ENVIRONMENT.build_base(db, random.Random(seed))
    db.commit()
    return db


def count(db: Session, model: Any) -> int:
    return int(db.scalar(select(func.count()).select_from(model)) or 0)


def test_the_rng_drives_the_data() -> None:
    # That one seed builds the same data twice is the contract's check (envs check).
    other = dump(build(ENVIRONMENT.base_seed + 1), ENVIRONMENT)
    assert other != dump(build(), ENVIRONMENT), "the rng must drive the data"


def test_sizes_and_spread() -> None:
    db = build()
    assert count(db, Customer) == 300
    assert count(db, Product) == 40
    assert 190 <= count(db, Variant) <= 210
    assert count(db, Order) == 1000
    statuses = dict(db.execute(select(Order.status, func.count()).group_by(Order.status)).all())
    assert set(statuses) == set(ORDER_STATUSES)
    assert min(statuses.values()) >= 30
    # Some variants are sold out or discontinued, so stock rules matter.
    assert (db.scalar(select(func.count()).where(Variant.stock == 0)) or 0) > 5
    assert (db.scalar(select(func.count()).where(Variant.available.is_(False))) or 0) > 2


def test_ids_stay_below_the_task_range() -> None:
    db = build()
    for table in ENVIRONMENT.metadata.tables.values():
        if "id" not in table.c:  # the conversation with the customer, keyed by turn
            continue
        biggest = db.scalar(select(func.max(table.c.id)))
        assert biggest is None or biggest < 100_000, table.name


def test_every_customer_can_be_authenticated_and_pay() -> None:
    db = build()
    for c in db.scalars(select(Customer)):
        assert sum(a.is_default for a in c.addresses) == 1
        assert any(m.kind == "card" for m in c.payment_methods)
    # Name + zip identifies exactly one customer.
    pairs = db.execute(
        select(Customer.first_name, Customer.last_name, Address.zip).join(Address)
    ).all()
    per_key: dict[tuple[str, str, str], int] = {}
    for first, last, zip_code in pairs:
        key = (first, last, zip_code)
        per_key[key] = per_key.get(key, 0) + 1
    assert max(per_key.values()) == 1
    assert (db.scalar(select(func.count()).where(PaymentMethod.kind == "gift_card")) or 0) > 50


def test_orders_are_consistent() -> None:
    db = build()
    for order in db.scalars(select(Order)):
        items_total = sum(i.unit_price * i.quantity for i in order.items)
        assert abs(items_total - order.total) < 0.005, order.order_number
        charged = sum(p.amount for p in order.payments if p.kind == "charge")
        assert charged >= order.total - 0.005, order.order_number
        if order.status in ("pending", "processed", "shipped"):
            assert {i.status for i in order.items} == {"active"}
        if order.status == "cancelled":
            assert {i.status for i in order.items} == {"cancelled"}
        assert all(p.payment_method.customer_id == order.customer_id for p in order.payments)
    assert count(db, OrderItem) > 1500
