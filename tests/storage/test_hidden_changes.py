"""Every row a session writes, by any statement path, is seen by verify.

REPLACE (INSERT OR REPLACE, REPLACE INTO, UPDATE OR REPLACE) deletes the rows it conflicts with;
SQLite fires delete triggers for those only with `recursive_triggers` on, so without it the
change tracking never recorded them and the business rules written as BEFORE DELETE triggers
did not hold. Foreign-key actions (CASCADE, SET NULL), UPSERT and rows written by triggers are
covered too, on SQLite files and on PostgreSQL, and verify re-reads a table whole when its
patched dump disagrees with it.
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
from envs.sql.models import RULE_CODES
from tests.conftest import TEST_SECRET
from tests.support.rollouts import gold_answer, response_object

SQL_TASKS = {t["task_id"]: t for t in map(json.loads, SQL.tasks_path.read_text().splitlines()) if t}
# sql-001 only reads (a headcount); its submitted answer with an unchanged database earns 1.0.
READ_ONLY_TASK = "sql-001"
TIMESHEET = "id, employee_id, project_id, week_start, hours, billable, status, invoice_id"


@pytest.fixture
async def sql_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET), SQL)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as client:
            yield client


async def _sql(client: httpx.AsyncClient, statement: str) -> dict[str, Any]:
    answer = await client.post("/run_sql", json={"sql": statement})
    assert answer.status_code == 200, answer.text
    return answer.json()


async def _rollout(client: httpx.AsyncClient, statements: list[str]) -> tuple[list, dict]:
    """Seed the read-only task, run the statements, submit the gold answer and verify."""
    task = SQL_TASKS[READ_ONLY_TASK]
    assert (await client.post("/seed_session", json=task)).status_code == 200
    results = [await _sql(client, s) for s in statements]
    submit = task["ground_truth"][-1]
    assert submit["name"] == "submit_answer", submit
    assert "output" in (await client.post("/submit_answer", json=submit["arguments"])).json()
    body = {**task, "response": response_object([], gold_answer(task))}
    verified = await client.post("/verify", json=body)
    assert verified.status_code == 200, verified.text
    return results, verified.json()


async def test_replace_cannot_delete_an_invoiced_timesheet(sql_client) -> None:
    """The issue's example: INSERT OR REPLACE over an invoiced timesheet (same primary key)
    deleted it without the 'invoiced timesheets cannot be deleted' rule, and verify saw nothing."""
    results, verified = await _rollout(
        sql_client,
        [
            f"INSERT OR REPLACE INTO timesheets ({TIMESHEET}) "
            "VALUES (1, 60, 1, '2025-09-01', 9, 1, 'approved', NULL)",
            "SELECT status, hours FROM timesheets WHERE id = 1",
        ],
    )
    assert results[0]["error"]["code"] == "cannot_archive_invoiced", results[0]  # the rule's code
    assert "invoiced timesheets cannot be deleted" in results[0]["error"]["message"]
    assert results[1]["output"]["rows"] == [["invoiced", 8]]
    assert verified["reward"] == 1.0  # nothing changed: the rule held


@pytest.mark.parametrize(
    "statement",
    [
        # A natural-key conflict: the replaced row had another id, which the insert does not touch.
        f"INSERT OR REPLACE INTO timesheets ({TIMESHEET}) "
        "VALUES (999999, 60, 1, '2025-09-01', 9, 1, 'approved', NULL)",
        f"REPLACE INTO timesheets ({TIMESHEET}) "
        "VALUES (999999, 60, 1, '2025-09-08', 9, 1, 'approved', NULL)",
        # UPDATE OR REPLACE moving a row onto an invoiced row's unique key.
        "UPDATE OR REPLACE timesheets SET week_start = '2025-09-01', project_id = 1 WHERE id = 20",
        "INSERT OR REPLACE INTO invoices SELECT * FROM invoices WHERE id = 1",
        "INSERT OR REPLACE INTO employees SELECT * FROM employees WHERE id = 5",
        "INSERT OR REPLACE INTO salaries SELECT * FROM salaries WHERE id = 3",
    ],
)
async def test_rules_hold_under_replace(sql_client, statement: str) -> None:
    results, verified = await _rollout(sql_client, [statement])
    # Refused by the company rule the replace would break, named by its code.
    assert results[0]["error"]["code"] in RULE_CODES.values(), results[0]
    assert verified["reward"] == 1.0 and verified["verification"]["agent_changes"] == {}


@pytest.mark.parametrize(
    ("statement", "table"),
    [
        # Submitted timesheets may be replaced: the deleted row must show in the changes.
        (
            f"INSERT OR REPLACE INTO timesheets ({TIMESHEET}) "
            "VALUES (999999, 60, 1, '2026-03-09', 5, 1, 'submitted', NULL)",
            "timesheets",
        ),
        (
            f"REPLACE INTO timesheets ({TIMESHEET}) "
            "VALUES (20, 60, 1, '2026-03-09', 5, 1, 'submitted', NULL)",
            "timesheets",
        ),
        (
            # Row 19 (approved) moved onto row 20's key: row 20 is deleted.
            "UPDATE OR REPLACE timesheets SET week_start = '2026-03-09' WHERE id = 19",
            "timesheets",
        ),
        # UPSERT: an update through ON CONFLICT.
        (
            "INSERT INTO customers (id, code, name, country, industry, status) "
            "SELECT id, code, name, country, industry, status FROM customers WHERE id = 3 "
            "ON CONFLICT (id) DO UPDATE SET industry = 'Upserted'",
            "customers",
        ),
        (
            "INSERT INTO departments (id, code, name, location, budget, cost_center) "
            "SELECT id, code, name, location, budget, cost_center FROM departments WHERE id = 2 "
            "ON CONFLICT (code) DO UPDATE SET location = 'Elsewhere'",
            "departments",
        ),
    ],
)
async def test_every_replaced_or_upserted_row_is_seen(
    sql_client, statement: str, table: str
) -> None:
    results, verified = await _rollout(sql_client, [statement])
    assert "output" in results[0], results[0]
    assert verified["reward"] == 0.0, verified["verification"]
    assert table in verified["verification"]["agent_changes"], verified["verification"]


# --- the indirect paths, on both backends ------------------------------------------------------
CASCADE_TASK = {"task_id": "cascade-noop", "ground_truth": [], "expected_outputs": []}
SQLITE_ONLY = {"replace_parent"}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            {"name": "delete_parent", "arguments": {"code": "P-01"}},
            {"parents": (0, 1, 0), "children": (0, 3, 0), "links": (0, 0, 2)},
        ),
        (
            {"name": "upsert_parent", "arguments": {"code": "P-02", "name": "renamed"}},
            {"parents": (0, 0, 1)},
        ),
        (
            {"name": "upsert_parent", "arguments": {"code": "P-03", "name": "new"}},
            {"parents": (1, 0, 0)},
        ),
        (
            {"name": "replace_parent", "arguments": {"code": "P-01", "name": "replaced"}},
            {"parents": (0, 0, 1), "children": (0, 3, 0), "links": (0, 0, 2)},
        ),
    ],
    ids=["cascade_and_set_null", "upsert_update", "upsert_insert", "replace_with_cascade"],
)
async def test_indirect_writes_are_seen_on_both_backends(
    backend: str, tmp_path: Path, client_factory, call: dict, expected: dict
) -> None:
    from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
    from tests.support.cascade_env import ENVIRONMENT as CASCADE

    if backend == "postgres" and call["name"] in SQLITE_ONLY:
        pytest.skip("PostgreSQL has no REPLACE")
    prefix = new_pg_prefix() if backend == "postgres" else None
    try:
        settings = backend_settings(backend, tmp_path / "data", prefix)
        async with client_factory(CASCADE, settings) as client:
            assert (await client.post("/seed_session", json=CASCADE_TASK)).status_code == 200
            result = (await client.post(f"/{call['name']}", json=call["arguments"])).json()
            assert "output" in result, result
            body = {**CASCADE_TASK, "response": response_object([], "done")}
            verified = (await client.post("/verify", json=body)).json()
    finally:
        if prefix:
            drop_pg_schemas(prefix)
    changes = verified["verification"]["agent_changes"]
    if (
        backend == "sqlite"
        and call["name"] == "upsert_parent"
        and call["arguments"]["code"] != "P-03"
    ):
        # The SQLite trigger's audit row for a rename (a row no tool statement names).
        expected = {**expected, "audit": (1, 0, 0)}
    seen = {t: (c["added"], c["removed"], c["changed"]) for t, c in changes.items()}
    assert seen == expected, changes
    assert verified["reward"] == 0.0


def test_verify_reads_a_table_whole_when_its_patched_dump_miscounts(tmp_path: Path) -> None:
    """The backstop: a write the tracking misses (here REPLACE with recursive triggers turned
    off again, as before the fix) makes the row counts disagree, and verify reads every table."""
    from app.core.tasks import task_from_data
    from app.storage.sqlite import db as sqlite_db
    from app.storage.sqlite.store import Store
    from app.verify.state.dump import dump_state

    def dump(conn: Any, *, reuse: bool) -> Any:
        bind = sqlite_db.bind_connection(conn, begin="BEGIN")
        try:
            with bind.begin():
                return dump_state(bind, SQL.metadata.tables, SQL.compare, reuse=reuse)
        finally:
            bind.close()

    snapshot = Store(tmp_path / "data", SQL).snapshot(task_from_data(SQL_TASKS[READ_ONLY_TASK]))
    conn = sqlite_db.memory_from_image(snapshot.image)
    seed = dump(conn, reuse=True)  # a pristine clone: its dump is kept for reuse
    conn.execute("PRAGMA recursive_triggers=OFF")
    conn.execute(
        f"INSERT OR REPLACE INTO timesheets ({TIMESHEET}) "
        "VALUES (999999, 60, 1, '2026-03-09', 5, 1, 'submitted', NULL)"
    )
    patched, whole = dump(conn, reuse=True), dump(conn, reuse=False)
    assert patched == whole
    assert len(whole["timesheets"].rows) == len(seed["timesheets"].rows)
    conn.close()
