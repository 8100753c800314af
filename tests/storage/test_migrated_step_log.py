"""The step log of a retained session across a migration, on both backends.

A session of the `depot` test environment (tests/support/depot_env.py) is taken back to its first
revision as a release of those models left it (every table of its models step-logged), then
upgraded by the real migration path (`upgrade_sessions` on PostgreSQL, `upgrade_file` on SQLite),
whose revision adds a table (`moves`), recreates one (`bins`, copy and move) and drops one
(`notes`). Afterwards the session's step-log triggers are those of a fresh session, tool writes
to the added and the recreated table are in its log, a rewind to step 0 undoes them, and verify
gives the step rewards a fresh session gets for the same calls.

Also: retail's shipped migration (a backfill of every product) leaves no row in the log; a
failing upgrade leaves the session exactly as it was; and SQLite's rule for a recreated table
its log already wrote (its rowids must have survived the copy).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, Text, select
from sqlalchemy.orm import Session

from app.runtime.sessions import SessionManager
from app.runtime.steps import body_text
from app.server.models import parse_seed_body
from app.storage.steplog import STEP_COLS_TABLE, STEP_PREFIX, install_step_log, step_log
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import response_object

OLD = "d0a1c0ffee01"  # the depot branch's first revision: items, bins (label 40), notes
TASK = {
    "task_id": "depot-move-and-label",
    "seed": {"rows": {"items": [{"id": 101, "sku": "SKU-0101", "quantity": 9}]}},
    "ground_truth": [
        {"name": "move_stock", "arguments": {"sku": "SKU-0101", "delta": -3, "reason": "sold"}},
        {"name": "label_bin", "arguments": {"code": "A1", "label": "Returns"}},
    ],
    "reward_mode": "partial",
}
CALLS = [(c["name"], c["arguments"]) for c in TASK["ground_truth"]]
# The models of the first revision (as far as the step log goes: names, keys, columns).
OLD_MODELS = MetaData()
Table(
    "items",
    OLD_MODELS,
    Column("id", Integer, primary_key=True),
    Column("sku", String(32)),
    Column("quantity", Integer),
)
Table("bins", OLD_MODELS, Column("code", String(8), primary_key=True), Column("label", String(40)))
Table("notes", OLD_MODELS, Column("id", Integer, primary_key=True), Column("body", Text))


def _dump(env: Any) -> Any:
    def dump(conn: Any) -> Any:  # every row of every table, exactly
        with Session(bind=conn) as db, db.begin():
            return {
                t.name: db.execute(select(t).order_by(*t.primary_key.columns)).all()
                for t in env.metadata.sorted_tables
            }

    return dump


def _log_of(conn: Any) -> Any:
    with conn.begin():
        log = step_log(conn)
        assert log is not None
        return [s.tool for s in log.steps()], log.change_counts()


def _sqlite_older_release(path: Any) -> None:
    """The session file at OLD, as that release's snapshot made it: every table of its models
    carries the step log's triggers and column record."""
    from app.storage.migrations import downgrade_file

    downgrade_file(path, "depot", OLD)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        install_step_log(conn, {"bins": ["code", "label"], "notes": ["id", "body"]})
        conn.execute(f"DELETE FROM {STEP_COLS_TABLE} WHERE tbl = 'moves'")
        conn.execute("COMMIT")
    finally:
        conn.close()


def _pg_older_release(engine: Any, schema: str) -> None:
    """The session schema at OLD, as a clone of the template of a release before round 7 made
    it: every table of its models carries the step log's trigger, calling the schema's own
    function, and its column record."""
    from app.storage.postgres.db import (
        functions_schema_of,
        in_schema,
        quoted,
        schema_ddl,
        session_connection,
    )
    from app.storage.postgres.migrate import migrate_schema
    from tests.storage.test_pg_step_function import _LEGACY_FUNCTION

    migrate_schema(engine, schema, "depot", OLD, down=True)
    triggers = in_schema(schema_ddl(OLD_MODELS).triggers, schema)
    with session_connection(engine, schema) as conn, conn.begin():
        conn.exec_driver_sql(f"DROP TRIGGER {quoted(STEP_PREFIX + 'items')} ON items")
        conn.exec_driver_sql(_LEGACY_FUNCTION.format(s=quoted(schema)))
        own = triggers.replace(f"{quoted(functions_schema_of(schema))}.", f"{quoted(schema)}.")
        conn.exec_driver_sql(own)
        conn.exec_driver_sql(
            f"DELETE FROM {STEP_COLS_TABLE} WHERE tbl = 'moves'; "
            f"INSERT INTO {STEP_COLS_TABLE} VALUES ('notes', 'id,body')"
        )


def _pg_catalog(engine: Any, schema: str) -> dict[str, Any]:
    """A schema's columns, triggers (and the function each calls), own functions, meta, version,
    step-log column records and row count: what an upgrade changes."""
    from app.storage.postgres.db import quoted

    s = quoted(schema)
    queries = {
        "columns": "SELECT table_name, column_name, data_type, character_maximum_length "
        "FROM information_schema.columns WHERE table_schema = %(n)s ORDER BY 1, 2",
        "triggers": "SELECT c.relname, t.tgname, t.tgfoid::regprocedure::text FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = to_regnamespace(%(s)s) "
        "AND NOT t.tgisinternal ORDER BY 1, 2",
        "functions": "SELECT proname FROM pg_proc WHERE pronamespace = to_regnamespace(%(s)s)",
        "meta": f"SELECT * FROM {s}._stategym_meta ORDER BY 1",
        "version": f"SELECT * FROM {s}.alembic_version",
        "step_cols": f"SELECT * FROM {s}.{STEP_COLS_TABLE} ORDER BY 1",
        "step_rows": f"SELECT count(*) FROM {s}._stategym_step_rows",
    }
    with engine.connect() as conn:
        return {k: conn.exec_driver_sql(q, {"n": schema, "s": s}).all() for k, q in queries.items()}


def _sqlite_triggers(path: Any) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger' "
            "AND substr(name, 1, ?) = ? ORDER BY 1, 2",
            (len(STEP_PREFIX), STEP_PREFIX),
        ).fetchall()
    finally:
        conn.close()


def _response(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i, ((name, args), output) in enumerate(zip(CALLS, outputs, strict=True)):
        call = {"type": "function_call", "call_id": f"c{i}", "name": name}
        items.append({**call, "arguments": json.dumps(args)})
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": output})
    return response_object(items, "Done.")


async def test_tables_a_migration_adds_or_recreates_are_step_logged(
    backend, depot, tmp_path, request
):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    settings = backend_settings(backend, tmp_path / "data", prefix)
    first = SessionManager(settings, depot)
    migrated, fresh = [(await first.seed(parse_seed_body(TASK))).session_id for _ in range(2)]
    await first.aclose()

    if backend == "postgres":
        from app.storage.postgres.db import session_connection
        from app.storage.postgres.migrate import upgrade_sessions
        from tests.storage.test_pg_schema_pool import _schema_view

        engine, names = first.backend.store.engine, first.backend.names
        _pg_older_release(engine, names.session(migrated))
        outcomes = {o.schema: o.status for o in upgrade_sessions(engine, names, "depot")}
        assert outcomes == {names.session(migrated): "upgraded", names.session(fresh): "current"}

        def triggers(session_id: str) -> Any:  # also asserts each calls the prefix's function
            return _schema_view(engine, depot, names.session(session_id))["triggers"]

        def tracked(session_id: str) -> Any:
            with session_connection(engine, names.session(session_id)) as conn, conn.begin():
                return first.backend.store.changes(conn, depot.metadata.tables)

        # Verify reads a migrated schema whole: the migration's writes are in no log.
        assert tracked(migrated) is None and tracked(fresh) is not None
    else:
        from app.storage.migrations import upgrade_file

        store = first.backend.store
        _sqlite_older_release(store.session_path(migrated))
        upgrade_file(store.session_path(migrated), "depot")

        def triggers(session_id: str) -> Any:
            return _sqlite_triggers(store.session_path(session_id))

    # The triggers a fresh session has: on every table of the models, `notes`'s gone with it.
    assert triggers(migrated) == triggers(fresh)
    manager = SessionManager(settings, depot)
    dump = _dump(depot)
    try:
        verdicts, states = [], []
        for session_id in (migrated, fresh):
            handle = await manager._handle(session_id)
            states.append(manager.backend.read(handle, dump))
            outputs = []
            for name, args in CALLS:
                result, _ = manager._timed_call(handle, depot.tool_named(name), args)
                assert "output" in result, result
                outputs.append(body_text(result))  # the body the agent was sent
            # Every row the calls wrote is in the log, the added and the recreated table's too.
            assert manager.backend.read(handle, _log_of) == (
                [name for name, _ in CALLS],
                {1: {"items": 1, "moves": 1}, 2: {"bins": 1}},
            ), session_id
            body = {**TASK, "response": _response(outputs)}
            verdicts.append(await manager.verify(session_id, body))
            assert verdicts[-1]["verification"]["trajectory"]["ok"], verdicts[-1]
        # Step rewards see the writes to the added and the recreated table, as a fresh session's.
        assert verdicts[0]["reward"] == verdicts[1]["reward"] == 1.0
        assert verdicts[0]["step_rewards"] == verdicts[1]["step_rewards"]
        assert all(r > 0 for r in verdicts[0]["step_rewards"]), verdicts[0]["step_rewards"]
        handle = await manager._handle(migrated)
        assert manager.backend.rewind(handle, 0) == 2
        assert manager.backend.read(handle, dump) == states[0]
        assert manager.backend.read(handle, _log_of) == ([], {})
    finally:
        await manager.aclose()


async def test_a_migrations_own_writes_are_no_step_and_rewind_still_works(
    backend, tmp_path, request
):
    """retail's second migration adds `products.slug` and backfills it (an UPDATE of every
    product), on SQLite in a copy-and-move batch. A migration is no tool call: none of its
    writes is in the log (they would count as the next call's, and a rewind would undo them),
    the session logs the same row changes a fresh one does, and a rewind to step 0 gives the
    state the upgrade left."""
    from app.registry import load_environment
    from app.storage.migrations import branch_revisions
    from tests.support.rollouts import load_tasks

    retail = load_environment("retail")
    task = next(t for t in load_tasks(retail.tasks_path) if t["family"] == "cancel")
    calls = [
        (
            c["name"],
            c["arguments"] if isinstance(c["arguments"], dict) else json.loads(c["arguments"]),
        )
        for c in task["ground_truth"]
    ]
    previous = branch_revisions("retail")[2]  # before products.slug
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    settings = backend_settings(backend, tmp_path / "data", prefix)
    first = SessionManager(settings, retail)
    migrated, fresh = [(await first.seed(parse_seed_body(task))).session_id for _ in range(2)]
    await first.aclose()
    if backend == "postgres":
        from app.storage.postgres.migrate import migrate_schema, upgrade_sessions

        engine, names = first.backend.store.engine, first.backend.names
        migrate_schema(engine, names.session(migrated), "retail", previous, down=True)
        assert {o.status for o in upgrade_sessions(engine, names, "retail")} == {
            "upgraded",
            "current",
        }
    else:
        from app.storage.migrations import downgrade_file, upgrade_file

        path = first.backend.store.session_path(migrated)
        downgrade_file(path, "retail", previous)
        upgrade_file(path, "retail")

    manager = SessionManager(settings, retail)
    dump = _dump(retail)
    try:
        logs = []
        for session_id in (migrated, fresh):
            handle = await manager._handle(session_id)
            if session_id == migrated:
                upgraded = manager.backend.read(handle, dump)
            for name, args in calls:
                result, _ = manager._timed_call(handle, retail.tool_named(name), args)
                assert "output" in result, result
            logs.append(manager.backend.read(handle, _log_of))
        assert logs[0] == logs[1] and logs[0][1], logs
        handle = await manager._handle(migrated)
        assert manager.backend.rewind(handle, 0) == len(calls)
        assert manager.backend.read(handle, dump) == upgraded
    finally:
        await manager.aclose()


async def test_a_failing_upgrade_leaves_the_session_as_it_was(backend, depot, tmp_path, request):
    """All or nothing: when a migration step fails, no trigger, column record, log row or
    meta entry of the upgrade is left (one transaction with the migration)."""
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    settings = backend_settings(backend, tmp_path / "data", prefix)
    first = SessionManager(settings, depot)
    session_id = (await first.seed(parse_seed_body(TASK))).session_id
    await first.aclose()
    clash = "CREATE TABLE moves (id INTEGER PRIMARY KEY)"  # the revision's new table, taken
    if backend == "postgres":
        from app.storage.postgres.db import session_connection
        from app.storage.postgres.migrate import upgrade_sessions

        engine, names = first.backend.store.engine, first.backend.names
        schema = names.session(session_id)
        _pg_older_release(engine, schema)
        with session_connection(engine, schema) as conn, conn.begin():
            conn.exec_driver_sql(clash)
        before = _pg_catalog(engine, schema)
        (outcome,) = upgrade_sessions(engine, names, "depot")
        assert outcome.status == "failed" and "moves" in outcome.detail
        assert _pg_catalog(engine, schema) == before
    else:
        from app.storage.migrations import upgrade_file

        path = first.backend.store.session_path(session_id)
        _sqlite_older_release(path)
        conn = sqlite3.connect(path)
        conn.execute(clash)
        conn.commit()
        conn.close()

        def image() -> bytes:
            conn = sqlite3.connect(path)
            try:
                return b"".join(line.encode() for line in conn.iterdump())
            finally:
                conn.close()

        before = image()
        with pytest.raises(Exception, match="moves"):
            upgrade_file(path, "depot")
        assert image() == before


def test_sqlite_a_recreated_table_the_log_wrote_is_logged_again_if_its_rowid_is_its_key():
    """SQLite's log names rows by rowid. A table the log holds changes of that a copy-and-move
    recreated (its triggers gone) is logged again when its rowid is its INTEGER PRIMARY KEY,
    which the copy keeps; otherwise its rowids may have moved, so it stays unlogged and undo
    refused, as documented (docs/steps.md, "Limits"). A table the log never wrote is always
    logged afresh."""
    from app.storage.step_triggers import remake_step_triggers
    from app.storage.steplog import undo_supported

    models = MetaData()
    for name, key in (("a", Integer), ("b", String(8)), ("c", String(8))):
        Table(name, models, Column("k", key, primary_key=True), Column("v", Text))
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for name, key in (("a", "INTEGER"), ("b", "VARCHAR(8)"), ("c", "VARCHAR(8)")):
        conn.execute(f"CREATE TABLE {name} (k {key} NOT NULL, v TEXT, PRIMARY KEY (k))")
        conn.execute(f"INSERT INTO {name} VALUES (1, 'x'), (2, 'y')")
    install_step_log(conn, {t: ["k", "v"] for t in ("a", "b", "c")})
    conn.execute("UPDATE a SET v = 'z' WHERE k = 1")
    conn.execute("UPDATE b SET v = 'z' WHERE k = '1'")
    conn.execute("INSERT INTO _stategym_steps VALUES (1, 'write', '{}', 'ok', NULL, '', 0, 0)")
    conn.execute("BEGIN")
    for name in ("a", "b", "c"):  # what a copy-and-move batch does
        conn.execute(f"CREATE TABLE _tmp_{name} AS SELECT * FROM {name}")
        conn.execute(f"DROP TABLE {name}")
        key = "INTEGER" if name == "a" else "VARCHAR(8)"
        conn.execute(f"CREATE TABLE {name} (k {key} NOT NULL, v TEXT, PRIMARY KEY (k))")
        conn.execute(f"INSERT INTO {name} SELECT * FROM _tmp_{name}")
        conn.execute(f"DROP TABLE _tmp_{name}")
    assert _trigger_tables(conn) == set()
    remake_step_triggers(conn, models)
    conn.execute("COMMIT")
    assert _trigger_tables(conn) == {"a", "c"}
    assert undo_supported(conn, ["a", "c"]) and not undo_supported(conn, ["b"])
    conn.execute("UPDATE a SET v = 'w' WHERE k = 2")
    conn.execute("UPDATE c SET v = 'w' WHERE k = '2'")
    logged = conn.execute("SELECT step, tbl FROM _stategym_step_rows ORDER BY seq").fetchall()
    assert logged == [(1, "a"), (1, "b"), (2, "a"), (2, "c")]
    conn.close()


def _trigger_tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT tbl_name, count(*) FROM sqlite_master WHERE type = 'trigger' "
        "AND substr(name, 1, ?) = ? GROUP BY 1",
        (len(STEP_PREFIX), STEP_PREFIX),
    ).fetchall()
    assert all(n == 3 for _, n in rows), rows
    return {t for t, _ in rows}
