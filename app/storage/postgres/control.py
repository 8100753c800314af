"""The control table on PostgreSQL: app/storage/control.py's Table in its own schema.

The queries are ControlDB's own; only the engine differs, with
`schema_translate_map={None: <prefix>_control}`, so replicas share one session registry.
`open_pg_control` creates the schema (or brings an older one to head) before use; the
constructor does no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Engine, cast, func, select, text

from app.clock import naive_utcnow
from app.storage.control import ControlDB, control_metadata, sessions_table
from app.storage.migrations import CONTROL, head_revision
from app.storage.postgres.db import ONE_STATEMENT, PLAIN, VERSION_TABLE, advisory_key, quoted


class PgControlDB(ControlDB):
    def __init__(self, engine: Engine, schema: str):
        # PLAIN: qualified names only; no session lock (it would serialise every control write
        # of every replica on one key) and a durable commit.
        mapped = engine.execution_options(schema_translate_map={None: schema}, **{PLAIN: True})
        super().__init__(mapped, mapped.execution_options(**{ONE_STATEMENT: True}))
        self.schema = schema

    def prepare(self) -> PgControlDB:
        """Create the schema and table at head once; concurrent replicas wait on a lock."""
        with self.engine.begin() as conn:
            conn.execute(select(func.pg_advisory_xact_lock(advisory_key(self.schema))))
            exists = conn.execute(
                text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": self.schema}
            ).first()
            head = head_revision(CONTROL)
            if exists:
                # Control revisions so far only add tables and indexes: create what an older
                # schema lacks (create_all checks tables first; indexes of a table that
                # exists are added by name) and record the head.
                control_metadata.create_all(conn)
                for index in sessions_table.indexes:
                    columns = ", ".join(quoted(c.name) for c in index.columns)
                    conn.exec_driver_sql(
                        f"CREATE INDEX IF NOT EXISTS {quoted(str(index.name))} "
                        f"ON {quoted(self.schema)}.sessions ({columns})"
                    )
                if head is not None:
                    conn.execute(
                        text(f"UPDATE {quoted(self.schema)}.{VERSION_TABLE} SET version_num = :v"),
                        {"v": head},
                    )
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
            result = conn.execute(
                text(
                    f"UPDATE {quoted(self.schema)}.sessions s SET status = 'closed', "
                    "closed_at = :now WHERE s.env = :env AND s.status <> 'closed' "
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

    def verify_field(self, key: str) -> Any:
        """As ControlDB's; PostgreSQL casts the TEXT column to JSON first."""
        return cast(sessions_table.c.verify_json, JSON)[key].as_string()

    def dispose(self) -> None:
        pass  # the engine belongs to the backend (or CLI) that made it, which disposes of it


def open_pg_control(engine: Engine, schema: str) -> PgControlDB:
    """The control schema on `engine`, created at head or brought to head."""
    return PgControlDB(engine, schema).prepare()
