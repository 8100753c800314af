"""Step rewards cost what changed, and past their budget they are left out with a stated reason
while the reward stays exact (app/verify/steps/step_budget.py, app/verify/steps/step_states.py).

A key other tables reference, toggled back and forth, once made verify rebuild the database per
step. The row-image path now scores those states from the log and the rows that reference the
re-keyed row; these tests hold it equal to undoing and dumping every state, and hold the budget's
refusals to a reward equal to one computed without step rewards at all.
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import pytest

from app.core.tasks import task_from_data
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from app.storage.sqlite.store import Store
from app.verify import session_verify
from app.verify.gold import GoldCache
from app.verify.state.dump import dump_state
from app.verify.steps.step_budget import StepBudget
from tests.conftest import TEST_SECRET
from tests.storage.test_steps import Clone
from tests.support.rollouts import load_tasks, response_object

TASK = "sql-020"  # a raise: its gold inserts a salaries row of employee 102000


def _toggle(table: str, column: str, a: str, b: str) -> tuple[str, dict[str, Any]]:
    return "run_sql", {"sql": f"UPDATE {table} SET {column} = '{b}' WHERE {column} = '{a}'"}


def _run(tmp_path: Any, calls: list[tuple[str, Any]]) -> tuple[Clone, Any, GoldCache, Any]:
    env = load_environment("sql")
    rows = load_tasks(load_environment("sql").tasks_path)
    row = next(r for r in rows if r["task_id"] == TASK)
    task = task_from_data(row)
    store = Store(tmp_path, env)
    snapshot = store.snapshot(task)
    live = Clone(env, snapshot.image, snapshot.now)
    items: list[dict[str, Any]] = []
    for i, (name, args) in enumerate(calls):
        out = live.call(name, args)
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": name,
                "arguments": json.dumps(args),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": f"c{i}", "output": json.dumps(out)}
        )
    return live, task, GoldCache(store, 8), response_object(items, "Done.")


def _gold_calls() -> list[tuple[str, Any]]:
    rows = load_tasks(load_environment("sql").tasks_path)
    row = next(r for r in rows if r["task_id"] == TASK)
    out = []
    for call in row["ground_truth"]:
        args = call["arguments"]
        out.append((call["name"], json.loads(args) if isinstance(args, str) else args))
    return out


TOGGLES = [
    ("employees", "employee_no", "E902000", "X902000"),  # the employee the gold's raise is for
    ("employees", "employee_no", "E1001", "X1001"),  # referenced by ~90 rows
    ("projects", "code", "INT-11", "QNT-11"),
]


def _mixed_calls(seed: int, kinds: int) -> list[tuple[str, Any]]:
    """The gold calls with toggles of referenced keys (the first `kinds` of TOGGLES) in
    between, an odd number of some."""
    rng = random.Random(seed)
    toggles = TOGGLES[:kinds]
    state = {t: False for t in range(len(toggles))}
    calls = _gold_calls()
    for _ in range(12):
        t = rng.randrange(len(toggles))
        table, column, a, b = toggles[t]
        call = _toggle(table, column, *((b, a) if state[t] else (a, b)))
        state[t] = not state[t]
        calls.insert(rng.randrange(len(calls) + 1), call)
    return calls


@pytest.mark.parametrize(("seed", "kinds"), [(1, 1), (2, 1), (3, 3), (4, 3)])
def test_row_image_potentials_equal_undo_and_dump_when_referenced_keys_change(
    seed, kinds, tmp_path
):
    live, task, gold, response = _run(tmp_path, _mixed_calls(seed, kinds))
    try:
        # The dump patched with the rows referencing a re-keyed row is the table read whole.
        with live.bind.begin():
            tables, compare = live.env.metadata.tables, live.env.compare
            patched = dump_state(live.bind, tables, compare)
            assert patched == dump_state(live.bind, tables, compare, reuse=False)
        logged = live.verify(task, gold, response)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(session_verify, "potentials_from_log", lambda *a, **k: None)
            undone = live.verify(task, gold, response)
    finally:
        live.close()
    assert "step_rewards_skipped" not in logged["verification"]
    assert logged["step_rewards"] == pytest.approx(undone["step_rewards"], abs=1e-6)
    if kinds == 1:  # the raise's employee re-keyed and back: the potential moves both ways
        assert min(logged["step_rewards"]) < 0 < max(logged["step_rewards"])
    assert sum(logged["step_rewards"]) == pytest.approx(
        logged["reward_components"]["partial_credit"], abs=1e-4
    )


def _skipped(result: dict[str, Any], unbudgeted: dict[str, Any], setting: str) -> None:
    assert "step_rewards" not in result and "turn_rewards" not in result
    assert setting in result["verification"]["step_rewards_skipped"]
    # The reward is the one computed without any step reward: exact, not approximated.
    assert result["reward"] == unbudgeted["reward"]
    assert result["reward_components"] == unbudgeted["reward_components"]
    assert result["verification"]["trajectory"]["ok"]


def test_past_each_budget_step_rewards_are_skipped_with_the_reason_and_the_reward_is_exact(
    tmp_path,
):
    toggles = [
        _toggle("employees", "employee_no", *p)
        for p in [("E1001", "X1001"), ("X1001", "E1001")] * 20
    ]
    live, task, gold, response = _run(tmp_path, _gold_calls() + toggles)
    try:
        plain = live.verify(task, gold, response, with_steps=False)
        full = live.verify(task, gold, response)
        assert full["reward"] == plain["reward"] == 1.0
        assert len(full["step_rewards"]) == len(toggles) + len(_gold_calls())
        rows = live.verify(task, gold, response, step_budget=StepBudget(max_rows=10))
        _skipped(rows, plain, "STATEGYM_STEP_REWARD_MAX_ROWS")
        spent = live.verify(task, gold, response, step_budget=StepBudget(max_ms=0))
        _skipped(spent, plain, "STATEGYM_STEP_REWARD_BUDGET_MS")
        with pytest.MonkeyPatch.context() as patch:  # the undo path: states rebuilt
            patch.setattr(session_verify, "potentials_from_log", lambda *a, **k: None)
            states = live.verify(task, gold, response, step_budget=StepBudget(max_states=5))
            _skipped(states, plain, "STATEGYM_STEP_REWARD_MAX_STATES")
            spent = live.verify(task, gold, response, step_budget=StepBudget(max_ms=0))
            _skipped(spent, plain, "STATEGYM_STEP_REWARD_BUDGET_MS")
    finally:
        live.close()


async def test_the_budget_settings_reach_a_live_verify(tmp_path):
    env = load_environment("sql")
    rows = load_tasks(load_environment("sql").tasks_path)
    row = next(r for r in rows if r["task_id"] == TASK)
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, step_reward_max_rows=5)
    app = create_app(settings, env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://s") as client:
            assert (await client.post("/seed_session", json=row)).status_code == 200
            items = []
            for i, (name, args) in enumerate(
                _gold_calls() + [_toggle("employees", "employee_no", "E1001", "X1001")]
            ):
                out = await client.post(f"/{name}", json=args)
                assert out.status_code == 200
                items += [
                    {
                        "type": "function_call",
                        "call_id": f"c{i}",
                        "name": name,
                        "arguments": json.dumps(args),
                    },
                    {"type": "function_call_output", "call_id": f"c{i}", "output": out.text},
                ]
            verified = await client.post(
                "/verify", json={**row, "response": response_object(items, "Done.")}
            )
    body = verified.json()
    assert "STATEGYM_STEP_REWARD_MAX_ROWS" in body["verification"]["step_rewards_skipped"]
    assert "step_rewards" not in body
    # The toggle left X1001: that row and every row referencing it changed (one outcome).
    assert body["reward"] == 0.0 and body["verification"]["changes"]["collateral"] >= 1
    assert body["reward_components"]["change_precision"] < 1.0
