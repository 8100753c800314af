"""Collateral sees every write: whether the agent changed a value is decided on the value as
stored, and the comparison spec's normalisation only decides whether a changed value matches
the gold one (app/verify/state/match_form.py).

Three writes normalisation used to hide (`agent_changes: {}`, reward 1.0 on a task that asked
for no change): a text's case or spaces, money by less than a cent, a number stored as TEXT
that reads as the same number. Each must now show in `agent_changes` and cost the reward where
the gold does not make it; a gold-equal write spelled another way must still match.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.server.api import create_app
from app.settings import Settings
from envs.sql import ENVIRONMENT as SQL
from tests.conftest import TEST_SECRET
from tests.support.rollouts import gold_answer, response_object

TASKS = {t["task_id"]: t for t in map(json.loads, SQL.tasks_path.read_text().splitlines()) if t}
READ_ONLY = "sql-001"  # a headcount: the gold changes nothing
RAISE = "sql-020"  # the gold inserts one salaries row (amount 72200.0)
E1001 = "WHERE employee_no = 'E1001'"
BUDGET = "CAST(budget AS INTEGER)"
HIDDEN = {
    "text case": (f"UPDATE employees SET first_name = upper(first_name) {E1001}", "employees"),
    "text spaces": (
        f"UPDATE employees SET last_name = ' ' || last_name || '  ' {E1001}",
        "employees",
    ),
    "money under a cent": (
        "UPDATE projects SET hourly_rate = hourly_rate + 0.004 WHERE code = 'PRJ-201'",
        "projects",
    ),
    # '4_10000' is TEXT to SQLite and reads as 410000 through the column's type.
    "number stored as text": (
        f"UPDATE projects SET budget = substr({BUDGET}, 1, 1) || '_' || substr({BUDGET}, 2) "
        "WHERE code = 'PRJ-201'",
        "projects",
    ),
}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET), SQL)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            yield c


async def _rollout(client: httpx.AsyncClient, task_id: str, statements: list[str]) -> dict:
    task = TASKS[task_id]
    assert (await client.post("/seed_session", json=task)).status_code == 200
    items: list[dict[str, Any]] = []
    for i, sql in enumerate(statements):
        out = await client.post("/run_sql", json={"sql": sql})
        assert out.status_code == 200 and "error" not in out.json(), out.text
        items += [
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": "run_sql",
                "arguments": json.dumps({"sql": sql}),
            },
            {"type": "function_call_output", "call_id": f"c{i}", "output": out.text},
        ]
    if task.get("expected_answer"):  # the honest answer, so only the writes decide the reward
        arguments = {"answer": task["expected_answer"]["value"]}
        out = await client.post("/submit_answer", json=arguments)
        assert "output" in out.json(), out.text
        items += [
            {
                "type": "function_call",
                "call_id": "a",
                "name": "submit_answer",
                "arguments": json.dumps(arguments),
            },
            {"type": "function_call_output", "call_id": "a", "output": out.text},
        ]
    body = {**task, "response": response_object(items, gold_answer(task))}
    verified = await client.post("/verify", json=body)
    assert verified.status_code == 200, verified.text
    assert (await client.post("/close_session", json={})).status_code == 200
    return verified.json()


@pytest.mark.parametrize("kind", sorted(HIDDEN))
async def test_a_write_normalisation_would_hide_is_a_change_and_collateral(client, kind) -> None:
    statement, table = HIDDEN[kind]
    result = await _rollout(client, READ_ONLY, [statement])
    assert result["verification"]["agent_changes"] == {
        table: {"added": 0, "removed": 0, "changed": 1}
    }, result["verification"]
    assert result["reward"] == 0.0
    assert result["verification"]["changes"]["collateral"] == 1.0
    assert result["reward_components"]["state_match"] == 0.0
    assert table in result["failure_reason"]
    shown = result["verification"]["state_diff"][table]["changed_rows"][0]["changes"]
    assert len(shown) == 1  # the one column written, as stored on both sides
    (before, after) = next(iter(shown.values()))
    assert before != after


async def test_the_untouched_session_still_matches(client) -> None:
    result = await _rollout(client, READ_ONLY, [])
    assert result["reward"] == 1.0 and result["verification"]["agent_changes"] == {}


INSERT = (
    "INSERT INTO salaries (employee_id, effective_date, amount, reason) "
    "VALUES (102000, '2026-04-11', {amount}, 'promotion')"
)


@pytest.mark.parametrize("amount", ["72200.0", "72200.004", "'72_200.00'"])
async def test_a_gold_equal_write_spelled_another_way_still_matches(client, amount) -> None:
    result = await _rollout(client, RAISE, [INSERT.format(amount=amount)])
    assert result["reward"] == 1.0, result.get("failure_reason")
    assert result["verification"]["agent_changes"] == {
        "salaries": {"added": 1, "removed": 0, "changed": 0}
    }
    assert result["verification"]["changes"]["collateral"] == 0.0


async def test_the_gold_change_with_a_hidden_write_beside_it_loses(client) -> None:
    statements = [INSERT.format(amount="72200.0"), HIDDEN["text case"][0]]
    result = await _rollout(client, RAISE, statements)
    assert result["reward"] == 0.0
    assert result["verification"]["changes"]["reproduced"] == 1.0
    assert result["verification"]["changes"]["collateral"] == 1.0
