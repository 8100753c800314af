"""Retail tools on a real in-memory SQLite: returns, exchanges, replays and rollbacks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.authoring.replay import dump, open_task_db
from app.sdk.environment import ToolError
from envs.retail import ENVIRONMENT
from envs.retail.models import PaymentMethod, Product
from envs.retail.testing import an_order, fails, gift_card, run, swappable


@pytest.fixture()
def db() -> Iterator[Session]:
    session, _ = open_task_db(ENVIRONMENT)
    yield session
    session.close()


# ---- returns and exchanges ----------------------------------------------------------------------


def test_return_only_delivered_and_refund_goes_to_original_or_gift_card(db: Session) -> None:
    pending = an_order(db, "pending")
    err = fails(
        db,
        "return_delivered_order_items",
        order_number=pending.order_number,
        customer_id=pending.customer_id,
        skus=[pending.items[0].variant.sku],
        reason="defective",
        refund_method_id="gift_card_0",
    )
    assert "pending" in err.message and pending.order_number in err.message
    assert err.code == "order_not_delivered"

    order = an_order(db, "delivered", single_payer=True, items=2)
    c = order.customer
    payer = order.payments[0].payment_method
    stranger_card = PaymentMethod(
        code=f"card_99{c.id:05d}", customer_id=c.id, kind="card", brand="visa", last4="4242"
    )
    db.add(stranger_card)
    db.commit()
    first, second = (line.variant.sku for line in order.items[:2])
    err = fails(
        db,
        "return_delivered_order_items",
        order_number=order.order_number,
        customer_id=c.id,
        skus=[first],
        reason="defective",
        refund_method_id=stranger_card.code,
    )
    assert "original payment method" in err.message and err.code == "refund_method"

    gift = gift_card(db, c, 1.0)
    r1 = run(
        db,
        "return_delivered_order_items",
        order_number=order.order_number,
        customer_id=c.id,
        skus=[first],
        reason="defective",
        refund_method_id=gift.code,
    )
    number = order.order_number.lstrip("#")
    assert r1["return_code"] == f"RT-{number}-1"
    db.refresh(gift)
    assert gift.balance == pytest.approx(1.0 + r1["refund_amount"])
    err = fails(
        db,
        "return_delivered_order_items",
        order_number=order.order_number,
        customer_id=c.id,
        skus=[first],
        reason="defective",
        refund_method_id=gift.code,
    )
    assert "already returned" in err.message and err.code == "already_returned"
    r2 = run(
        db,
        "return_delivered_order_items",
        order_number=order.order_number,
        customer_id=c.id,
        skus=[second],
        reason="wrong_item",
        refund_method_id=payer.code,
    )
    assert r2["return_code"] == f"RT-{number}-2"
    assert r2["order"]["payments"][-1] == {
        "type": "refund",
        "payment_method_id": payer.code,
        "method_kind": payer.kind,
        "amount": r2["refund_amount"],
    }


def test_return_replays_identically() -> None:
    """Same calls on two fresh databases give identical states, codes and audit rows included."""
    dumps = []
    for _ in range(2):
        session, _ = open_task_db(ENVIRONMENT)
        order = an_order(session, "delivered", single_payer=True)
        run(
            session,
            "return_delivered_order_items",
            order_number=order.order_number,
            customer_id=order.customer_id,
            skus=[order.items[0].variant.sku],
            reason="no_longer_needed",
            refund_method_id=order.payments[0].payment_method.code,
        )
        dumps.append(dump(session, ENVIRONMENT))
        session.close()
    assert dumps[0] == dumps[1]


def test_exchange_checks_stock_and_records_codes(db: Session) -> None:
    order = an_order(db, "delivered", single_payer=True)
    sku, new = swappable(db, order)
    payer = order.payments[0].payment_method.code
    args = {
        "order_number": order.order_number,
        "customer_id": order.customer_id,
        "from_skus": [sku],
        "payment_method_id": payer,
    }
    stock = new.stock
    new.stock = 0
    db.commit()
    err = fails(db, "exchange_delivered_order_items", to_skus=[new.sku], **args)
    assert "stock" in err.message and err.code == "out_of_stock"
    new.stock = stock
    db.commit()
    line = next(i for i in order.items if i.variant.sku == sku)
    result = run(db, "exchange_delivered_order_items", to_skus=[new.sku], **args)
    assert result["exchange_codes"] == [f"EX-{order.order_number.lstrip('#')}-{line.line_no}"]
    assert new.stock == stock - line.quantity
    assert line.status == "exchanged"
    pending = an_order(db, "pending")
    err = fails(
        db,
        "exchange_delivered_order_items",
        order_number=pending.order_number,
        customer_id=pending.customer_id,
        from_skus=[pending.items[0].variant.sku],
        to_skus=[new.sku],
        payment_method_id=None,
    )
    assert "pending" in err.message


def test_error_mid_tool_leaves_nothing_after_rollback(
    db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail late in a cancel (its Core statements have already written refunds and restock)."""
    import envs.retail.tools_pending as pending_tools

    def boom(*_: Any, **__: Any) -> None:
        raise ToolError("audit store unavailable")

    monkeypatch.setattr(pending_tools, "audit", boom)
    order = an_order(db, "pending")
    before = dump(db, ENVIRONMENT)
    with pytest.raises(ToolError):
        run(
            db,
            "cancel_pending_order",
            order_number=order.order_number,
            customer_id=order.customer_id,
            reason="no_longer_needed",
        )
    db.rollback()
    assert dump(db, ENVIRONMENT) == before
    assert db.scalar(select(func.count()).select_from(Product)) == 40
