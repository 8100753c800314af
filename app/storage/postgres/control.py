"""The control table on PostgreSQL: app/storage/control.py's Table in its own schema.

The queries are ControlDB's own; only the engine differs, with
`schema_translate_map={None: <prefix>_control}`, so replicas share one session registry.
`open_pg_control` creates the schema, or brings an older one to head by the control branch's
Alembic revisions (in one transaction, under the schema's advisory lock), before use; the
constructor does no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Connection, Engine, cast, func, insert, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from app.clock import naive_utcnow
from app.errors import SessionUnavailable
from app.storage.control import ControlDB, control_metadata, sessions_table, task_rows_table
from app.storage.migrations import CONTROL, _script, branch_revisions, head_revision
from app.storage.postgres.db import ONE_STATEMENT, PLAIN, VERSION_TABLE, advisory_key, quoted


class PgControlDB(ControlDB):
    def __init__(self, engine: Engine, schema: str):
        # PLAIN: qualified names only; no session lock (it would serialise every control write
        # of every replica on one key) and a durable commit.
        mapped = engine.execution_options(schema_translate_map={None: schema}, **{PLAIN: True})
        super().__init__(mapped, mapped.execution_options(**{ONE_STATEMENT: True}))
        self.schema = schema

    def prepare(self) -> PgControlDB:
        """Create the schema and tables at head once, or upgrade an older schema to head;
        concurrent replicas wait on a lock. A revision this StateGym does not know (a newer
        release's) is refused."""
        with self.engine.begin() as conn:
            conn.execute(select(func.pg_advisory_xact_lock(advisory_key(self.schema))))
            exists = conn.execute(
                text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": self.schema}
            ).first()
            head = head_revision(CONTROL)
            if exists:
                revision = conn.exec_driver_sql(
                    f"SELECT version_num FROM {quoted(self.schema)}.{VERSION_TABLE}"
                ).scalar()
                if revision == head:
                    return self
                if revision not in branch_revisions(CONTROL):
                    raise SessionUnavailable(
                        f"control schema {self.schema} is at revision {revision!r}, which this "
                        f"StateGym does not know (its control head is {head!r})",
                        hint="Run the StateGym version that made it.",
                    )
                migrate_control_schema(conn, self.schema, "head")
                return self
            conn.exec_driver_sql(f"CREATE SCHEMA {quoted(self.schema)}")
            control_metadata.create_all(conn)
            conn.exec_driver_sql(
                f"CREATE TABLE {quoted(self.schema)}.{VERSION_TABLE} (version_num VARCHAR(32) "
                f"NOT NULL, CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"
            )
            if head is not None:
                conn.execute(
                    text(f"INSERT INTO {quoted(self.schema)}.{VERSION_TABLE} VALUES (:v)"),
                    {"v": head},
                )
        return self

    def close_orphans(self, env: str, session_schema_prefix: str, older_than: datetime) -> int:
        """Record as closed the live sessions of `env` created before `older_than` whose schema
        is gone (a server killed between a seed's, fork's or restore's control row and its
        schema, or between a recycle and its record); their count. One statement."""
        with self.engine.begin() as conn:
            # No schema and never archived (only closed sessions are): the database is gone,
            # so the record is one the bound on closed records may prune (`dropped_at`).
            result = conn.execute(
                text(
                    f"UPDATE {quoted(self.schema)}.sessions s SET status = 'closed', "
                    "closed_at = :now, dropped_at = :now WHERE s.env = :env "
                    "AND s.status <> 'closed' "
                    "AND s.created_at < :cutoff AND NOT EXISTS (SELECT 1 FROM pg_namespace "
                    "WHERE nspname = :prefix || s.id)"
                ),
                {
                    "now": naive_utcnow(),
                    "env": env,
                    "cutoff": older_than,
                    "prefix": session_schema_prefix,
                },
            )
        return int(result.rowcount or 0)

    def _insert_unclaimed(self, row: dict[str, Any], task_row: dict[str, Any] | None) -> None:
        """One statement, one round trip, either way: the task row (if absent) is written by a
        data-modifying WITH of the session row's INSERT, whose foreign key check sees it."""
        stmt = insert(sessions_table).values(**row)
        if task_row is not None:
            task = pg_insert(task_rows_table).values(**task_row).on_conflict_do_nothing()
            stmt = stmt.add_cte(task.cte("task_row"))
        with self._one_statement.begin() as conn:
            conn.execute(stmt)

    def verify_field(self, key: str) -> Any:
        """As ControlDB's; PostgreSQL casts the TEXT column to JSON first."""
        return cast(sessions_table.c.verify_json, JSON)[key].as_string()

    def dispose(self) -> None:
        pass  # the engine belongs to the backend (or CLI) that made it, which disposes of it


def migrate_control_schema(
    conn: Connection, schema: str, destination: str, *, down: bool = False
) -> None:
    """Move the control schema to `destination` (a control revision, or "head") by the control
    branch's revisions, inside the transaction `conn` holds (PostgreSQL DDL is transactional:
    a failure leaves the schema as it was). `conn` is the control store's (its statements name
    `schema`); the search path is pinned to it too, for the revisions' plain SQL."""
    script = _script()
    destination = destination if "@" in destination else f"{CONTROL}@{destination}"

    def steps(revision: Any, _context: Any) -> Any:
        if down:
            return script._downgrade_revs(destination, revision)
        return script._upgrade_revs(destination, revision)

    conn.exec_driver_sql(f"SET LOCAL search_path TO {quoted(schema)}")
    context = MigrationContext.configure(
        connection=conn,
        opts={
            "fn": steps,
            "script": script,
            "render_as_batch": True,  # batch ops run as plain ALTERs on PostgreSQL
            "transactional_ddl": True,
            "target_metadata": control_metadata,
            "version_table_schema": schema,
        },
    )
    with Operations.context(context), context.begin_transaction():
        context.run_migrations()


def open_pg_control(engine: Engine, schema: str) -> PgControlDB:
    """The control schema on `engine`, created at head or brought to head."""
    return PgControlDB(engine, schema).prepare()
