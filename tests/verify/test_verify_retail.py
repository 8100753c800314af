"""Verify on the retail environment through HTTP (in process): collateral damage, insert order and
surrogate ids, money tolerance. Edits an agent's tools cannot make go straight to the session file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from envs.retail import ENVIRONMENT as RETAIL
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, gold_answer, load_tasks, response_object

TASKS = {t["task_id"]: t for t in load_tasks(load_environment("retail").tasks_path)}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("verify-retail")


@pytest.fixture
async def retail(data_dir):
    app = create_app(Settings(data_dir=data_dir, secret_key=TEST_SECRET), RETAIL)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def rollout(shared, task, calls, *, edit: str | None = None, params: tuple = ()):
    """Seed, call tools, optionally run `edit` (SQL) on the session file, verify; (result, ids)."""
    async with fresh_client(shared) as client:
        seeded = await client.post("/seed_session", json=task)
        session_id = seeded.json()["session_id"]
        for call in calls:
            r = await client.post(f"/{call['name']}", json=call["arguments"])
            assert r.status_code == 200 and "output" in r.json(), r.text
        path = shared.app.state.protocol.sessions.backend.store.session_path(session_id)
        conn = sqlite3.connect(path)
        try:
            if edit:
                with conn:
                    assert conn.execute(edit, params).rowcount == 1
            refund_ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM payments WHERE kind = 'refund' ORDER BY amount"
                )
            ]
        finally:
            conn.close()
        body = {**task, "response": response_object([], gold_answer(task))}
        verified = await client.post("/verify", json=body)
        assert verified.status_code == 200, verified.text
        return verified.json(), refund_ids


async def test_right_change_plus_an_unrelated_edit_is_collateral_damage(retail):
    task = TASKS["retail-020"]
    clean, _ = await rollout(retail, task, task["ground_truth"])
    assert clean["reward"] == 1.0 and clean["verification"]["changes"]["collateral"] == 0
    # The cancel is right, but another (base-data) customer's phone number was changed too.
    dirty, _ = await rollout(
        retail,
        task,
        task["ground_truth"],
        edit="UPDATE customers SET phone = '+1-000-000-0000' WHERE id = 7",
    )
    components = dirty["reward_components"]
    assert dirty["reward"] == 0.0 and components["state_match"] == 0.0
    assert dirty["verification"]["changes"]["collateral"] >= 1
    assert components["change_precision"] < 1.0
    assert (
        dirty["verification"]["changes"]["reproduced"]
        == clean["verification"]["changes"]["reproduced"]
    )
    changed = dirty["verification"]["state_diff"]["customers"]["changed_rows"]
    assert changed[0]["changes"]["phone"][1] == "+1-000-000-0000"
    assert "customers: 1 differ" in dirty["failure_reason"]


async def test_reordered_writes_and_other_surrogate_ids_still_match(retail):
    task = TASKS["retail-040"]
    gold = task["ground_truth"]
    in_order, ids_a = await rollout(retail, task, gold)
    # Cancel the second order first: refund rows are inserted in the other order, other ids.
    swapped, ids_b = await rollout(retail, task, [*gold[:4], gold[5], gold[4]])
    assert ids_a != ids_b and sorted(ids_a) == sorted(ids_b)
    assert in_order["reward"] == swapped["reward"] == 1.0
    assert swapped["verification"]["state_diff"] == {}


@pytest.mark.parametrize("delta, matches", [(0.001, True), (-0.001, True), (1.00, False)])
async def test_money_within_tolerance_matches_and_a_real_difference_does_not(
    retail, delta, matches
):
    task = TASKS["retail-020"]
    result, _ = await rollout(
        retail,
        task,
        task["ground_truth"],
        edit="UPDATE payment_methods SET balance = balance + ? WHERE code = 'gift_card_90200008'",
        params=(delta,),
    )
    assert result["reward"] == (1.0 if matches else 0.0), json.dumps(result["verification"])
    if not matches:
        [row] = result["verification"]["state_diff"]["payment_methods"]["changed_rows"]
        assert row["key"] == {"code": "gift_card_90200008"}
        before, after = row["changes"]["balance"]  # gold: 45.55 + the cancel's refund
        assert round(after - before, 2) == 1.0


RETURN_CHECKS = [
    {"table": "orders", "where": {"order_number": "#W90340008"}, "expect": {"status": "delivered"}},
    {
        "table": "returns",
        "where": {"code": "RT-W90340008-1"},
        "expect": {"reason": "no_longer_needed", "refund_amount": {"gt": 0}},
        "match": "one",
    },
    {
        "table": "return_items",
        "where": {"return_id": {"ref": {"code": "RT-W90340008-1"}}},
        "count": 2,
    },
    {
        "table": "payments",
        "where": {"order_id": {"ref": {"order_number": "#W90340008"}}, "kind": "refund"},
        "count": 1,
    },
    {"table": "products", "unchanged": True},
]


@pytest.mark.parametrize("with_gold", [True, False])
async def test_declarative_checks_on_retail(retail, with_gold):
    gold = TASKS["retail-034"]
    task = {
        **gold,
        "task_id": f"retail-034-checks-{with_gold}",
        "expected_state": RETURN_CHECKS,
        "ground_truth": gold["ground_truth"] if with_gold else [],
    }
    done, _ = await rollout(retail, task, gold["ground_truth"])
    assert done["reward"] == 1.0, done.get("failure_reason")
    assert [c["passed"] for c in done["verification"]["checks"]] == [True] * 5
    noop, _ = await rollout(retail, task, [])
    assert noop["reward"] == 0.0
    # A no-op leaves the order delivered and the catalogue untouched: 2 of 5 checks pass.
    assert noop["reward_components"]["checks_passed"] == 0.4
