"""Scripted adversarial policies, one per environment, for hidden changes: a policy that
answers like the gold solution but also writes where it hopes verify does not look must earn 0,
through HTTP only.

sql: REPLACE / UPDATE OR REPLACE / UPSERT and friends next to the right answer of every task that
only reads. The other environments have typed tools only, so their adversary repeats the gold
writes with one argument nudged (another amount, address, reason...); reward 0 whenever the state
left the gold one, and verify's dump of the session (the snapshot's dump patched with the tracked
rows) must equal reading every table of the file whole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.registry import load_environment
from app.sdk.environment import Environment
from app.server.api import create_app
from app.settings import Settings
from app.storage.sqlite import db as sqlite_db
from app.verify.state.dump import dump_state
from tests.conftest import PORTABLE_ENVS, TEST_SECRET
from tests.support import strict_env
from tests.support.rollouts import fresh_client, gold_answer, response_object
from tests.support.strict_env import ENVIRONMENT as STRICT

TIMESHEET = "id, employee_id, project_id, week_start, hours, billable, status, invoice_id"
# Each statement tries to change the database by a path the old change tracking missed or a
# rule did not cover; some are refused by the database's rules, the rest must be seen.
SQL_HIDDEN_WRITES = [
    f"INSERT OR REPLACE INTO timesheets ({TIMESHEET}) "
    "VALUES (1, 60, 1, '2025-09-01', 9, 1, 'approved', NULL)",  # the example
    f"REPLACE INTO timesheets ({TIMESHEET}) "
    "VALUES (999999, 60, 1, '2026-03-09', 5, 1, 'submitted', NULL)",
    "UPDATE OR REPLACE timesheets SET week_start = '2025-09-08' WHERE id = 19",
    "INSERT OR REPLACE INTO invoices SELECT * FROM invoices WHERE id = 2",
    "INSERT INTO customers (id, code, name, country, industry, status) SELECT id, code, name, "
    "country, industry, status FROM customers WHERE id = 4 "
    "ON CONFLICT (id) DO UPDATE SET industry = 'Hidden'",
    "UPDATE projects SET end_date = date('no' || 'w') WHERE id = 3",
]


async def _client(env: Environment, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=data_dir, secret_key=TEST_SECRET), env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://stategym", timeout=60
        ) as client:
            yield client


def _tasks(env: Environment) -> list[dict[str, Any]]:
    lines = env.tasks_path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _nudged(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """The arguments with one number raised by 1 or one string lengthened, each in turn."""
    out = []
    for key, value in arguments.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            out.append({**arguments, key: value + 1})
        elif isinstance(value, str):
            out.append({**arguments, key: value + " x"})
    return out


async def _call(client: httpx.AsyncClient, name: str, arguments: Any) -> dict[str, Any]:
    answer = await client.post(f"/{name}", json=arguments)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _dumps_agree(env: Environment, path: Path) -> None:
    """Verify's dump (patched from the snapshot's) equals reading every table whole."""
    conn = sqlite_db.open_file(path)
    bind = sqlite_db.bind_connection(conn, begin="BEGIN")
    try:
        with bind.begin():
            tracked = dump_state(bind, env.metadata.tables, env.compare)
            whole = dump_state(bind, env.metadata.tables, env.compare, reuse=False)
        assert tracked == whole
    finally:
        bind.close()
        conn.close()


async def test_sql_adversary_earns_nothing(tmp_path: Path) -> None:
    env = load_environment("sql")
    read_only = [t for t in _tasks(env) if t["family"].startswith(("answer_", "refuse_"))]
    assert len(read_only) == 19
    async for shared in _client(env, tmp_path / "data"):
        for task in read_only:
            client = fresh_client(shared)  # a rollout's own cookie jar
            seeded = (await client.post("/seed_session", json=task)).json()
            outputs = [await _call(client, c["name"], c["arguments"]) for c in task["ground_truth"]]
            assert all("output" in o for o in outputs)
            tried = [await _call(client, "run_sql", {"sql": s}) for s in SQL_HIDDEN_WRITES]
            assert sum("output" in t for t in tried) >= 3, tried
            body = {**task, "response": response_object([], gold_answer(task))}
            verified = (await client.post("/verify", json=body)).json()
            assert verified["reward"] == 0.0, (task["task_id"], verified["verification"])
            changes = verified["verification"]["agent_changes"]
            assert {"timesheets", "customers", "projects"} <= set(changes), changes
            path = tmp_path / "data" / "sessions" / "sql" / f"{seeded['session_id']}.sqlite"
            _dumps_agree(env, path)
            assert (await client.post("/close_session", json={})).status_code == 200
            await client.aclose()


async def _nudging_adversary(
    env: Environment, tasks: list[dict[str, Any]], data_dir: Path
) -> tuple[int, int]:
    """Each task's gold calls, then every gold write again with one argument nudged at a time,
    then verify with the gold answer. Per rollout: a state that left the gold one earns 0; a
    state that stayed the gold one (every nudged call refused, or changing nothing) earns 1,
    since refusing is what a sound environment should do. Returns (left gold, stayed gold)."""
    caught = held = 0
    async for shared in _client(env, data_dir):
        for task in tasks:
            client = fresh_client(shared)
            seeded = (await client.post("/seed_session", json=task)).json()
            calls = task["ground_truth"]
            for call in calls:
                assert "output" in await _call(client, call["name"], call["arguments"])
            nudged_calls = [
                (c["name"], nudged)
                for c in calls
                if not env.tool_named(c["name"]).read_only
                for nudged in _nudged(c["arguments"])
            ]
            assert nudged_calls, f"{task['task_id']}: no gold write to nudge"
            for name, arguments in nudged_calls:
                await _call(client, name, arguments)  # a refusal is a 200 tool error
            body = {**task, "response": response_object([], gold_answer(task))}
            verified = (await client.post("/verify", json=body)).json()
            path = data_dir / "sessions" / env.name / f"{seeded['session_id']}.sqlite"
            _dumps_agree(env, path)
            if verified["verification"]["state_diff"]:
                assert verified["reward"] == 0.0, verified
                caught += 1
            else:  # the gold state stands: the refusals (or no-op writes) cost nothing
                assert verified["reward"] == 1.0, verified
                held += 1
            assert (await client.post("/close_session", json={})).status_code == 200
            await client.aclose()
    return caught, held


@pytest.mark.parametrize("env_name", PORTABLE_ENVS)
async def test_typed_tool_adversary_earns_nothing(env_name: str, tmp_path: Path) -> None:
    env = load_environment(env_name)

    def writes(name: str) -> bool:  # the answer tools write the answer row, no state
        tool = env.tool_named(name)
        return not tool.read_only and not tool.framework

    writing = [t for t in _tasks(env) if any(writes(c["name"]) for c in t["ground_truth"])]
    caught, held = await _nudging_adversary(env, writing[:12], tmp_path / "data")
    assert caught + held == len(writing[:12])


async def test_an_environment_refusing_every_nudge_passes(tmp_path: Path) -> None:
    """The adversary test never asks an environment to be weaker: one whose tools refuse every
    nudged call (tests/support/strict_env.py) keeps the gold state and the full reward."""
    caught, held = await _nudging_adversary(STRICT, strict_env.TASKS, tmp_path / "data")
    assert (caught, held) == (0, len(strict_env.TASKS))
