"""PostgreSQL verify dumps a session by patching its template's dump with the rows its step log
names (app/storage/postgres/changes.py); that must equal reading every table whole.

Per environment: a task is seeded on PostgreSQL, its gold replayed through the tool path, then
random raw SQL writes (what a policy's tool could do: updates, deletes, inserted copies, updates
of referenced keys, bulk updates; many refused by constraints) each in its own transaction; after
every few the patched dump must equal the whole read, and diffs of it must equal the whole
tables' diffs.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.postgres.db import quoted, session_connection
from app.storage.tracking import tracked_changes
from app.verify.state import dump as state_module
from app.verify.state import patching
from app.verify.state.diff import _Delta, diff_states
from app.verify.state.dump import dump_state
from tests.conftest import PORTABLE_ENVS, backend_settings
from tests.storage.test_postgres import _calls
from tests.support.rollouts import load_tasks


def _dump(manager: SessionManager, session_id: str, *, reuse: bool) -> Any:
    schema = manager.backend.names.session(session_id)
    with session_connection(manager.backend.engine, schema) as conn, conn.begin():
        return dump_state(conn, manager.env.metadata.tables, manager.env.compare, reuse=reuse)


def _changes(manager: SessionManager, session_id: str) -> Any:
    schema = manager.backend.names.session(session_id)
    with session_connection(manager.backend.engine, schema) as conn, conn.begin():
        return tracked_changes(conn, manager.env.metadata.tables)


def _random_write(manager: SessionManager, session_id: str, rng: random.Random, step: int) -> str:
    """One raw write in its own transaction; returns what it tried."""
    env = manager.env
    table = rng.choice(env.metadata.sorted_tables)
    name = quoted(table.name)
    pk = [c.name for c in table.primary_key.columns]
    key = quoted(pk[0])
    texts = [
        c.name
        for c in table.columns
        if c.name not in pk and _python_type(c) is str and not c.foreign_keys
    ]
    kind = rng.choice(["update", "update", "delete", "copy", "rekey", "bulk"])
    schema = manager.backend.names.session(session_id)
    with session_connection(manager.backend.engine, schema) as conn, conn.begin():
        ids = [r[0] for r in conn.exec_driver_sql(f"SELECT {key} FROM {name} ORDER BY 1")]
        if not ids:
            return "empty"
        row_id = rng.choice(ids)
        conn.exec_driver_sql("SAVEPOINT w")
        try:
            if kind == "update" and texts:
                column = quoted(rng.choice(texts))
                conn.exec_driver_sql(
                    f"UPDATE {name} SET {column} = left(%(v)s || {column}, 20) "
                    f"WHERE {key} = %(id)s",
                    {"v": f"w{step}", "id": row_id},
                )
            elif kind == "delete":
                conn.exec_driver_sql(f"DELETE FROM {name} WHERE {key} = %(id)s", {"id": row_id})
            elif kind == "copy":
                cols = ", ".join(quoted(c.name) for c in table.columns if c.name not in pk)
                conn.exec_driver_sql(
                    f"INSERT INTO {name} ({cols}) SELECT {cols} FROM {name} WHERE {key} = %(id)s",
                    {"id": row_id},
                )
            elif kind == "rekey":  # a referenced key moves (refused while referenced)
                conn.exec_driver_sql(
                    f"UPDATE {name} SET {key} = {key} + 1000000 WHERE {key} = %(id)s",
                    {"id": row_id},
                )
            elif kind == "bulk" and texts:  # a share of the table: read whole past 25 %
                column = quoted(rng.choice(texts))
                conn.exec_driver_sql(
                    f"UPDATE {name} SET {column} = upper({column}) WHERE {key} %% 3 = 0"
                )
            conn.exec_driver_sql("RELEASE SAVEPOINT w")
        except DBAPIError:  # refused by a constraint: nothing changed
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT w")
            return f"{kind} refused"
    return kind


def _python_type(column: Any) -> Any:
    try:
        return column.type.python_type
    except NotImplementedError:
        return None


@pytest.mark.parametrize("env_name", PORTABLE_ENVS)
async def test_pg_patched_dumps_equal_whole_dumps(env_name, tmp_path, pg_prefix, monkeypatch):
    monkeypatch.setattr(patching, "_pristine", patching.LRU(256))  # as in a fresh process
    env = load_environment(env_name)
    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), env)
    rng = random.Random(f"pg-{env_name}")
    task = rng.choice(load_tasks(load_environment(env_name).tasks_path))
    try:
        request = parse_seed_body(task)
        session_id = (await manager.seed(request)).session_id
        gold = manager.gold.get(request.task)
        pristine = _changes(manager, session_id)
        assert pristine is not None and not pristine.tables, "a fresh clone tracks no change"
        assert _dump(manager, session_id, reuse=True) == gold.seed_state
        for call in _calls(task):
            out = await manager.call_tool(
                session_id, env.tool_named(call["name"]), call["arguments"]
            )
            assert "output" in out, out
        whole_reads: list[int] = []
        real = state_module._dump_all
        monkeypatch.setattr(
            state_module, "_dump_all", lambda *a, **k: whole_reads.append(1) or real(*a, **k)
        )
        patched = _dump(manager, session_id, reuse=True)
        assert not whole_reads, "the gold's changes were patched in, not read whole"
        assert patched == _dump(manager, session_id, reuse=False) == gold.state
        whole_reads.clear()
        tried = []
        for step in range(60):
            tried.append(_random_write(manager, session_id, rng, step))
            if step % 10 != 9:
                continue
            patched = _dump(manager, session_id, reuse=True)
            assert not whole_reads, "no write escaped the log (the backstop never fired)"
            whole = _dump(manager, session_id, reuse=False)
            whole_reads.clear()
            assert patched == whole, (task["task_id"], step, tried[-10:])
            assert diff_states(gold.seed_state, patched, env.compare) == diff_states(
                gold.seed_state, whole, env.compare
            )
            assert diff_states(gold.state, patched, env.compare) == diff_states(
                gold.state, whole, env.compare
            )
        changes = _changes(manager, session_id)
        assert changes is not None and changes.rows, "the writes were recorded row by row"
        assert any(t.origin is not None for t in patched.values()), "patches were made"
        # The template's tables are the SQLite seed state's own (equal rows): diffs against the
        # seed and gold states compare the patches only.
        for name, table in patched.items():
            if table.origin is not None:
                assert _Delta.of(gold.seed_state[name], table) is not None, name
    finally:
        await manager.aclose()


async def test_pg_backstop_reads_whole_when_the_log_misses_a_write(tmp_path, pg_prefix, caplog):
    """TRUNCATE fires no row trigger: the row counts disagree and verify reads every table."""
    env = load_environment("retail")
    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), env)
    task = load_tasks(load_environment("retail").tasks_path)[0]
    try:
        session_id = (await manager.seed(parse_seed_body(task))).session_id
        _dump(manager, session_id, reuse=True)  # the template's dump, kept
        schema = manager.backend.names.session(session_id)
        with session_connection(manager.backend.engine, schema) as conn, conn.begin():
            conn.exec_driver_sql("TRUNCATE return_items")
        patched = _dump(manager, session_id, reuse=True)
        assert patched == _dump(manager, session_id, reuse=False)
        assert patched["return_items"].rows == ()
        assert "change tracking missed writes" in caplog.text
    finally:
        await manager.aclose()


async def test_pg_untrusted_logs_are_not_used(tmp_path, pg_prefix):
    """A disabled log trigger or a session of other models is dumped whole (no tracking)."""
    env = load_environment("retail")
    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), env)
    task = load_tasks(load_environment("retail").tasks_path)[0]
    try:
        first = (await manager.seed(parse_seed_body(task))).session_id
        second = (await manager.seed(parse_seed_body(task))).session_id
        assert _changes(manager, first) is not None
        with (
            session_connection(
                manager.backend.engine, manager.backend.names.session(first)
            ) as conn,
            conn.begin(),
        ):
            conn.exec_driver_sql(
                'ALTER TABLE order_items DISABLE TRIGGER "_stategym_step_order_items"'
            )
            conn.exec_driver_sql(
                "DELETE FROM order_items WHERE id = (SELECT min(id) FROM order_items)"
            )
        assert _changes(manager, first) is None
        assert _dump(manager, first, reuse=True) == _dump(manager, first, reuse=False)
        with (
            session_connection(
                manager.backend.engine, manager.backend.names.session(second)
            ) as conn,
            conn.begin(),
        ):
            conn.exec_driver_sql("UPDATE _stategym_meta SET value = 'old' WHERE key = 'template'")
        assert _changes(manager, second) is None
    finally:
        await manager.aclose()
