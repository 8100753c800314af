"""Declarative expected-state checks: vocabulary, validation against the schema, scoring."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from app.core.tasks import task_from_data
from app.errors import InvalidTask
from app.storage.sqlite import db as sqlite_db
from app.verify.state.checks import compile_checks, parse_checks, run_checks
from app.verify.state.dump import dump_state
from tests.support.rollouts import run_rollout
from tests.support.warehouse_env import ENVIRONMENT, Item, Move, build_base

TABLES, COMPARE, NOW = ENVIRONMENT.metadata.tables, ENVIRONMENT.compare, ENVIRONMENT.default_now


def fresh_engine():
    conn = sqlite_db.open_memory()
    engine = sqlite_db.bind_engine(conn)
    ENVIRONMENT.metadata.create_all(engine)
    with Session(bind=engine) as db, db.begin():
        build_base(db, random.Random(1))
    return engine


def write(engine, *statements):
    with Session(bind=engine) as db, db.begin():
        for stmt in statements:
            db.execute(stmt)


def evaluate(seed_engine, final_engine, checks):
    compiled = compile_checks(TABLES, COMPARE, checks)
    with seed_engine.connect() as s, final_engine.connect() as f:
        seed = dump_state(s, TABLES, COMPARE)
        final = dump_state(f, TABLES, COMPARE)
        return run_checks(f, compiled, COMPARE, seed, final)


@pytest.fixture
def states():
    seed, final = fresh_engine(), fresh_engine()
    write(
        final,
        update(Item)
        .where(Item.sku == "SKU-0003")
        .values(quantity=7, price=19.991, name="Blue  WIDGET "),
        insert(Move).values(id=501, item_id=3, delta=2, reason="restock", at=NOW),
        insert(Move).values(id=502, item_id=3, delta=-1, reason="sold", at=NOW),
        insert(Move).values(id=503, item_id=4, delta=1, reason="restock", at=NOW),
    )
    write(seed, update(Item).where(Item.sku == "SKU-0003").values(price=19.99))
    return seed, final


@pytest.mark.parametrize(
    "check, passed",
    [
        # expected values on all matching rows (default), exactly one, or at least one
        ({"table": "items", "where": {"sku": "SKU-0003"}, "expect": {"quantity": 7}}, True),
        ({"table": "items", "where": {"sku": "SKU-0003"}, "expect": {"quantity": 8}}, False),
        ({"table": "items", "where": {"sku": "NOPE"}, "expect": {"quantity": 7}}, False),
        ({"table": "moves", "where": {"item_id": 3}, "expect": {"delta": {"gte": 2}}}, False),
        (
            {
                "table": "moves",
                "where": {"item_id": 3},
                "expect": {"delta": {"gte": 2}},
                "match": "any",
            },
            True,
        ),
        (
            {
                "table": "moves",
                "where": {"item_id": 3},
                "expect": {"reason": "sold"},
                "match": "one",
            },
            False,
        ),
        (
            {
                "table": "moves",
                "where": {"item_id": 3, "delta": {"lt": 0}},
                "expect": {"reason": "sold"},
                "match": "one",
            },
            True,
        ),
        # money within the spec's tolerance, text case/whitespace-insensitive, dates as ISO strings
        ({"table": "items", "where": {"sku": "SKU-0003"}, "expect": {"price": 19.99}}, True),
        ({"table": "items", "where": {"sku": "SKU-0003"}, "expect": {"price": 20.99}}, False),
        ({"table": "items", "where": {"price": 19.99}, "count": 1}, True),
        ({"table": "items", "where": {"sku": "SKU-0003"}, "expect": {"name": "blue widget"}}, True),
        ({"table": "items", "where": {"name": "BLUE WIDGET"}, "count": 0}, False),
        ({"table": "moves", "where": {"at": NOW.isoformat()}, "count": 3}, True),
        ({"table": "moves", "where": {"at": {"gt": "2026-01-02"}}, "count": 0}, True),
        # exact counts and operator counts; references through the parent's natural key
        ({"table": "moves", "count": 3}, True),
        ({"table": "moves", "where": {"item_id": {"ref": {"sku": "SKU-0003"}}}, "count": 2}, True),
        (
            {
                "table": "moves",
                "where": {"item_id": {"ref": {"sku": "SKU-0004"}}},
                "count": {"gte": 2},
            },
            False,
        ),
        ({"table": "moves", "where": {"reason": {"in": ["sold", "lost"]}}, "count": 1}, True),
        (
            {
                "table": "moves",
                "where": {"reason": {"not_in": ["sold"]}, "delta": {"ne": 1}},
                "count": 1,
            },
            True,
        ),
        ({"table": "items", "where": {"name": {"contains": "widget"}}, "count": 1}, True),
        ({"table": "items", "where": {"name": {"is_null": True}}, "count": 0}, True),
        # unchanged vs the seeded snapshot (per the comparison spec)
        ({"table": "moves", "unchanged": True}, False),
        ({"table": "items", "unchanged": True}, False),
    ],
)
def test_vocabulary(states, check, passed):
    [result] = evaluate(*states, [check])
    assert result.passed is passed, result.as_dict()


def test_unchanged_passes_on_untouched_table_and_failures_show_actual_values(states):
    seed, final = states
    untouched = fresh_engine()
    [ok] = evaluate(untouched, fresh_engine(), [{"table": "moves", "unchanged": True}])
    assert ok.passed and ok.actual == "unchanged"
    [bad] = evaluate(seed, untouched, [{"table": "items", "unchanged": True}])
    assert not bad.passed and bad.actual["changed"] == 1
    [wrong] = evaluate(
        seed,
        final,
        [
            {
                "table": "items",
                "where": {"sku": "SKU-0003"},
                "expect": {"quantity": 8, "price": 19.99},
            }
        ],
    )
    assert wrong.as_dict()["actual"] == {"rows": 1, "values": [{"quantity": 7, "price": 19.991}]}


@pytest.mark.parametrize(
    "checks, message",
    [
        ({"table": "items"}, "must be a list"),
        ([{"where": {}}], "string 'table'"),
        ([{"table": "items", "count": 1, "unchanged": True}], "exactly one of"),
        ([{"table": "items"}], "exactly one of"),
        ([{"table": "items", "count": -1}], ">= 0"),
        ([{"table": "items", "count": True}], "count must be"),
        ([{"table": "items", "where": {"sku": {"like": "%"}}, "count": 1}], "unknown operator"),
        ([{"table": "items", "where": {"sku": {"in": "abc"}}, "count": 1}], "list of literals"),
        ([{"table": "items", "expect": {}}], "non-empty"),
        ([{"table": "items", "expect": {"sku": {"ref": {"id": 1}}}}], "'ref' is allowed"),
        ([{"table": "items", "unchanged": True, "where": {"sku": "x"}}], "whole table"),
        ([{"table": "items", "count": 1, "match": "one"}], "match must be"),
        ([{"table": "items", "count": 1, "sql": "DROP TABLE items"}], "unknown key"),
    ],
)
def test_malformed_checks_are_refused_when_the_task_is_read(checks, message):
    with pytest.raises(InvalidTask, match=message):
        task_from_data({"task_id": "t", "expected_state": checks})


@pytest.mark.parametrize(
    "check, message",
    [
        ({"table": "items; DROP TABLE items", "count": 1}, "unknown table"),
        ({"table": "items", "where": {"colour": "red"}, "count": 1}, "no column 'colour'"),
        ({"table": "items", "expect": {"qty": 1}}, "no column 'qty'"),
        (
            {"table": "items", "where": {"name": {"ref": {"sku": "x"}}}, "count": 1},
            "no foreign key",
        ),
        (
            {"table": "moves", "where": {"item_id": {"ref": {"nope": 1}}}, "count": 1},
            "no column 'nope'",
        ),
    ],
)
def test_names_are_checked_against_the_metadata(check, message):
    with pytest.raises(InvalidTask, match=message):
        compile_checks(TABLES, COMPARE, parse_checks([check]))


SELL = {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -2, "reason": "sold"}}
TASK = {
    "task_id": "wh-checks",
    "seed": {
        "rows": {
            "items": [{"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10.0}]
        }
    },
    "expected_state": [
        {"table": "items", "where": {"sku": "SKU-9001"}, "expect": {"quantity": 3}},
        {"table": "moves", "where": {"item_id": {"ref": {"sku": "SKU-9001"}}}, "count": 1},
    ],
}


async def test_checks_only_task_is_scored_by_its_checks(warehouse):
    done = await run_rollout(warehouse, TASK, [SELL], "ok")
    assert done["reward"] == 1.0
    assert done["reward_components"]["checks_passed"] == 1.0
    assert [c["passed"] for c in done["verification"]["checks"]] == [True, True]
    half = await run_rollout(
        warehouse, TASK, [{**SELL, "arguments": {**SELL["arguments"], "delta": -1}}], "ok"
    )
    assert half["reward"] == 0.0 and half["reward_components"]["checks_passed"] == 0.5
    assert half["verification"]["checks"][0]["actual"] == {"rows": 1, "values": [{"quantity": 4}]}
    assert "expected-state checks failed: [0]" in half["failure_reason"]
    noop = await run_rollout(warehouse, TASK, [], "")
    assert noop["reward"] == 0.0 and noop["reward_components"]["partial_credit"] == 0.0


async def test_checks_only_task_counts_changes_to_unchecked_tables_as_collateral(warehouse):
    checks = [{"table": "moves", "where": {"reason": "sold"}, "count": 1}]
    task = {**TASK, "expected_state": checks}
    result = await run_rollout(warehouse, task, [SELL], "ok")
    # The sale also changes `items`, which no check names: reported, and it costs partial credit.
    assert result["reward"] == 1.0
    assert result["verification"]["changes"]["collateral"] == 1.0
    assert result["reward_components"]["partial_credit"] == 0.0


async def test_gold_and_checks_must_both_hold(warehouse):
    task = {
        **TASK,
        "ground_truth": [SELL],
        "expected_state": [
            *TASK["expected_state"],
            {"table": "items", "where": {"sku": "SKU-9001"}, "expect": {"price": 10.0}},
        ],
    }
    assert (await run_rollout(warehouse, task, [SELL], "ok"))["reward"] == 1.0
    # Matches every check but not the gold state (the price changed too): no success.
    repriced = await run_rollout(
        warehouse,
        task,
        [SELL, {"name": "set_price", "arguments": {"sku": "SKU-9001", "price": 10.001}}],
        "ok",
    )
    assert repriced["reward"] == 1.0  # within the money tolerance for both
    extra = await run_rollout(
        warehouse,
        task,
        [SELL, {"name": "set_price", "arguments": {"sku": "SKU-0001", "price": 1.0}}],
        "ok",
    )
    assert extra["reward"] == 0.0 and extra["reward_components"]["checks_passed"] == 1.0
    assert extra["reward_components"]["state_match"] == 0.0
    contradicting = {
        **task,
        "task_id": "wh-contra",
        "expected_state": [
            {"table": "items", "where": {"sku": "SKU-9001"}, "expect": {"quantity": 4}}
        ],
    }
    gold_only = await run_rollout(warehouse, contradicting, [SELL], "ok")
    assert gold_only["reward"] == 0.0 and gold_only["reward_components"]["partial_credit"] == 0.5


async def test_unknown_names_and_bad_shapes_are_a_422_at_seed(warehouse):
    bad = {**TASK, "expected_state": [{"table": "items", "where": {"colour": "red"}, "count": 1}]}
    refused = await warehouse.post("/seed_session", json=bad)
    assert refused.status_code == 422
    assert "no column 'colour'" in refused.json()["error"]["message"]
    shape = {**TASK, "expected_state": [{"table": "items", "count": "two"}]}
    seeded = await warehouse.post("/seed_session", json=shape)
    assert seeded.status_code == 422 and seeded.json()["error"]["type"] == "invalid_task"
