"""Change tracking on PostgreSQL: what a session schema wrote since it was seeded, from its log.

Invariant: the log holds exactly the rows that differ from the seeded state (it commits or
vanishes with them); a schema whose log cannot be trusted is dumped whole. The seeded state
itself is read on the session's own connection, its log undone in a savepoint that is rolled
back (no schema holds it). Details: docs/storage.md#change-tracking-postgresql.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, MetaData
from sqlalchemy.exc import DBAPIError

from app.sdk.compare_spec import CompareSpec
from app.storage.meta import Changes, foreign_key_guarded
from app.storage.postgres.db import (
    META_TABLE,
    SEED_TABLE,
    checked_schema,
    has_table,
    quoted,
    schema_of,
    step_logged,
    step_trigger_name,
)
from app.storage.postgres.steplog import PG_STEP_LOG_VERSION, PgStepLog
from app.storage.steplog import STEP_ROWS_TABLE, UndoUnavailable


def _key_columns(metadata: MetaData, compare: CompareSpec) -> dict[str, list[str]]:
    """Per referenced table, the columns a reference to it resolves by (its key, natural key)."""
    referenced = {t for spec in compare.tables.values() for t in spec.references.values()}
    out = {}
    for name in sorted(referenced):
        table = metadata.tables[name]
        cols = [c.name for c in table.primary_key.columns] + list(compare.for_table(name).key)
        out[name] = list(dict.fromkeys(cols))
    return out


class PgChangeReader:
    """The change reader the backend binds to its connections (app/storage/tracking.py).

    `template_of(fingerprint, snapshot key)` names the seeded state of a session of that snapshot
    (the key its dump is kept under), or None when `fingerprint` is not the running models';
    `base` is the base template schema of the running models.
    """

    def __init__(
        self, metadata: MetaData, compare: CompareSpec, template_of: Any, base: str | None = None
    ):
        self.metadata = metadata
        self.template_of = template_of
        self.base = base  # the base template schema sessions are seeded over
        self.logged = step_logged(metadata)  # tables with a trigger -> integer key or None
        self.guarded = foreign_key_guarded(metadata, compare)
        keys = _key_columns(metadata, compare)
        # A key changed by an update, per referenced table, as one CASE over the log's rows.
        cases = " ".join(
            f"WHEN '{_bare(t)}' THEN "
            + " OR ".join(
                f"(old_vals->>'{_bare(c)}') IS DISTINCT FROM (new_vals->>'{_bare(c)}')"
                for c in cols
            )
            for t, cols in keys.items()
            if cols
        )
        self._rekey = f"(op = 'u' AND CASE tbl {cases} ELSE false END)" if cases else "false"

    def trust_sql(self, schema: str, tables: Iterable[str]) -> str:
        """One SELECT of (meta, intact triggers) for `trusts`: the meta keys the log's trust
        depends on, and how many of `tables`' step triggers are there and enabled. Literals
        only (checked identifiers), so it may go with other statements in one round trip."""
        s = quoted(checked_schema(schema))
        names = ", ".join(f"'{_bare(t)}'" for t in tables if t in self.logged)
        return (
            "SELECT (SELECT json_object_agg(key, value) FROM "
            f"{s}.{META_TABLE} WHERE key IN ('template', 'snapshot', 'step_log', 'migrated')), "
            f"(SELECT count(*) FROM unnest(ARRAY[{names}]::text[]) n JOIN pg_trigger g "
            f"ON g.tgrelid = to_regclass('{s}' || '.' || quote_ident(n)) "
            f"AND g.tgname = '{_bare(step_trigger_name(''))}' || n AND g.tgenabled <> 'D')"
        )

    def trusts(self, meta: dict[str, Any] | None, intact: int, tables: Iterable[str]) -> str | None:
        """The seeded state's template when `trust_sql`'s (meta, intact) say the log holds every
        change of `tables` since the seed, else None (the schema is read whole, not recycled)."""
        meta = meta or {}
        with_trigger = [t for t in tables if t in self.logged]
        if meta.get("step_log") != PG_STEP_LOG_VERSION or intact != len(with_trigger):
            return None
        if "migrated" in meta:  # a migration's writes are in no log (postgres/migrate.py)
            return None
        found: str | None = self.template_of(meta.get("template"), meta.get("snapshot"))
        return found

    def __call__(self, conn: Connection, tables: Iterable[str]) -> Changes | None:
        schema = schema_of(conn)
        if schema is None:
            return None
        wanted = list(tables)
        s = quoted(checked_schema(schema))
        # One round trip: the meta, the intact triggers, the distinct row changes.
        row = conn.exec_driver_sql(
            f"SELECT t.*, (SELECT json_agg(json_build_array(tbl, op, old_rid, new_rid, k)) FROM "
            f"(SELECT DISTINCT tbl, op, old_rid, new_rid, {self._rekey} AS k "
            f"FROM {s}.{STEP_ROWS_TABLE}) c) FROM ({self.trust_sql(schema, wanted)}) t"
        ).one()
        meta, intact, log = row[0] or {}, row[1], row[2] or []
        template = self.trusts(meta, intact, wanted)
        if template is None:
            return None
        changed = {t for t in wanted if t not in self.logged}  # no trigger: read whole
        rows: dict[str, set[int]] = {}
        unkeyed: set[str] = set()  # tables whose key is not one integer: read whole
        for table, op, old_rid, new_rid, rekeyed in log:
            changed.add(table)
            if rekeyed or (op in ("i", "d") and table not in self.guarded):
                changed.add(f"{table}#key")
            if self.logged.get(table) is None:
                unkeyed.add(table)
                continue
            ids = rows.setdefault(table, set())
            ids.update(rid for rid in (old_rid, new_rid) if rid is not None)
        frozen = {t: frozenset(ids) for t, ids in rows.items() if t not in unkeyed}
        twin = f"{meta['template']}:{meta['snapshot']}"  # the SQLite snapshot's tracking key
        return Changes(
            f"pg:{template}",
            frozenset(changed),
            frozen,
            origin=_as_seeded(schema, self.metadata),
            twin=twin,
            seeded=self._seed_rows_of(schema),
        )

    def _seed_rows_of(self, schema: str) -> Any:
        def seeded(conn: Connection) -> Changes | None:
            """What the session's seed wrote over the base template (`_stategym_seed`: each
            table's rows, identified by their integer key), or None (a schema of an older
            release, or seeded by none). Every table written is marked "#key", the cautious
            reading (references to it are re-read)."""
            if self.base is None or not has_table(conn, schema, SEED_TABLE):
                return None
            found = conn.exec_driver_sql(
                f"SELECT tbl, rows::text FROM {quoted(schema)}.{SEED_TABLE}"
            ).all()
            changed: set[str] = set()
            rows: dict[str, frozenset[int]] = {}
            for table, written in found:
                if table not in self.metadata.tables:
                    return None
                changed |= {table, f"{table}#key"}
                key = self.logged.get(table)
                if key is not None:
                    rows[table] = frozenset(int(row[key]) for row in json.loads(written))
            origin = _in_schema(self.base)
            return Changes(f"pg:{self.base}", frozenset(changed), rows, origin=origin)

        return seeded


def _bare(name: str) -> str:
    """A checked identifier (letters, digits, underscores), as a string literal's content."""
    return quoted(name)[1:-1]


def _in_schema(template: str) -> Any:
    @contextmanager
    def read_template(conn: Connection) -> Iterator[Connection | None]:
        """`conn`, its statements pointed at the template schema for the duration (same
        transaction; templates never change once built); None when the template is gone."""
        present = conn.exec_driver_sql(
            "SELECT 1 FROM pg_namespace WHERE nspname = %(n)s", {"n": template}
        ).first()
        if present is None:
            yield None
            return
        previous = conn.get_execution_options().get("schema_translate_map")
        conn.execution_options(schema_translate_map={None: template})
        try:
            yield conn
        finally:
            conn.execution_options(schema_translate_map=previous)

    return read_template


def _as_seeded(schema: str, metadata: MetaData) -> Any:
    @contextmanager
    def read_as_seeded(conn: Connection) -> Iterator[Connection | None]:
        """`conn` (on session schema `schema`, in its transaction) holding the session's state as
        seeded for the duration: its step log undone in a savepoint, rolled back after; None
        where it cannot be undone (a READ ONLY transaction, a log that does not apply)."""
        conn.exec_driver_sql("SAVEPOINT stategym_seeded")
        try:
            PgStepLog(conn, schema, metadata).undo_to(0)
            undone = True
        except (UndoUnavailable, DBAPIError):
            undone = False
        try:
            yield conn if undone else None
        finally:
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT stategym_seeded")
            conn.exec_driver_sql("RELEASE SAVEPOINT stategym_seeded")

    return read_as_seeded
