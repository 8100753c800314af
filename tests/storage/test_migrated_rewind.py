"""Rewinds and forks of a retained session across a migration, on both backends.

The `depot` test environment (tests/support/depot_env.py) is migrated for real (Alembic on the
session's SQLite file or PostgreSQL schema, upgraded when the server opens it). What is checked:

- its log's row images of the steps before a migration were taken from the schema and the data
  as they were then: a rewind (or a fork as of a step) back past the migration would write
  them over what the migration made (a backfill, a recreated or dropped table). It is refused
  with CannotRewind saying the session was migrated after that step, nothing changed; a rewind
  or a fork to the migration's step or later works. The step is in the session's meta
  (`migrated_at_step`), the same on both backends.
- a table a migration dropped that earlier steps changed: refused as clearly on SQLite as on
  PostgreSQL, even for a session migrated before that step was recorded.
- foreign keys a migration created are DEFERRABLE on PostgreSQL as a fresh clone's, so an undo
  that puts a child row back before its parent works; SQLite enforces the migration's foreign
  keys too and defers them during an undo.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import pytest

from app.errors import CannotRewind
from app.runtime.branching import Branching
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.steplog import write_step
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.storage.test_migrated_step_log import (
    TASK,
    _dump,
    _log_of,
    _pg_older_release,
    _sqlite_older_release,
)

PREVIOUS = "d0a2c0ffee02"  # the depot head's parent: its SKUs keep their case
LOWER = {  # a SKU the head's migration (d0a3c0ffee03) upper-cases
    **TASK,
    "task_id": "depot-lower-case-sku",
    "seed": {"rows": {"items": [{"id": 101, "sku": "sku-0101", "quantity": 9}]}},
}
MIGRATED_AT = "migrated_at_step"


def _move(sku: str, delta: int) -> tuple[str, dict[str, Any]]:
    return "move_stock", {"sku": sku, "delta": delta, "reason": "sold"}


def _item(state: Any) -> tuple[str, int] | None:
    """Item 101's SKU and quantity in a state (None: gone)."""
    found = [(r.sku, r.quantity) for r in state["items"] if r.id == 101]
    return found[0] if found else None


def _step(tool: str) -> dict[str, Any]:
    """A step row as the runner writes it (app/runtime/steps.py)."""
    return {
        "tool": tool,
        "args": "{}",
        "outcome": "ok",
        "output": '{"output": "done"}',
        "output_digest": "",
        "output_bytes": 18,
        "duration_ms": 1.0,
    }


class Depot:
    """Sessions of the depot environment on one backend, and what a test does to them
    outside the server: migrations, a release's own writes, SQL in one transaction."""

    def __init__(self, backend: str, env: Any, tmp_path: Any, request: Any):
        self.backend_name, self.env = backend, env
        prefix = None
        if backend == "postgres":
            prefix = new_pg_prefix()
            request.addfinalizer(lambda: drop_pg_schemas(prefix))
        self.settings = backend_settings(backend, tmp_path / "data", prefix)
        self.manager: SessionManager | None = None
        self.backend: Any = None  # the last manager's

    async def seed(self, task: dict[str, Any], calls: Sequence[tuple[str, dict]] = ()) -> str:
        """A retained session of `task`, its `calls` run, its server gone."""
        first = SessionManager(self.settings, self.env)
        try:
            session_id = (await first.seed(parse_seed_body(task))).session_id
            await self._run(first, session_id, calls)
        finally:
            await first.aclose()
        self.backend = first.backend
        return session_id

    async def serve(self) -> SessionManager:
        """A server on the sessions (it upgrades a session to the head when it opens it)."""
        self.manager = SessionManager(self.settings, self.env)
        self.backend = self.manager.backend
        return self.manager

    async def call(self, session_id: str, calls: Sequence[tuple[str, dict]]) -> None:
        assert self.manager is not None
        await self._run(self.manager, session_id, calls)

    async def _run(self, manager: SessionManager, session_id: str, calls: Any) -> None:
        handle = await manager._handle(session_id)
        for name, args in calls:
            result, _ = manager._timed_call(handle, self.env.tool_named(name), args)
            assert "output" in result, result

    async def read(self, session_id: str, reader: Any) -> Any:
        assert self.manager is not None
        return self.manager.backend.read(await self.manager._handle(session_id), reader)

    async def state(self, session_id: str) -> Any:
        return await self.read(session_id, _dump(self.env))

    async def log(self, session_id: str) -> Any:
        return await self.read(session_id, _log_of)

    # --- outside the server ----------------------------------------------------------------
    def _pg(self, session_id: str) -> tuple[Any, str]:
        return self.backend.store.engine, self.backend.names.session(session_id)

    def _path(self, session_id: str) -> Any:
        return self.backend.store.session_path(session_id)

    def downgrade(self, session_id: str, revision: str) -> None:
        if self.backend_name == "postgres":
            from app.storage.postgres.migrate import migrate_schema

            engine, schema = self._pg(session_id)
            migrate_schema(engine, schema, "depot", revision, down=True)
        else:
            from app.storage.migrations import downgrade_file

            downgrade_file(self._path(session_id), "depot", revision)

    def older_release(self, session_id: str) -> None:
        """At the first revision, as a release of those models left it (step log included)."""
        if self.backend_name == "postgres":
            _pg_older_release(*self._pg(session_id))
        else:
            _sqlite_older_release(self._path(session_id))

    async def sql_step(self, session_id: str, tool: str, statements: list[str]) -> None:
        """One step written as a tool call does (its SQL and its step row, one transaction),
        on the session's own connection when a server has it open. SQLite: foreign keys
        deferred to the commit, as agent SQL may (`PRAGMA defer_foreign_keys`)."""
        if self.backend_name == "postgres":
            from app.storage.postgres.db import session_connection

            with session_connection(*self._pg(session_id)) as conn, conn.begin():
                for statement in statements:
                    conn.exec_driver_sql(statement)
                write_step(conn, _step(tool))
            return
        own = self.manager is None
        conn = await self._sqlite(session_id)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("PRAGMA defer_foreign_keys=ON")
            for statement in statements:
                conn.execute(statement)
            write_step(conn, _step(tool))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            if own:
                conn.close()

    async def _sqlite(self, session_id: str) -> sqlite3.Connection:
        """The open session's connection, or (no server) one of the test's own."""
        if self.manager is None:
            return sqlite3.connect(self._path(session_id), isolation_level=None)
        from app.storage.sqlite.backend import OpenSession

        handle = await self.manager._handle(session_id)
        assert isinstance(handle, OpenSession)
        return handle.conn

    async def close(self) -> None:
        if self.manager is not None:
            await self.manager.aclose()

    def meta(self, session_id: str) -> dict[str, str]:
        if self.backend_name == "postgres":
            return self.backend.store.read_meta(session_id)
        conn = sqlite3.connect(self._path(session_id))
        try:
            return dict(conn.execute("SELECT key, value FROM _stategym_meta").fetchall())
        finally:
            conn.close()

    async def forget_migration_step(self, session_id: str) -> None:
        """The session as a release that did not record the migration's step left it."""
        statement = f"DELETE FROM _stategym_meta WHERE key = '{MIGRATED_AT}'"
        if self.backend_name == "postgres":
            from app.storage.postgres.db import session_connection

            with session_connection(*self._pg(session_id)) as conn, conn.begin():
                conn.exec_driver_sql(statement)
        else:
            (await self._sqlite(session_id)).execute(statement)


@pytest.fixture
async def depot_sessions(backend, depot, tmp_path, request) -> Any:
    made = Depot(backend, depot, tmp_path, request)
    yield made
    await made.close()


async def test_a_rewind_or_fork_to_a_step_before_the_last_migration_is_refused(depot_sessions):
    """Step 1 ran before the head's migration upper-cased the SKU it moved stock of; its log
    holds that row with the lower-case SKU. Taking the session back before step 1 would write
    the lower-case SKU over the migration's: refused, the session unchanged. Back to step 1 (the
    state the migration left, plus nothing) works, and so does a fork as of step 1."""
    d = depot_sessions
    session_id = await d.seed(LOWER, [_move("sku-0101", -3)])
    d.downgrade(session_id, PREVIOUS)  # as the release before the head's left it
    manager = await d.serve()
    migrated = await d.state(session_id)  # opened: upgraded to the head
    assert _item(migrated) == ("SKU-0101", 6)
    assert d.meta(session_id)[MIGRATED_AT] == "1"
    await d.call(session_id, [_move("SKU-0101", -2)])
    state, log = await d.state(session_id), await d.log(session_id)
    branching = Branching(manager, sign=lambda data: "x")

    with pytest.raises(CannotRewind, match=r"migrated after step 1\b") as refused:
        await branching.rewind(session_id, 0)
    assert refused.value.status_code == 409
    with pytest.raises(CannotRewind, match=r"migrated after step 1\b"):
        await branching.fork(session_id, 1, at_step=0)
    assert await d.state(session_id) == state and await d.log(session_id) == log

    step, (child,) = await branching.fork(session_id, 1, at_step=1)
    assert step == 1
    assert await d.state(child.session_id) == migrated
    assert (await d.log(child.session_id))[0] == ["move_stock"]
    with pytest.raises(CannotRewind, match="migrated"):  # the child carries the mark
        await branching.rewind(child.session_id, 0)

    assert (await branching.rewind(session_id, 1))["undone"] == 1
    assert await d.state(session_id) == migrated
    assert (await d.log(session_id))[0] == ["move_stock"]
    await d.call(session_id, [_move("SKU-0101", -1)])  # the log goes on from there
    assert (await branching.rewind(session_id, 1))["undone"] == 1
    assert await d.state(session_id) == migrated


async def test_a_rewind_past_changes_to_a_table_a_migration_dropped_is_refused(depot_sessions):
    """A release of the first revision wrote `notes` (step 1); the next revision dropped it.
    A rewind to step 0 must not half-apply: refused with a message that says why, the
    session unchanged, on both backends, also when the migration's step was never recorded
    (a session migrated by an earlier release: the dropped table is named)."""
    d = depot_sessions
    session_id = await d.seed(TASK)
    d.older_release(session_id)
    await d.sql_step(
        session_id,
        "write_note",
        [
            "INSERT INTO notes (id, body) VALUES (1, 'count the bins')",
            "UPDATE items SET quantity = quantity + 1 WHERE id = 101",
        ],
    )
    manager = await d.serve()
    assert (await d.log(session_id)) == (["write_note"], {1: {"items": 1, "notes": 1}})
    await d.call(session_id, [_move("SKU-0101", -3)])
    state, log = await d.state(session_id), await d.log(session_id)
    branching = Branching(manager, sign=lambda data: "x")

    with pytest.raises(CannotRewind, match=r"migrated after step 1\b"):
        await branching.rewind(session_id, 0)
    with pytest.raises(CannotRewind, match=r"migrated after step 1\b"):
        await branching.fork(session_id, 2, at_step=0)
    assert await d.state(session_id) == state and await d.log(session_id) == log

    await d.forget_migration_step(session_id)
    with pytest.raises(CannotRewind, match=r"\bnotes\b.*(dropped|no longer)"):
        await branching.rewind(session_id, 0)
    with pytest.raises(CannotRewind, match=r"\bnotes\b.*(dropped|no longer)"):
        await branching.fork(session_id, 1, at_step=0)
    assert await d.state(session_id) == state and await d.log(session_id) == log

    assert (await branching.rewind(session_id, 1))["undone"] == 1
    after = await d.state(session_id)
    assert _item(after) == ("SKU-0101", 10)
    assert after["moves"] == []


async def test_foreign_keys_a_migration_created_let_an_undo_put_a_child_back_first(
    depot_sessions,
):
    """`moves.item_id -> items.id` is created by the migration. Step 2 deletes an item and its
    moves in that order in one transaction (one statement on PostgreSQL, a writable CTE; SQLite
    with its foreign keys deferred), so its undo puts the move back before the item. On
    PostgreSQL that needs the key DEFERRABLE (the undo defers every key), as a fresh clone
    has it; SQLite defers the keys for an undo (`PRAGMA defer_foreign_keys`), and does enforce
    the migration's key."""
    d = depot_sessions
    migrated, fresh = await d.seed(TASK), await d.seed(TASK)
    d.older_release(migrated)
    manager = await d.serve()
    await d.call(migrated, [_move("SKU-0101", -3)])
    assert MIGRATED_AT not in d.meta(migrated)  # migrated before its first step: nothing to keep
    await d.call(fresh, [])
    if d.backend_name == "postgres":
        from app.storage.postgres.db import quoted

        def keys(session_id: str) -> Any:
            engine, schema = d._pg(session_id)
            with engine.connect() as conn:
                return conn.exec_driver_sql(
                    "SELECT conrelid::regclass::text, conname, condeferrable, condeferred "
                    "FROM pg_constraint WHERE contype = 'f' AND connamespace = "
                    "to_regnamespace(%(s)s) ORDER BY 1, 2",
                    {"s": quoted(schema)},
                ).all()

        found = keys(migrated)
        assert [(k[1], k[2], k[3]) for k in found] == [("fk_moves_item_id_items", True, False)]
        assert [k[1:] for k in found] == [k[1:] for k in keys(fresh)]
        delete = [
            "WITH gone AS (DELETE FROM items WHERE id = 101 RETURNING id) "
            "DELETE FROM moves WHERE item_id IN (SELECT id FROM gone)"
        ]
    else:
        conn = await d._sqlite(migrated)
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA foreign_key_list(moves)").fetchall()
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            conn.execute("DELETE FROM items WHERE id = 101")  # the key is enforced
        delete = ["DELETE FROM items WHERE id = 101", "DELETE FROM moves WHERE item_id = 101"]
    after_one = await d.state(migrated)
    await d.sql_step(migrated, "retire_item", delete)

    def order(conn: Any) -> Any:  # step 2's changes, in the order they were logged
        with conn.begin():
            from app.storage.steplog import step_log

            log = step_log(conn)
            assert log is not None
            return [(i.table, i.op) for i in log.row_images() if i.step == 2]

    assert await d.read(migrated, order) == [("items", "d"), ("moves", "d")]
    assert await d.state(migrated) != after_one
    branching = Branching(manager, sign=lambda data: "x")
    assert (await branching.rewind(migrated, 1))["undone"] == 1
    assert await d.state(migrated) == after_one
    assert (await branching.rewind(migrated, 0))["undone"] == 1
    assert _item(await d.state(migrated)) == ("SKU-0101", 9)
