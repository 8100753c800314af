"""Malformed seeds, bodies, metrics and admin queries are 4xx, never 500.

Found by fuzzing (every column of one seeded table of sql, retail and ledger with None, 2**70,
-2**64, text, a list, an object, 1e308 and true; odd `now` values; NaN/Infinity bodies; huge
rewards; absurd admin filters): 45 answers were 500 on SQLite and 1 more on PostgreSQL.
"""

from __future__ import annotations

import json

import pytest

from app.registry import load_environment
from app.settings import Settings
from tests.conftest import TEST_SECRET, backend_settings, drop_pg_schemas, new_pg_prefix
from tests.integrations.test_report import sg
from tests.support.rollouts import load_tasks

TOKEN = "admin-token-0123456789abcdef"


@pytest.fixture
def settings(tmp_path, backend, request):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    return backend_settings(backend, tmp_path / "data", prefix)


def _task_seeding(env: str, table: str) -> dict:
    tasks = load_tasks(load_environment(env).tasks_path)
    return next(t for t in tasks if table in ((t.get("seed") or {}).get("rows") or {}))


def _with_row(task: dict, table: str, **changes) -> dict:
    rows = task["seed"]["rows"]
    first = {**rows[table][0], **changes}
    return {**task, "seed": {**task["seed"], "rows": {**rows, table: [first, *rows[table][1:]]}}}


LEDGER_BAD_ROWS = [
    {"amount": None},  # NOT NULL
    {"account_id": 987654321},  # foreign key to nothing
    {"transaction_id": 2**70},  # past 64 bits
    {"account_id": -(2**64)},
    {"amount": "lots"},  # CHECK / type
    {"amount": [1]},  # a JSON list is no value
    {"amount": {"a": 1}},
    {"amount": 1e308},  # PostgreSQL's NUMERIC(12, 2) refuses it; SQLite took it
]


@pytest.mark.parametrize("change", LEDGER_BAD_ROWS, ids=lambda c: json.dumps(c)[:30])
async def test_bad_seed_rows_are_422(client_factory, settings, change):
    task = _with_row(_task_seeding("ledger", "entries"), "entries", **change)
    async with client_factory(load_environment("ledger"), settings) as c:
        r = await c.post("/seed_session", json=task)
        if r.status_code == 200:  # 1e308 fits SQLite's REAL: accepted there, and that is fine
            assert change == {"amount": 1e308} and settings.database_url is None
            return
        assert r.status_code == 422, r.text
        assert (
            r.json()["error"]["type"] == "invalid_task" and "seed" in r.json()["error"]["message"]
        )
        # The server still serves: a good seed after the bad one works.
        assert (await c.post("/seed_session", json=_task_seeding("ledger", "entries"))).is_success


@pytest.mark.parametrize(
    "now", ["9999-12-31T23:59:59", "0001-01-01", "0001-01-01T00:00:00+01:00", "soon", 5, ""]
)
async def test_odd_now_values_are_422(client_factory, settings, now):
    task = load_tasks(load_environment("retail").tasks_path)[0]
    seed = {**(task.get("seed") or {}), "now": now}
    async with client_factory(load_environment("retail"), settings) as c:
        r = await c.post("/seed_session", json={**task, "seed": seed})
        assert r.status_code == 422, r.text


@pytest.mark.parametrize(
    "body", ['{"response": NaN}', '{"response": {"x": Infinity}}', '{"task_id": -Infinity}']
)
async def test_nan_in_a_verify_body_is_400(warehouse_seeded, body):
    r = await warehouse_seeded.post(
        "/verify", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"], r.text


@pytest.fixture
async def warehouse_seeded(warehouse):
    from tests.server.test_protocol import TASK

    await warehouse.post("/seed_session", json=TASK)
    return warehouse


@pytest.mark.parametrize(
    "rows",
    [
        '[{"reward": ' + "1" * 401 + "}]",
        '[{"reward": 1e400}]',
        '[{"reward": 1, "reward_components": {"a": ' + "9" * 400 + "}}]",
    ],
)
async def test_absurd_rewards_in_aggregate_metrics_are_400(warehouse, rows):
    body = '{"verify_responses": ' + rows + "}"
    r = await warehouse.post(
        "/aggregate_metrics", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"]


@pytest.mark.parametrize(
    "query",
    [
        "since=99999999999d",
        "since=100000000000000000000000000s",
        "offset=99999999999999999999",
        "offset=9223372036854775808",
        "reward=nan",
        "reward=>=inf",
    ],
)
async def test_absurd_admin_filters_are_4xx(client_factory, tmp_path, query):
    custom = Settings(data_dir=tmp_path / "adm", secret_key=TEST_SECRET, admin_token=TOKEN)
    task = load_tasks(load_environment("retail").tasks_path)[0]
    async with client_factory(load_environment("retail"), custom) as c:
        sid = (await c.post("/seed_session", json=task)).json()["session_id"]
        auth = {"Authorization": f"Bearer {TOKEN}", "host": "127.0.0.1"}
        r = await c.get(f"/admin/sessions?{query}", headers=auth)
        assert r.status_code in (400, 422), r.text
        if query.startswith("offset"):
            r = await c.get(f"/admin/sessions/{sid}/tables/orders?{query}", headers=auth)
            assert r.status_code in (400, 422), r.text
        r = await c.get(
            f"/admin/sessions/{sid}/tables/orders?where=id=99999999999999999999", headers=auth
        )
        assert r.status_code == 400, r.text


@pytest.mark.parametrize("reward", ["1" * 401, "NaN", "Infinity"])
def test_absurd_rewards_in_a_report_are_a_message(tmp_path, reward):
    path = tmp_path / "rollouts.jsonl"
    path.write_text('{"task_id": "a", "reward": ' + reward + "}\n")
    result = sg("report", str(path))
    assert result.exit_code == 1 and "not a finite number" in result.output, result.output
