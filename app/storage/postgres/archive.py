"""Closed sessions kept as their step log, their schemas reused (PostgreSQL, keeping retention).

Invariant: a kept session is always either a schema or an archive, never neither (one
transaction); reading an archive rebuilds it in a transaction that is rolled back, so it reads
exactly as its schema did. Details and costs: docs/storage.md#archived-sessions-postgresql.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import sql as pgsql
from sqlalchemy import Connection, Engine, MetaData
from sqlalchemy.exc import DBAPIError

from app.storage.base import NotOnDisk
from app.storage.postgres.db import (
    META_TABLE,
    SEED_TABLE,
    STEP_LOG_TABLES,
    VERSION_TABLE,
    SchemaNames,
    advisory_key,
    checked_schema,
    clone_sql,
    ensure_step_function,
    has_table,
    quoted,
    serial_columns,
)
from app.storage.postgres.seed_rows import rows_script, silent
from app.storage.postgres.steplog import PgStepLog
from app.storage.steplog import STEP_ROWS_TABLE, UndoUnavailable

ARCHIVE_FORMAT = "stategym-pg-archive/1"
ARCHIVE_TABLE = "archived_sessions"
# What an archive keeps of the schema, besides the sequences: the framework's tables (the seed
# rows: the rows its task's seed wrote over the base, which an archive of an older release lacks).
_KEPT_TABLES = (META_TABLE, VERSION_TABLE, *STEP_LOG_TABLES, SEED_TABLE)


def _sequenced(metadata: MetaData) -> list[tuple[str, str]]:
    """(table, column) of every sequence a session schema has: SERIAL keys and the log's own."""
    return [(t.name, c) for t, c in serial_columns(metadata)] + [(STEP_ROWS_TABLE, "seq")]


class ArchiveUnreadable(NotOnDisk):
    """The archive cannot be rebuilt (its template is gone, or it does not add up)."""


class SessionArchive:
    """The archive table of one schema prefix."""

    def __init__(self, engine: Engine, names: SchemaNames):
        self.engine = engine
        self.prefix = names.prefix
        self.schema = checked_schema(f"{names.prefix}_archive")
        self.table = f"{quoted(self.schema)}.{ARCHIVE_TABLE}"
        self._sequences: dict[tuple[str, str], str] = {}  # (table, column) -> sequence name
        self._exists = False

    # --- the table ---------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the archive schema and table (once per database; replicas serialised)."""
        with self.engine.begin() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({advisory_key(self.schema)})")
            conn.exec_driver_sql(
                f"CREATE SCHEMA IF NOT EXISTS {quoted(self.schema)};\n"
                f"CREATE TABLE IF NOT EXISTS {self.table} (session_id TEXT PRIMARY KEY, "
                "env TEXT NOT NULL, template TEXT NOT NULL, "
                "archived_at TIMESTAMPTZ NOT NULL DEFAULT now(), image TEXT NOT NULL)"
            )
        self._exists = True

    def exists(self, conn: Connection) -> bool:
        """Whether the table is there (inspection never creates it)."""
        if not self._exists:
            found = conn.exec_driver_sql(
                "SELECT to_regclass(%(t)s) IS NOT NULL", {"t": self.table}
            ).scalar()
            self._exists = bool(found)
        return self._exists

    def holds(self, conn: Connection, session_id: str) -> bool:
        if not self.exists(conn):
            return False
        row = conn.exec_driver_sql(
            f"SELECT 1 FROM {self.table} WHERE session_id = %(id)s", {"id": session_id}
        ).first()
        return row is not None

    def templates(self, conn: Connection) -> set[str]:
        """Every template schema an archive needs."""
        if not self.exists(conn):
            return set()
        return {
            row[0] for row in conn.exec_driver_sql(f"SELECT DISTINCT template FROM {self.table}")
        }

    def meta(self, conn: Connection, session_id: str) -> dict[str, str] | None:
        """The archived session's meta rows, None when it is not archived."""
        if not self.exists(conn):
            return None
        row = conn.exec_driver_sql(
            f"SELECT image FROM {self.table} WHERE session_id = %(id)s", {"id": session_id}
        ).first()
        if row is None:
            return None
        return {r["key"]: r["value"] for r in json.loads(row[0])["tables"][META_TABLE]}

    def delete(self, conn: Connection, session_id: str) -> None:
        if self.exists(conn):
            conn.exec_driver_sql(
                f"DELETE FROM {self.table} WHERE session_id = %(id)s", {"id": session_id}
            )

    # --- archiving (in the closing transaction) ------------------------------------------------
    def put_sql(
        self,
        conn: Connection,
        *,
        session_id: str,
        env: str,
        schema: str,
        template: str,
        metadata: MetaData,
    ) -> list[str]:
        """The statement archiving session schema `schema` as it is when it runs (in `conn`'s
        transaction, after whatever the caller sends before it in the same script): the image
        is read and inserted by the database in one statement, never sent back and forth."""
        s = quoted(checked_schema(schema))
        kept = ", ".join(
            f"'{name}', (SELECT coalesce(json_agg(t), '[]') FROM {s}.{quoted(name)} t)"
            for name in _KEPT_TABLES
        )
        sequences = ", ".join(
            f"'{table}', (SELECT json_build_array(last_value, is_called) FROM {s}.{quoted(seq)})"
            for table, seq in self._sequence_names(conn, schema, metadata).items()
        )
        raw = conn.connection.driver_connection
        id_, env_, template_ = (
            pgsql.Literal(v).as_string(raw) for v in (session_id, env, checked_schema(template))
        )
        return [
            f"INSERT INTO {self.table} (session_id, env, template, image) "
            f"SELECT {id_}, {env_}, {template_}, json_build_object('format', '{ARCHIVE_FORMAT}', "
            f"'tables', json_build_object({kept}), "
            f"'sequences', json_build_object({sequences}))::text "
            "ON CONFLICT (session_id) DO "
            "UPDATE SET env = excluded.env, template = excluded.template, image = excluded.image, "
            "archived_at = now()"
        ]

    def _sequence_names(self, conn: Connection, schema: str, metadata: MetaData) -> dict[str, str]:
        """table -> the bare name of its sequence (the same in every schema of these models:
        looked up once), the step log's own included."""
        out = {}
        for table, column in _sequenced(metadata):
            key = (table, column)
            if key not in self._sequences:
                name = conn.exec_driver_sql(
                    "SELECT relname FROM pg_class WHERE oid = "
                    "pg_get_serial_sequence(%(t)s, %(c)s)::regclass",
                    {"t": f"{quoted(schema)}.{quoted(table)}", "c": column},
                ).scalar()
                if name is None:
                    continue
                quoted(name)  # a plain identifier, as the models' names are
                self._sequences[key] = str(name)
            out[table] = self._sequences[key]
        return out

    # --- reading back ------------------------------------------------------------------------
    def rebuild(self, conn: Connection, session_id: str, target: str, metadata: MetaData) -> bool:
        """Rebuild the archived session as schema `target` in `conn`'s transaction (the caller
        rolls it back); False when the session is not archived."""
        if not self.exists(conn):
            return False
        row = conn.exec_driver_sql(
            f"SELECT template, image FROM {self.table} WHERE session_id = %(id)s",
            {"id": session_id},
        ).first()
        if row is None:
            return False
        template, image = row
        doc: dict[str, Any] = json.loads(image)
        if doc.get("format") != ARCHIVE_FORMAT:
            raise ArchiveUnreadable(f"session {session_id}'s archive is not {ARCHIVE_FORMAT}")
        present = conn.exec_driver_sql(
            "SELECT to_regnamespace(%(t)s) IS NOT NULL", {"t": quoted(template)}
        ).scalar()
        if not present:
            raise ArchiveUnreadable(
                f"session {session_id} is archived against template schema {template}, "
                "which is gone"
            )
        t = quoted(checked_schema(target))
        ensure_step_function(conn, self.prefix)  # none yet if only older releases ran
        seed_rows = has_table(conn, template, SEED_TABLE)  # none in an older release's template
        try:
            conn.exec_driver_sql(clone_sql(metadata, template, target, {}, seed_rows=seed_rows))
        except DBAPIError as exc:  # the template's tables are not these models' (migrated)
            reason = str(exc.orig or exc).splitlines()[0]
            raise ArchiveUnreadable(
                f"session {session_id} was archived under other models than the running ones "
                f"({reason}); serve the release that wrote it to read it"
            ) from exc
        # The base template plus the session's seed rows: its state as seeded (an archive of an
        # older release names its task's own template, and has none).
        seeded = {r["tbl"]: json.dumps(r["rows"]) for r in doc["tables"].get(SEED_TABLE, [])}
        raw = conn.connection.driver_connection
        if seeded:  # the driver's own connection: values may hold a percent sign
            assert raw is not None
            raw.execute(silent(rows_script(raw, target, metadata, seeded)).encode())
        tables = list(metadata.tables)
        counted = ", ".join(f"(SELECT count(*) FROM {t}.{quoted(n)})" for n in tables)
        seeded_counts = conn.exec_driver_sql(f"SELECT {counted}").one()
        for name in _KEPT_TABLES:  # the clone holds the template's: replaced
            if name not in doc["tables"]:
                continue
            conn.exec_driver_sql(f"DELETE FROM {t}.{quoted(name)}")
            conn.exec_driver_sql(
                f"INSERT INTO {t}.{quoted(name)} SELECT * FROM "
                f"json_populate_recordset(NULL::{t}.{quoted(name)}, %(rows)s::json)",
                {"rows": json.dumps(doc["tables"][name])},
            )
        try:
            PgStepLog(conn, target, metadata).redo()
        except UndoUnavailable as exc:
            raise ArchiveUnreadable(
                f"session {session_id}'s archive does not apply: {exc}"
            ) from exc
        for table, column in _sequenced(metadata):
            state = doc["sequences"].get(table)
            if state is not None:  # where the session's sequence was, exactly
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{t}.{quoted(table)}', "
                    f"'{column}'), %(v)s, %(called)s)",
                    {"v": int(state[0]), "called": bool(state[1])},
                )
        # The check recycling makes, mirrored: each table holds its seeded rows plus the log's
        # inserts minus its deletes (a change the redo could not place shows here).
        expected = dict.fromkeys(tables, 0)
        for change in doc["tables"][STEP_ROWS_TABLE]:
            if change["tbl"] in expected:
                expected[change["tbl"]] += {"i": 1, "d": -1}.get(change["op"], 0)
        now = conn.exec_driver_sql(f"SELECT {counted}").one()
        found = {n: now[i] - seeded_counts[i] for i, n in enumerate(tables)}
        if found != expected:
            raise ArchiveUnreadable(
                f"session {session_id}'s archive does not add up (rows added per table: {found}; "
                f"its log says {expected})"
            )
        return True
