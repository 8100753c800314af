"""What PostgreSQL verify relies on stays all-or-nothing when the StateGym process is killed -9:
a tool call's rows and its step-log rows are one transaction (the log is written by row
triggers), and so is a recycle's undo (with a kept session's archive). A process killed inside
any of them leaves the session as it was, and the patched dump still equals the whole read."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.postgres.db import session_connection
from app.verify.state.dump import dump_state
from tests.conftest import PG_URL, REPO, backend_settings
from tests.storage.test_postgres import _calls
from tests.support.rollouts import load_tasks

# Runs `statements` in one transaction on the session schema, says so, then waits to be killed.
CHILD = textwrap.dedent(
    """
    import sys, time
    from app.registry import load_environment
    from app.storage.postgres.archive import SessionArchive
    from app.storage.postgres import db
    from app.storage.postgres.db import SchemaNames, make_engine, session_connection
    from app.storage.postgres.steplog import PgStepLog
    url, schema, mode, prefix, session_id, data_dir = sys.argv[1:7]
    metadata = load_environment("retail").metadata
    engine = make_engine(url, pool_size=1)
    if mode == "close":  # a kept session's whole close, every statement run, no COMMIT
        from pathlib import Path
        import app.storage.postgres.recycle as recycle
        from app.storage.postgres.store import PgStore
        from app.storage.sqlite.store import Store
        sent = []
        def results(conn, statements):
            found = db.results(conn, statements)
            sent.append(statements)
            if len(sent) == 2:  # the archive, undo, revert and rename script ran
                print("ready", flush=True)
                time.sleep(60)
            return found
        recycle.results = results
        store = PgStore(Store(Path(data_dir), load_environment("retail")), engine,
                        SchemaNames(prefix), schema_pool=1, archive_closed=True)
        store.pool.take(store.ensure_base()[0])  # the pool knows the base: it has room
        store.archive_session(session_id)
        raise SystemExit("the close returned before its script was sent")
    with session_connection(engine, schema) as conn:
        conn.begin()
        if mode == "write":  # a tool call's writes, its step row, not committed
            conn.exec_driver_sql("UPDATE customers SET email = 'killed@x' WHERE id = 1")
            conn.exec_driver_sql("DELETE FROM order_items WHERE id = 1")
            conn.exec_driver_sql(
                "INSERT INTO _stategym_steps VALUES "
                "((SELECT coalesce(max(idx), 0) + 1 FROM _stategym_steps), "
                "'t', '{}', 'ok', NULL, 'd', 0, 1.0)"
            )
        else:  # a recycle (or an archive and its reset) half done, not committed
            if mode == "archive":
                db.results(conn, SessionArchive(engine, SchemaNames(prefix)).put_sql(
                    conn, session_id=session_id, env="retail", schema=schema, template=schema,
                    metadata=metadata,
                ))
            PgStepLog(conn, schema, metadata).undo_to(0)
        print("ready", flush=True)
        time.sleep(60)
    """
)


def _state(manager: SessionManager, session_id: str) -> tuple[object, object, int]:
    schema = manager.backend.names.session(session_id)
    env = manager.env
    with session_connection(manager.backend.engine, schema) as conn, conn.begin():
        patched = dump_state(conn, env.metadata.tables, env.compare)
        whole = dump_state(conn, env.metadata.tables, env.compare, reuse=False)
        logged = conn.exec_driver_sql("SELECT count(*) FROM _stategym_step_rows").scalar()
    assert patched == whole
    return patched, whole, int(logged or 0)


def _killed_inside(schema: str, mode: str, prefix: str, session_id: str, data: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, PG_URL, schema, mode, prefix, session_id, data],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"
    finally:
        child.kill()  # SIGKILL: no rollback, no goodbye; the server aborts its transaction
        child.wait()


@pytest.mark.slow  # kill -9 of child processes; `make test-slow` runs it (CI too)
async def test_a_killed_call_or_recycle_leaves_the_session_and_its_log_as_they_were(
    tmp_path, pg_prefix
):
    env = load_environment("retail")
    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), env)
    task = load_tasks(load_environment("retail").tasks_path)[5]
    try:
        session_id = (await manager.seed(parse_seed_body(task))).session_id
        for call in _calls(task):
            await manager.call_tool(session_id, env.tool_named(call["name"]), call["arguments"])
        schema = manager.backend.names.session(session_id)
        with session_connection(manager.backend.engine, schema) as conn, conn.begin():
            conn.exec_driver_sql("UPDATE orders SET status = 'cancelled' WHERE id = 2")
        before = _state(manager, session_id)
        assert before[2] > 0, "the writes were logged"
        archive = manager.backend.store.archive
        for mode in ("write", "undo", "archive", "close"):
            _killed_inside(schema, mode, pg_prefix, session_id, str(tmp_path))
            assert _state(manager, session_id) == before, mode
            with manager.backend.engine.connect() as conn:
                assert not archive.holds(conn, session_id), mode
        # And the session goes on: its lock was released with the killed transaction.
        tool = env.tool_named(_calls(task)[0]["name"])
        assert "output" in await manager.call_tool(session_id, tool, _calls(task)[0]["arguments"])
    finally:
        await manager.aclose()
