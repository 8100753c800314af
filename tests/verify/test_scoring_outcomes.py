"""Scored by outcome, reported so a trainer can read it: retries and corrections judged by the
final state, every component a score in [0, 1], step rewards that print cleanly and add up,
one outcome per requested change, rows only in gold called missing, refused forbidden writes
named and (when the deployment says so) paid for. Retail through HTTP in process, real SQLite
session files; the outcome grouping on hand-made diffs."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from app.verify.reward import partial_credit
from app.verify.state.diff import TableDiff
from app.verify.state.outcomes import outcomes
from envs.retail import ENVIRONMENT as RETAIL
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, response_object

TASKS = {
    t["task_id"]: t
    for t in map(json.loads, load_environment("retail").tasks_path.read_text().splitlines())
}
COMPONENTS = {"state_match", "outputs_match", "partial_credit", "change_recall"}
COMPONENTS |= {"change_precision", "policy_ok"}


async def _client(data_dir: Path, **settings: Any):
    app = create_app(Settings(data_dir=data_dir, secret_key=TEST_SECRET, **settings), RETAIL)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as client:
            yield client


@pytest.fixture
async def retail(tmp_path):
    async for client in _client(tmp_path):
        yield client


async def _run(shared, task: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Seed, make the calls (each must answer 200), verify with the calls as the response."""
    async with fresh_client(shared) as client:
        assert (await client.post("/seed_session", json=task)).status_code == 200
        items = []
        for i, call in enumerate(calls):
            r = await client.post(f"/{call['name']}", json=call["arguments"])
            assert r.status_code == 200, r.text
            items += [
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": call["name"],
                    "arguments": json.dumps(call["arguments"]),
                },
                {"type": "function_call_output", "call_id": f"c{i}", "output": r.text},
            ]
        body = {**task, "response": response_object(items, "Done.")}
        verified = await client.post("/verify", json=body)
        assert verified.status_code == 200, verified.text
        return verified.json()


def _sums_exactly(result: dict[str, Any]) -> None:
    """Each step and turn reward is a short decimal; their decimal sum is the reward."""
    for name in ("step_rewards", "turn_rewards"):
        values = result[name]
        assert all(Decimal(repr(v)).as_tuple().exponent >= -6 for v in values), values
        assert sum(Decimal(repr(v)) for v in values) == Decimal(repr(result["reward"])), values


def _address(zip_code: str) -> dict[str, Any]:
    [call] = [c for c in TASKS["retail-024"]["ground_truth"] if c["name"].startswith("modify")]
    return {**call, "arguments": {**call["arguments"], "zip": zip_code}}


async def test_the_same_update_sent_twice_scores_one(retail) -> None:
    task = TASKS["retail-024"]
    gold = task["ground_truth"]
    result = await _run(retail, task, [*gold, gold[-1]])
    assert result["reward"] == 1.0, result.get("failure_reason")
    assert result["reward_components"]["state_match"] == 1.0
    # The repeat's audit row is shown, not counted; the repeat earns nothing and costs nothing.
    assert result["verification"]["extra_log_records"]["audit_log"]["count"] == 1
    assert result["step_rewards"][-1] == 0.0 and result["step_rewards"][-2] == 1.0
    _sums_exactly(result)


async def test_a_corrected_mistake_is_judged_by_the_final_state(retail) -> None:
    task = TASKS["retail-024"]
    gold = task["ground_truth"]
    result = await _run(retail, task, [*gold[:-1], _address("53700"), gold[-1]])
    assert result["reward"] == 1.0, result.get("failure_reason")
    [reverted] = result["verification"]["extra_log_records"]["audit_log"]["rows"]
    assert json.loads(reverted["detail"]) == {"zip": "53700"}
    _sums_exactly(result)
    # The mistake left in place is still a mismatch (its record listed too).
    wrong = await _run(retail, task, [*gold[:-1], _address("53700")])
    assert wrong["reward"] == 0.0 and "orders: 1 differ" in wrong["failure_reason"]
    assert wrong["verification"]["extra_log_records"]["audit_log"]["count"] == 1
    assert wrong["reward_components"]["change_precision"] == 1.0  # a miss, not also damage
    assert wrong["reward_components"]["change_recall"] < 1.0


async def test_every_component_is_a_score_in_the_unit_interval(retail) -> None:
    task = TASKS["retail-020"]
    noop = await _run(retail, task, [])
    gold = await _run(retail, task, task["ground_truth"])
    for result in (noop, gold):
        components = result["reward_components"]
        assert COMPONENTS <= set(components), components
        assert all(0.0 <= v <= 1.0 for v in components.values()), components
        assert not {"collateral_changes", "gold_changes_reproduced"} & set(components)
        counts = result["verification"]["changes"]
        assert set(counts) == {"requested", "reproduced", "collateral", "made"}
    assert gold["reward_components"]["change_recall"] == 1.0
    assert gold["reward_components"]["change_precision"] == 1.0
    assert noop["reward_components"]["change_recall"] == 0.0
    assert noop["reward_components"]["change_precision"] == 1.0  # nothing made, nothing wrong


async def test_a_row_only_in_gold_is_missing_not_added_and_removed(retail) -> None:
    result = await _run(retail, TASKS["retail-041"], [])
    payments = result["verification"]["state_diff"]["payments"]
    assert (payments["added"], payments["removed"]) == (0, 1)
    assert "payments: 1 missing" in result["failure_reason"]
    assert "added" not in result["failure_reason"]


def _refused_cancel() -> list[dict[str, Any]]:
    """retail-011 (cancel a delivered order: refuse it), played by a policy that tries first."""
    task = TASKS["retail-011"]
    gold = task["ground_truth"]
    email = gold[0]["arguments"]["email"]
    [customer] = [c for c in task["seed"]["rows"]["customers"] if c["email"] == email]
    attempt = {
        "name": "cancel_pending_order",
        "arguments": {
            "order_number": gold[1]["arguments"]["order_number"],
            "customer_id": customer["id"],
            "reason": "no_longer_needed",
        },
    }
    return [gold[0], gold[1], attempt, gold[2]]


async def test_a_refused_forbidden_write_is_named_and_free_by_default(retail) -> None:
    result = await _run(retail, TASKS["retail-011"], _refused_cancel())
    assert result["reward"] == 1.0, result.get("failure_reason")
    [violation] = result["verification"]["policy_violations"]
    assert violation["tool"] == "cancel_pending_order" and violation["step"] == 3
    assert violation["code"] == "order_not_pending" and "pending" in violation["message"]
    assert result["reward_components"]["policy_ok"] == 0.0
    assert "refused attempt" in result["failure_reason"]
    clean = await _run(retail, TASKS["retail-011"], TASKS["retail-011"]["ground_truth"])
    assert clean["reward_components"]["policy_ok"] == 1.0
    assert "policy_violations" not in clean["verification"]


async def test_the_deployments_penalty_charges_each_refused_forbidden_write(tmp_path) -> None:
    async for client in _client(tmp_path, policy_violation_penalty=0.25):
        tried = await _run(client, TASKS["retail-011"], _refused_cancel())
        assert tried["reward"] == 0.75
        _sums_exactly(tried)
        assert tried["step_rewards"][2] == -0.25  # charged to the call that tried
        # Input mistakes (an unknown order) are corrections, not violations.
        lookup = {"name": "get_order_details", "arguments": {"order_number": "#W0000000"}}
        unknown = {
            "name": "cancel_pending_order",
            "arguments": {
                "order_number": "#W0000000",
                "customer_id": _refused_cancel()[2]["arguments"]["customer_id"],
                "reason": "no_longer_needed",
            },
        }
        gold = TASKS["retail-011"]["ground_truth"]
        mistaken = await _run(client, TASKS["retail-011"], [gold[0], lookup, unknown, *gold[1:]])
        assert mistaken["reward"] == 1.0, mistaken["verification"].get("policy_violations")


def _diff(**tables: TableDiff) -> dict[str, TableDiff]:
    return dict(tables)


def _linked(n: int, invoice: str) -> TableDiff:
    return TableDiff(
        changed=[
            {"key": {"code": f"T{i}"}, "changes": {"invoice_id": [None, (invoice,)]}}
            for i in range(n)
        ],
        key=("code",),
        references={"invoice_id": "invoices"},
    )


def test_one_requested_change_is_one_outcome_however_many_rows() -> None:
    """Three requests (a budget, a new invoice, eight timesheets linked to an existing one):
    linking the timesheets alone earns a third, not 8/10."""
    gold = outcomes(
        _diff(
            projects=TableDiff(
                changed=[{"key": {"code": "P1"}, "changes": {"budget": [1, 2]}}], key=("code",)
            ),
            invoices=TableDiff(added=[{"number": "INV-9", "amount": 5}], key=("number",)),
            timesheets=_linked(8, "INV-0"),
        )
    )
    assert gold.count == 3
    credit, reproduced, collateral = partial_credit(
        gold, outcomes({"timesheets": _linked(8, "INV-0")})
    )
    assert (round(credit, 6), round(reproduced, 6), collateral) == (0.333333, 1.0, 0)
    # A new invoice and the timesheets linked to it are one outcome (joined by reference).
    joined = outcomes(
        _diff(
            invoices=TableDiff(added=[{"number": "INV-9", "amount": 5}], key=("number",)),
            timesheets=_linked(8, "INV-9"),
        )
    )
    assert joined.count == 1
    # Damage of the same kind as a requested change is still damage: one outcome of it.
    vandal = TableDiff(
        changed=[
            {"key": {"code": "P1"}, "changes": {"budget": [1, 2]}},
            {"key": {"code": "P2"}, "changes": {"budget": [1, 0]}},
            {"key": {"code": "P3"}, "changes": {"budget": [1, 0]}},
        ],
        key=("code",),
    )
    only_budget = outcomes({"projects": TableDiff(changed=[vandal.changed[0]], key=("code",))})
    assert partial_credit(only_budget, outcomes({"projects": vandal}))[0] == 0.0
