"""The control database over a long run, on real SQLite files and PostgreSQL schemas: one task
row per task whatever the number of its sessions, readers that see each record's task as before,
the task-rows migration both ways over rows an older release wrote, the bound on records of
closed sessions whose database is gone, and seeds of one task racing each other and the pruner.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, text

from app import jsonio
from app.explorer.queries import RunQueries
from app.runtime.inspection import Inspector
from app.runtime.lifecycle import prune_records
from app.storage.control import ControlDB
from app.storage.control_schema import (
    lineage_table,
    resources_ids_table,
    sessions_table,
    task_rows_table,
)
from app.storage.factory import open_inspection
from app.storage.lineage import Origin
from app.storage.migrations import downgrade_file, head_revision, revision_of, upgrade_file
from app.storage.postgres.control import PgControlDB, migrate_control_schema, open_pg_control
from app.storage.postgres.db import SchemaNames, make_engine
from app.storage.sqlite.control import open_sqlite_control
from tests.conftest import PG_URL, backend_settings, drop_pg_schemas, new_pg_prefix
from tests.server.test_protocol import TASK
from tests.server.test_typed_sessions import typed_close, typed_seed
from tests.support.rollouts import fresh_client, response_object, run_rollout
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

PREVIOUS = "e5a1c3f7b9d2"  # the control revision before task rows
GOLD = TASK["ground_truth"]


@pytest.fixture
def settings(tmp_path, backend, request):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    return backend_settings(backend, tmp_path / "data", prefix)


@pytest.fixture
def open_control(backend, tmp_path, request) -> Iterator[Callable[[], ControlDB]]:
    """Opens the control store of one control database again per call, as each worker of a
    server (or replica) opens its own."""
    made: list[ControlDB] = []
    engines: list[Engine] = []
    prefix = request.getfixturevalue("pg_prefix") if backend == "postgres" else None

    def opener() -> ControlDB:
        if prefix is None:
            control: ControlDB = open_sqlite_control(tmp_path / "control.sqlite")
        else:
            engines.append(make_engine(PG_URL, pool_size=4))
            control = open_pg_control(engines[-1], SchemaNames(prefix).control)
        made.append(control)
        return control

    yield opener
    for control in made:
        control.dispose()
    for engine in engines:
        engine.dispose()


def count(control: ControlDB, table: Any, *where: Any) -> int:
    with control.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


def add(control: ControlDB, sid: str, task: dict[str, Any], rsid: str | None = None) -> None:
    held = control.add(
        session_id=sid,
        env="warehouse",
        task_id=task["task_id"],
        snapshot_key="k" * 16,
        resources_session_id=rsid,
        file=f"sessions/warehouse/{sid}.sqlite",
        task=task,
        episode=None if rsid is None else f"episode-{sid}",
    )
    assert held is None


def task_number(n: int) -> dict[str, Any]:
    return {**TASK, "task_id": f"wh-{n}"}


# --- one task row per task; readers unchanged -----------------------------------------------------
async def test_sessions_of_one_task_share_one_task_row_and_readers_see_it_whole(
    client_factory, settings
):
    task = {**TASK, "family": "stock", "difficulty": 2}
    async with client_factory(WAREHOUSE, settings) as c:
        for _ in range(4):  # a group of plain seeds
            verified = await run_rollout(c, task, GOLD, "3 left")
            assert verified["reward"] == 1.0
        async with fresh_client(c) as typed:  # typed seeds take the claiming path
            for rsid in ("rs-a", "rs-b"):
                seed = typed_seed(rsid, rollout=rsid, task_data=task)
                assert (await typed.post("/seed_session", json=seed)).status_code == 200
                close = typed_close(rsid, rollout=rsid)
                assert (await typed.post("/close_session", json=close)).status_code == 200
        control = c.app.state.protocol.sessions.control
        records = control.list("warehouse")
        assert len(records) == 6
        assert count(control, task_rows_table) == 1
        assert {r.task["task_id"] for r in records} == {"wh-1"}
        assert all(r.task == records[0].task for r in records)
        assert records[0].task["seed"] == task["seed"]
        assert records[0].task["ground_truth"] == GOLD
        # The explorer's per-task fields, read from the task row.
        assert RunQueries(control).task_meta([("warehouse", "wh-1")]) == {
            ("warehouse", "wh-1"): ("2", "stock")
        }
    with open_inspection(settings) as (store, view):
        inspector = Inspector(settings.data_dir, store, view, envs={"warehouse": WAREHOUSE})
        verified_ids = [r.id for r in store.list("warehouse") if r.reward is not None]
        assert len(verified_ids) == 4
        for sid in verified_ids:
            again = inspector.reverify(inspector.record(sid))
            assert again["reward"] == 1.0 and again["matches_stored"] is True


# --- the migration, both ways, over rows the previous revision wrote ------------------------------
OLD_TASKS = [
    {"task_id": "wh-1", "seed": {"rows": {"items": [{"id": 1}]}}, "z": 1, "a": [2, {"y": 1}]},
    {"task_id": "wh-2", "seed": {"rows": {}}, "note": "naïve ✓"},
]
OLD_ROWS = [  # id, task index, status, reward, verify
    ("a" * 32, 0, "closed", 1.0, {"reward": 1.0}),
    ("b" * 32, 0, "verified", 0.0, {"reward": 0.0, "failure_reason": "x"}),
    ("c" * 32, 1, "open", None, None),
]


def old_row_values(n: int) -> dict[str, Any]:
    sid, task, status, reward, verify = OLD_ROWS[n]
    return {
        "id": sid,
        "env": "warehouse",
        "task_id": OLD_TASKS[task]["task_id"],
        "snapshot_key": "k" * 16,
        "rsid": None,
        "status": status,
        "created_at": f"2026-11-30 10:00:0{n}.000000",
        "closed_at": "2026-11-30 10:01:00.000000" if status == "closed" else None,
        "reward": reward,
        "file": f"sessions/warehouse/{sid}.sqlite",
        # As the previous release stored it: its key order, dumps_text.
        "task_json": jsonio.dumps_text(OLD_TASKS[task]),
        "verify_json": jsonio.dumps_text(verify) if verify else None,
    }


OLD_INSERT = (
    "INSERT INTO {prefix}sessions (id, env, task_id, snapshot_key, resources_session_id, status, "
    "created_at, closed_at, reward, file, task_json, verify_json) VALUES (:id, :env, :task_id, "
    ":snapshot_key, :rsid, :status, :created_at, :closed_at, :reward, :file, :task_json, "
    ":verify_json)"
)


def assert_records_as_written(control: ControlDB) -> None:
    for n, (sid, task, status, reward, verify) in enumerate(OLD_ROWS):
        record = control.get(sid)
        assert record is not None, sid
        assert record.task == OLD_TASKS[task]
        assert (record.status, record.reward, record.verify) == (status, reward, verify)
        assert record.created_at == datetime(2026, 11, 30, 10, 0, n)
        assert record.dropped_at is None  # nobody recorded whether its database went
    assert count(control, task_rows_table) == len(OLD_TASKS)


def test_sqlite_control_migration_moves_tasks_out_and_back(tmp_path):
    path = tmp_path / "control.sqlite"
    sqlite3.connect(path).close()
    upgrade_file(path, "control", PREVIOUS)
    conn = sqlite3.connect(path)
    with conn:
        for n in range(len(OLD_ROWS)):
            conn.execute(OLD_INSERT.format(prefix=""), old_row_values(n))
        conn.execute(
            "INSERT INTO lineage VALUES (?, ?, 2, 'fork', '2026-11-30 10:02:00.000000')",
            ("c" * 32, "a" * 32),
        )
    conn.close()

    control = open_sqlite_control(path)  # upgrades to head
    try:
        assert_records_as_written(control)
        assert control.lineage_tree("c" * 32)["session_id"] == "a" * 32
        add(control, "d" * 32, OLD_TASKS[1])  # a session written after the upgrade
        assert count(control, task_rows_table) == len(OLD_TASKS)
    finally:
        control.dispose()

    downgrade_file(path, "control", PREVIOUS)
    conn = sqlite3.connect(path)
    try:
        assert revision_of(conn) == PREVIOUS
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "task_rows" not in tables
        columns = [r[1] for r in conn.execute("PRAGMA table_info(sessions)")]
        assert "task_json" in columns and "task_digest" not in columns
        assert "dropped_at" not in columns
        stored = dict(conn.execute("SELECT id, task_json FROM sessions"))
    finally:
        conn.close()
    expected = {sid: OLD_TASKS[task] for sid, task, *_ in OLD_ROWS} | {"d" * 32: OLD_TASKS[1]}
    assert {sid: json.loads(t) for sid, t in stored.items()} == expected

    control = open_sqlite_control(path)  # and up again
    try:
        assert_records_as_written(control)
        assert control.get("d" * 32).task == OLD_TASKS[1]
    finally:
        control.dispose()
    conn = sqlite3.connect(path)
    try:
        assert revision_of(conn) == head_revision("control")
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def test_postgres_control_migration_moves_tasks_out_and_back(pg_prefix):
    engine = make_engine(PG_URL, pool_size=2)
    schema = SchemaNames(pg_prefix).control
    q = f'"{schema}".'
    try:
        older = PgControlDB(engine, schema)
        with older.engine.begin() as conn:  # the schema as the previous release left it
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            migrate_control_schema(conn, schema, PREVIOUS)
            for n in range(len(OLD_ROWS)):
                conn.execute(text(OLD_INSERT.format(prefix=q)), old_row_values(n))

        control = open_pg_control(engine, schema)  # upgrades to head
        assert_records_as_written(control)
        add(control, "d" * 32, OLD_TASKS[1])

        with control.engine.begin() as conn:
            migrate_control_schema(conn, schema, PREVIOUS, down=True)
        with engine.connect() as conn:
            version = conn.exec_driver_sql(f"SELECT version_num FROM {q}alembic_version")
            assert version.scalar_one() == PREVIOUS
            stored = dict(conn.exec_driver_sql(f"SELECT id, task_json FROM {q}sessions").all())
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}
            ).scalars()
            assert "task_rows" not in set(tables)
        expected = {sid: OLD_TASKS[task] for sid, task, *_ in OLD_ROWS} | {"d" * 32: OLD_TASKS[1]}
        assert {sid: json.loads(t) for sid, t in stored.items()} == expected

        control = open_pg_control(engine, schema)  # and up again
        assert_records_as_written(control)
        assert control.get("d" * 32).task == OLD_TASKS[1]
    finally:
        engine.dispose()


# --- the bound on records of sessions whose database is gone --------------------------------------
def test_pruning_keeps_the_newest_dropped_records_and_every_record_with_a_database(open_control):
    control = open_control()
    dropped = [f"{n:032x}" for n in range(1, 7)]
    kept, live = ["e" * 32, "f" * 32], ["c" * 32, "d" * 32]
    for n, sid in enumerate(dropped):
        add(control, sid, task_number(n % 4), rsid=f"rs-{n}")
    for sid in kept + live:
        add(control, sid, task_number(9))
    add(control, "9" * 32, task_number(0))  # a live session of a pruned task: its row stays
    control.record_lineage([Origin(dropped[1], dropped[0], 1, "fork")])
    control.record_lineage([Origin(kept[0], dropped[0], 1, "fork")])  # a child that stays
    for n, sid in enumerate(dropped):
        assert control.mark_closed(sid, dropped=True)
        assert control.close_claim("warehouse", f"rs-{n}", None)
    for sid in kept:
        assert control.mark_closed(sid)
    # Another environment's dropped records are its own server's to prune.
    other = {**task_number(0), "env": "other"}
    control.add(
        session_id="8" * 32,
        env="other",
        task_id="wh-0",
        snapshot_key="k" * 16,
        resources_session_id=None,
        file="x",
        task=other,
    )
    control.mark_closed("8" * 32, dropped=True)

    order = sorted(dropped, key=lambda s: (control.get(s).dropped_at, s))
    assert control.prune_dropped("warehouse", keep=2, limit=3) == 3
    assert control.prune_dropped("warehouse", keep=2, limit=3) == 1
    assert control.prune_dropped("warehouse", keep=2, limit=3) == 0
    assert [s for s in order if control.get(s) is not None] == order[-2:]
    for sid in kept + live + ["9" * 32, "8" * 32]:
        assert control.get(sid) is not None, sid
    # Their claims and lineage went with them; the kept child's own lineage row stays.
    pruned = order[:-2]
    assert count(control, resources_ids_table, resources_ids_table.c.session_id.in_(pruned)) == 0
    assert count(control, resources_ids_table) == 2
    assert count(control, lineage_table, lineage_table.c.session_id.in_(pruned)) == 0
    assert count(control, lineage_table, lineage_table.c.session_id == kept[0]) == 1
    # Task rows: exactly those some session still names.
    with control.connect() as conn:
        named = set(conn.execute(select(sessions_table.c.task_digest).distinct()).scalars())
        rows = set(conn.execute(select(task_rows_table.c.digest)).scalars())
    assert rows == named
    assert control.prune_dropped("other", keep=1, limit=10) == 0


async def test_the_server_prunes_only_records_whose_database_is_gone(client_factory, settings):
    """keep_failed: passing rollouts' databases go at close, failing ones stay and are never
    pruned; a session closed before its reward was known is dropped by a later close."""
    keep_failed = settings.model_copy(update={"retention": "keep_failed"})
    async with client_factory(WAREHOUSE, keep_failed) as c:
        sessions = c.app.state.protocol.sessions
        passed = [(await run_rollout(c, task_number(n), GOLD, "3 left")) for n in range(3)]
        failed = [(await run_rollout(c, task_number(n), [], "nothing")) for n in range(3, 5)]
        assert {v["reward"] for v in passed} == {1.0} and {v["reward"] for v in failed} == {0.0}
        async with fresh_client(c) as late:  # closed unverified (kept), verified 1.0, closed
            seeded = await late.post("/seed_session", json=task_number(5))
            call = await late.post(f"/{GOLD[0]['name']}", json=GOLD[0]["arguments"])
            await late.post("/close_session", json={})
            late_id = seeded.headers["X-StateGym-Session"]
            assert sessions.control.get(late_id).dropped_at is None
            outputs = [
                {
                    "type": "function_call",
                    "call_id": "c0",
                    "name": GOLD[0]["name"],
                    "arguments": json.dumps(GOLD[0]["arguments"]),
                },
                {"type": "function_call_output", "call_id": "c0", "output": call.text},
            ]
            body = {**task_number(5), "response": response_object(outputs, "3 left")}
            assert (await late.post("/verify", json=body)).json()["reward"] == 1.0
            await late.post("/close_session", json={})
            assert sessions.control.get(late_id).dropped_at is not None
        async with fresh_client(c) as live:
            await live.post("/seed_session", json=task_number(6))
            assert await prune_records(sessions, keep=1, batch=2) == 3
            assert await prune_records(sessions, keep=1, batch=2) == 0
            records = {r.id: r for r in sessions.control.list("warehouse")}
            assert len(records) == 4  # 2 failures, the newest dropped one, the live one
            assert [r.id for r in records.values() if r.dropped_at is not None] == [late_id]
            view = sessions.backend.view()
            for record in records.values():
                assert view.present(record) == (record.dropped_at is None), record.id
            assert count(sessions.control, task_rows_table) == 4


# --- racing seeds ---------------------------------------------------------------------------------
def test_concurrent_seeds_of_one_task_all_succeed_with_one_task_row(open_control):
    workers = [open_control() for _ in range(6)]
    start = threading.Barrier(len(workers))

    def seed(n: int) -> None:
        start.wait()
        for i in range(4):
            rsid = f"rs-{n}-{i}" if i % 2 else None
            add(workers[n], f"{n:016x}{i:016x}", task_number(1), rsid=rsid)

    with ThreadPoolExecutor(len(workers)) as pool:
        list(pool.map(seed, range(len(workers))))
    assert count(workers[0], sessions_table) == 24
    assert count(workers[0], task_rows_table) == 1
    assert {r.task["task_id"] for r in workers[0].list("warehouse")} == {"wh-1"}


@pytest.mark.parametrize("typed", [False, True])
def test_a_seed_of_a_task_whose_row_another_worker_removed_writes_it_again(open_control, typed):
    """A worker remembers the task rows it wrote; another worker deleting the last session of
    a task removes its row, so the next seed's session row fails the foreign key and is retried
    with the task row."""
    mine, theirs = open_control(), open_control()
    add(mine, "a" * 32, task_number(1))
    assert theirs.delete(["a" * 32]) == 1
    assert count(theirs, task_rows_table) == 0
    add(mine, "b" * 32, task_number(1), rsid="rs-b" if typed else None)
    assert mine.get("b" * 32).task == task_number(1)
    assert count(theirs, task_rows_table) == 1


def test_workers_pruning_in_turn_keep_exactly_the_bound(open_control):
    """Each worker remembers what it saw to skip passes with nothing to prune; with others
    pruning, sessions dropped, kept and deleted in between, every pass still leaves exactly the
    newest `keep` dropped records (or all, while fewer)."""
    import random

    workers = [open_control() for _ in range(3)]
    rng = random.Random(5)
    keep, made, dropped = 5, 0, []
    for step in range(60):
        worker = rng.choice(workers)
        for _ in range(rng.choice([0, 0, 1, 3, 7])):
            sid = f"{made:032x}"
            made += 1
            add(worker, sid, task_number(made % 3))
            if rng.random() < 0.8:
                worker.mark_closed(sid, dropped=True)
                dropped.append(sid)
            else:
                worker.mark_closed(sid)
        if step % 11 == 10 and dropped:  # `sessions gc` removes some records itself
            gone = rng.sample(dropped, min(2, len(dropped)))
            worker.delete(gone)
            dropped = [s for s in dropped if s not in gone]
        while worker.prune_dropped("warehouse", keep, limit=2) == 2:
            pass
        newest = dropped[-keep:]
        left = [s for s in dropped if worker.get(s) is not None]
        assert left == newest, step
        dropped = left
    assert made > 50


def test_the_prune_cost_bench_runs():
    """bench/control_growth.py's pruner figures (its rollouts run in `python -m`)."""
    from bench.control_growth import prune_cost

    labels = list(prune_cost(1200, batch=100))
    assert labels[3] == "100 to prune (pruned 100)"
    assert all(label.endswith("(pruned 0)") for i, label in enumerate(labels) if i != 3)


def test_live_sessions_are_counted_by_an_index_seek_whatever_the_records_kept(tmp_path) -> None:
    """count_live runs at every seed under max_live_sessions and on every stats line: it seeks
    the live records in the (env, status) index instead of walking the closed ones, which
    session_records_max lets reach 100,000."""
    control = open_sqlite_control(tmp_path / "control.sqlite")
    created = datetime(2026, 12, 5, 6, 0, 0)
    for n in range(30):
        control.add(
            session_id=f"{n:032x}",
            env="retail",
            task_id=f"t-{n % 3}",
            snapshot_key="k" * 16,
            resources_session_id=None,
            file=f"sessions/retail/{n:032x}.sqlite",
            task={"task_id": f"t-{n % 3}"},
            created_at=created,
        )
    for n in range(20):
        control.mark_closed(f"{n:032x}")
    control.mark_verified(f"{20:032x}", 1.0, {"reward": 1.0})  # verified is live too
    assert control.count_live("retail") == 10
    assert control.count_live("airline") == 0
    assert {sid for sid, _ in control.live_created_before("retail", datetime(2027, 1, 1))} == {
        f"{n:032x}" for n in range(20, 30)
    }
    ran: list[tuple[str, Any]] = []  # the statement count_live sends, as sent

    def record(_conn, _cursor, statement, parameters, _context, _many) -> None:
        ran.append((statement, parameters))

    event.listen(control.engine, "before_cursor_execute", record)
    assert control.count_live("retail") == 10
    event.remove(control.engine, "before_cursor_execute", record)
    (statement, parameters), *_ = [r for r in ran if "count(" in r[0].lower()]
    with control.engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).fetchall()
    plan = " ".join(str(row) for row in rows)
    assert "ix_sessions_env_status (env=? AND status=?)" in plan, plan
    control.dispose()
