"""Retail tools on a real in-memory SQLite: declarations, reads, cancel, pending-order edits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.replay import dump, open_task_db
from app.sdk.compare_spec import FRAMEWORK_TABLES
from envs.retail import ENVIRONMENT
from envs.retail.models import AuditLog, Customer, Variant
from envs.retail.testing import NOW, an_order, fails, gift_card, run, swappable

READ_TOOLS = {
    "find_customer_by_email",
    "find_customer_by_name_zip",
    "get_customer_details",
    "list_customer_orders",
    "get_order_details",
    "list_products",
    "get_product_details",
}


@pytest.fixture()
def db() -> Iterator[Session]:
    session, _ = open_task_db(ENVIRONMENT)
    yield session
    session.close()


# ---- declarations -------------------------------------------------------------------------------


def test_every_tool_and_argument_is_described() -> None:
    for t in ENVIRONMENT.tools:
        assert len(t.description) > 40, t.name
        for name, field in t.args_model.model_fields.items():
            assert field.description, f"{t.name}.{name} has no description"


def test_schema_names_match_tools_and_read_flags() -> None:
    schemas = ENVIRONMENT.tool_schemas()
    assert [s["name"] for s in schemas] == [t.name for t in ENVIRONMENT.tools]
    # The shop's 14 tools, then the framework's message_user, submit_answer and decline_request.
    assert [s["name"] for s in schemas][-3:] == ["message_user", "submit_answer", "decline_request"]
    assert 12 <= len(schemas) - 3 <= 15
    assert {t.name for t in ENVIRONMENT.tools if t.read_only} == READ_TOOLS
    for s in schemas:
        params = s["parameters"]
        assert s["strict"] and params["additionalProperties"] is False
        assert params["required"] == list(params["properties"])


def test_compare_spec_names_real_tables_and_columns() -> None:
    tables = ENVIRONMENT.metadata.tables
    for name, spec in ENVIRONMENT.compare.tables.items():
        cols = set(tables[name].c.keys())
        for col in (*spec.key, *spec.ignore, *spec.text, *spec.money, *spec.references):
            assert col in cols, f"{name}.{col}"
        for target in spec.references.values():
            assert ENVIRONMENT.compare.for_table(target).key, f"{target} needs a natural key"
    # Every table of the shop has its rules; the framework's tables (the answer, the
    # conversation with the customer) are scored apart.
    assert set(ENVIRONMENT.compare.tables) == set(tables) - FRAMEWORK_TABLES


# ---- reads --------------------------------------------------------------------------------------


def test_read_tools_write_nothing(db: Session) -> None:
    order = an_order(db, "delivered")
    c = order.customer
    zip_code = c.addresses[0].zip
    before = dump(db, ENVIRONMENT)
    calls: dict[str, dict[str, Any]] = {
        "find_customer_by_email": {"email": c.email.upper()},
        "find_customer_by_name_zip": {
            "first_name": c.first_name,
            "last_name": c.last_name,
            "zip": zip_code,
        },
        "get_customer_details": {"customer_id": c.id},
        "list_customer_orders": {"customer_id": c.id, "status": None},
        "get_order_details": {"order_number": order.order_number},
        "list_products": {"category": "audio"},
        "get_product_details": {"product_id": 1},
    }
    assert set(calls) == READ_TOOLS
    results = {name: run(db, name, **args) for name, args in calls.items()}
    assert dump(db, ENVIRONMENT) == before
    assert results["find_customer_by_email"]["customer_id"] == c.id
    assert results["find_customer_by_name_zip"]["matches"][0]["customer_id"] == c.id
    assert any(
        o["order_number"] == order.order_number for o in results["list_customer_orders"]["orders"]
    )
    assert results["get_order_details"]["items"][0]["sku"] == order.items[0].variant.sku


def test_unknown_ids_are_not_found(db: Session) -> None:
    assert fails(db, "find_customer_by_email", email="nobody@nowhere.test").code == "not_found"
    assert fails(db, "get_customer_details", customer_id=999_999).code == "not_found"
    assert fails(db, "get_order_details", order_number="#W0000001").code == "not_found"
    assert fails(db, "get_product_details", product_id=999).code == "not_found"
    nobody = run(db, "find_customer_by_name_zip", first_name="No", last_name="Body", zip="00000")
    assert nobody == {"matches": []}


def test_order_number_spelling_is_forgiving(db: Session) -> None:
    order = an_order(db, "shipped")
    loose = order.order_number.lstrip("#").lower()
    assert run(db, "get_order_details", order_number=loose)["order_number"] == order.order_number


# ---- cancel -------------------------------------------------------------------------------------


def test_cancel_delivered_order_is_refused_with_a_hint(db: Session) -> None:
    order = an_order(db, "delivered")
    err = fails(
        db,
        "cancel_pending_order",
        order_number=order.order_number,
        customer_id=order.customer_id,
        reason="no_longer_needed",
    )
    assert order.order_number in err.message and "delivered" in err.message
    assert err.hint and "return_delivered_order_items" in err.hint


def test_cancel_refunds_each_payment_to_its_method_and_restocks(db: Session) -> None:
    order = an_order(db, "pending", single_payer=True)
    # Pay it with a gift card first, then cancel: the whole amount must come back to the card.
    gift = gift_card(db, order.customer, 5000.0)
    run(
        db,
        "modify_pending_order_payment",
        order_number=order.order_number,
        customer_id=order.customer_id,
        payment_method_id=gift.code,
    )
    db.refresh(gift)
    paid_balance = gift.balance
    assert paid_balance is not None
    stock = {line.variant_id: line.variant.stock for line in order.items}
    result = run(
        db,
        "cancel_pending_order",
        order_number=order.order_number,
        customer_id=order.customer_id,
        reason="ordered_by_mistake",
    )
    db.refresh(gift)
    assert gift.balance == pytest.approx(paid_balance + order.total)
    assert gift.balance == pytest.approx(5000.0)
    assert result["status"] == "cancelled"
    assert {i["status"] for i in result["items"]} == {"cancelled"}
    for line in order.items:
        assert line.variant.stock == stock[line.variant_id] + line.quantity
    # Each method got back exactly what it paid: the card (by the switch), the gift card (cancel).
    net: dict[str, float] = {}
    for p in result["payments"]:
        sign = 1 if p["type"] == "charge" else -1
        net[p["payment_method_id"]] = net.get(p["payment_method_id"], 0) + sign * p["amount"]
    assert all(abs(v) < 0.005 for v in net.values()), net
    audit = db.scalars(select(AuditLog).where(AuditLog.entity_id == order.order_number)).all()
    assert [a.action for a in audit] == ["modify_payment", "cancel_order"]
    assert {a.ts for a in audit} == {NOW}


def test_cannot_touch_another_customers_order(db: Session) -> None:
    order = an_order(db, "pending")
    other = db.scalar(select(Customer).where(Customer.id != order.customer_id).limit(1))
    assert other is not None
    err = fails(
        db,
        "cancel_pending_order",
        order_number=order.order_number,
        customer_id=other.id,
        reason="no_longer_needed",
    )
    assert err.code == "other_customer"


# ---- modify a pending order ---------------------------------------------------------------------


def test_modify_items_swaps_variant_moves_stock_and_charges_difference(db: Session) -> None:
    order = an_order(db, "pending", single_payer=True)
    sku, new = swappable(db, order)
    line = next(i for i in order.items if i.variant.sku == sku)
    old_variant, old_price, new_stock = line.variant, line.unit_price, new.stock
    old_stock, total = old_variant.stock, order.total
    payer = order.payments[0].payment_method
    result = run(
        db,
        "modify_pending_order_items",
        order_number=order.order_number,
        customer_id=order.customer_id,
        from_skus=[sku],
        to_skus=[new.sku.lower()],
        payment_method_id=payer.code,
    )
    diff = round(new.price - old_price, 2) * line.quantity
    assert new.sku in [i["sku"] for i in result["items"]]
    assert new.stock == new_stock - line.quantity
    assert old_variant.stock == old_stock + line.quantity
    assert result["total"] == pytest.approx(total + diff)
    moves = [p for p in result["payments"] if p["payment_method_id"] == payer.code]
    net = sum(p["amount"] if p["type"] == "charge" else -p["amount"] for p in moves)
    assert net == pytest.approx(result["total"])


def test_modify_items_respects_stock_and_product(db: Session) -> None:
    order = an_order(db, "pending", single_payer=True)
    sku, sold_out = swappable(db, order, in_stock=False)
    sold_out.stock = 0
    db.commit()
    base = {
        "order_number": order.order_number,
        "customer_id": order.customer_id,
        "from_skus": [sku],
        "payment_method_id": order.payments[0].payment_method.code,
    }
    err = fails(db, "modify_pending_order_items", to_skus=[sold_out.sku], **base)
    assert sold_out.sku in err.message and "0 in stock" in err.message
    assert err.code == "out_of_stock"
    line = next(i for i in order.items if i.variant.sku == sku)
    stranger = db.scalar(
        select(Variant).where(Variant.product_id != line.variant.product_id, Variant.stock > 5)
    )
    assert stranger is not None
    err = fails(db, "modify_pending_order_items", to_skus=[stranger.sku], **base)
    assert "same product" in err.message and err.code == "different_product"
    err = fails(db, "modify_pending_order_items", to_skus=[], **base)
    assert err.code == "invalid_arguments"


def test_gift_card_must_cover_the_difference(db: Session) -> None:
    order = an_order(db, "pending", single_payer=True)
    for line in order.items:
        dearer = [
            v
            for v in line.variant.product.variants
            if v.price > line.unit_price and v.available and v.stock > 2
        ]
        if dearer:
            break
    else:
        pytest.skip("no dearer variant in this order")
    gift = gift_card(db, order.customer, 0.5)
    err = fails(
        db,
        "modify_pending_order_items",
        order_number=order.order_number,
        customer_id=order.customer_id,
        from_skus=[line.variant.sku],
        to_skus=[dearer[0].sku],
        payment_method_id=gift.code,
    )
    assert "0.50" in err.message and err.code == "insufficient_balance"


def test_modify_address_and_payment_only_on_pending(db: Session) -> None:
    order = an_order(db, "pending", single_payer=True)
    address = {
        "line1": "1 Infinite Loop",
        "line2": None,
        "city": "Cupertino",
        "state": "CA",
        "zip": "95014",
        "country": "USA",
    }
    result = run(
        db,
        "modify_pending_order_address",
        order_number=order.order_number,
        customer_id=order.customer_id,
        **address,
    )
    assert result["shipping_address"] == address
    shipped = an_order(db, "shipped")
    err = fails(
        db,
        "modify_pending_order_address",
        order_number=shipped.order_number,
        customer_id=shipped.customer_id,
        **address,
    )
    assert "shipped" in err.message and err.code == "order_not_pending"
    same = order.payments[0].payment_method.code
    err = fails(
        db,
        "modify_pending_order_payment",
        order_number=order.order_number,
        customer_id=order.customer_id,
        payment_method_id=same,
    )
    assert err.code == "invalid_arguments"


def test_update_default_address_changes_only_the_address_book(db: Session) -> None:
    order = an_order(db, "pending")
    c = order.customer
    address = {
        "line1": "9 Elm Ct",
        "line2": "Unit 2",
        "city": "Reno",
        "state": "NV",
        "zip": "89501",
        "country": "USA",
    }
    run(db, "update_customer_default_address", customer_id=c.id, **address)
    default = next(a for a in c.addresses if a.is_default)
    assert (default.line1, default.zip) == ("9 Elm Ct", "89501")
    assert order.ship_zip != "89501"
    found = run(
        db, "find_customer_by_name_zip", first_name=c.first_name, last_name=c.last_name, zip="89501"
    )
    assert found["matches"][0]["customer_id"] == c.id
