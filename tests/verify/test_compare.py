"""State comparison: order-insensitive, id-insensitive, tolerant money, collateral damage."""

from __future__ import annotations

import random
import sqlite3

from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from app.storage.sqlite import db as sqlite_db
from app.verify.reward import partial_credit
from app.verify.state.diff import against_gold, diff_states
from app.verify.state.dump import dump_state
from app.verify.state.outcomes import outcomes
from tests.support.warehouse_env import ENVIRONMENT, Item, Move, build_base

NOW = ENVIRONMENT.default_now


def fresh_db() -> tuple[sqlite3.Connection, object]:
    conn = sqlite_db.open_memory()
    engine = sqlite_db.bind_engine(conn)
    ENVIRONMENT.metadata.create_all(engine)
    with Session(bind=engine) as db, db.begin():
        build_base(db, random.Random(1))
    return conn, engine


def state(engine):
    with engine.connect() as c:
        return dump_state(c, ENVIRONMENT.metadata.tables, ENVIRONMENT.compare)


def write(engine, *statements):
    with Session(bind=engine) as db, db.begin():
        for stmt in statements:
            db.execute(stmt)


def test_reordered_inserts_and_different_ids_match():
    _, a = fresh_db()
    _, b = fresh_db()
    moves = [
        {"item_id": 1, "delta": -1, "reason": "sold", "at": NOW},
        {"item_id": 2, "delta": 4, "reason": "restock", "at": NOW},
    ]
    write(a, insert(Move).values(id=10, **moves[0]), insert(Move).values(id=11, **moves[1]))
    write(b, insert(Move).values(id=77, **moves[1]), insert(Move).values(id=99, **moves[0]))
    assert diff_states(state(a), state(b), ENVIRONMENT.compare) == {}


def test_references_compare_by_natural_key():
    _, a = fresh_db()
    _, b = fresh_db()
    # Same logical item under a different surrogate id in each state.
    write(
        a,
        insert(Item).values(id=500, sku="NEW-1", name="New", quantity=1, price=1.0),
        insert(Move).values(item_id=500, delta=1, reason="new", at=NOW),
    )
    write(
        b,
        insert(Item).values(id=600, sku="NEW-1", name="New", quantity=1, price=1.0),
        insert(Move).values(item_id=600, delta=1, reason="new", at=NOW),
    )
    assert diff_states(state(a), state(b), ENVIRONMENT.compare) == {}


def test_money_within_tolerance_matches_but_a_real_difference_does_not():
    _, a = fresh_db()
    _, b = fresh_db()
    _, c = fresh_db()
    write(a, update(Item).where(Item.id == 3).values(price=19.99))
    write(b, update(Item).where(Item.id == 3).values(price=19.991))
    write(c, update(Item).where(Item.id == 3).values(price=20.99))
    assert diff_states(state(a), state(b), ENVIRONMENT.compare) == {}
    diff = diff_states(state(a), state(c), ENVIRONMENT.compare)
    assert diff["items"].changed == [
        {"key": {"sku": "SKU-0003"}, "changes": {"price": [19.99, 20.99]}}
    ]


def test_text_columns_ignore_case_and_whitespace():
    _, a = fresh_db()
    _, b = fresh_db()
    write(a, update(Item).where(Item.id == 4).values(name="Blue  Widget"))
    write(b, update(Item).where(Item.id == 4).values(name="blue widget "))
    assert diff_states(state(a), state(b), ENVIRONMENT.compare) == {}


def test_collateral_change_breaks_state_match_and_is_counted():
    _, seed = fresh_db()
    _, gold = fresh_db()
    _, agent = fresh_db()
    fix = update(Item).where(Item.id == 5).values(quantity=0)
    write(gold, fix)
    write(agent, fix, update(Item).where(Item.id == 6).values(name="Vandalised"))
    compare = ENVIRONMENT.compare
    gold_vs_agent = diff_states(state(gold), state(agent), compare)
    assert list(gold_vs_agent) == ["items"] and len(gold_vs_agent["items"].changed) == 1
    credit, reproduced, collateral = partial_credit(
        outcomes(diff_states(state(seed), state(gold), compare)),
        outcomes(diff_states(state(seed), state(agent), compare)),
    )
    assert (reproduced, collateral) == (1, 1)
    assert credit == 0.0


def test_diff_reports_added_removed_changed():
    _, a = fresh_db()
    _, b = fresh_db()
    write(
        b,
        insert(Item).values(id=900, sku="X-1", name="X", quantity=1, price=2.0),
        update(Item).where(Item.id == 1).values(quantity=999),
    )
    with Session(bind=b) as db, db.begin():
        db.delete(db.get(Item, 2))
    diff = diff_states(state(a), state(b), ENVIRONMENT.compare)["items"]
    assert [r["sku"] for r in diff.added] == ["X-1"]
    assert [r["sku"] for r in diff.removed] == ["SKU-0002"]
    assert diff.changed[0]["changes"]["quantity"][1] == 999


def test_what_changed_is_decided_as_stored_and_what_matches_as_normalised():
    """A case change or a sub-cent change is a change (exact diff, collateral, a gold mismatch)
    where the gold leaves the value alone, and matches where the gold writes that value."""
    compare = ENVIRONMENT.compare
    _, seed = fresh_db()
    _, gold = fresh_db()
    fix = update(Item).where(Item.id == 5).values(price=19.99)
    write(gold, fix)
    seed_to_gold = diff_states(state(seed), state(gold), compare, exact=True)
    for hidden in (
        update(Item).where(Item.id == 6).values(name=Item.name + " "),
        update(Item).where(Item.id == 6).values(price=Item.price + 0.004),
    ):
        _, agent = fresh_db()
        write(agent, fix, hidden)
        assert diff_states(state(gold), state(agent), compare) == {}  # equal as matched ...
        seed_to_agent = diff_states(state(seed), state(agent), compare, exact=True)
        assert seed_to_agent["items"].count == 2  # ... yet two rows changed as stored
        credit, reproduced, collateral = partial_credit(
            outcomes(seed_to_gold), outcomes(seed_to_agent)
        )
        assert (reproduced, collateral, credit) == (1, 1, 0.0)
        mismatch = against_gold(state(gold), state(agent), compare, seed_to_gold, seed_to_agent)
        assert [r["key"] for r in mismatch["items"].changed] == [{"sku": "SKU-0006"}]
    # The gold's own change spelled another way matches, and is no collateral.
    _, agent = fresh_db()
    write(agent, update(Item).where(Item.id == 5).values(price=19.991))
    seed_to_agent = diff_states(state(seed), state(agent), compare, exact=True)
    assert against_gold(state(gold), state(agent), compare, seed_to_gold, seed_to_agent) == {}
    assert partial_credit(outcomes(seed_to_gold), outcomes(seed_to_agent))[:3] == (
        1.0,
        1,
        0,
    )
