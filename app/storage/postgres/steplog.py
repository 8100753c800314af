"""The step log in a PostgreSQL session schema: reading it, undoing it, exporting the schema.

The tables are SQLite's (app/storage/steplog.py), in every template and session schema, filled
the same way: the runner writes each call's `_stategym_steps` row in the call's transaction and
an AFTER ROW trigger writes `_stategym_step_rows` as step `max(idx) + 1`, row images as
`row_to_json`, read back as the very values by `json_populate_record`. Readers get `PgStepLog`
through `step_log(conn)`. Undo applies the before-images in reverse as one script, triggers
silenced and foreign keys deferred, drops the later steps, and on a rewind moves each sequence
back to where a replay of the kept steps leaves it. No undo goes back before a migration's
step; a logged table the models no longer have is refused by name. Encoding and undo:
docs/steps.md ("On PostgreSQL").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql as pgsql
from sqlalchemy import BigInteger, Boolean, Connection, MetaData, Table, column, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.selectable import TextualSelect
from sqlalchemy.types import TypeEngine

from app.storage.postgres.db import (
    META_TABLE,
    SEED_TABLE,
    STEP_LOG_TABLES,
    VERSION_TABLE,
    checked_schema,
    has_table,
    quoted,
    results,
    schema_of,
    serial_columns,
)
from app.storage.steplog import (
    _OPS,
    MIGRATED_AT_STEP,
    STEP_COLS_TABLE,
    STEP_PREFIX,
    STEP_ROWS_TABLE,
    STEPS_TABLE,
    RowChange,
    RowImage,
    StepRow,
    UndoUnavailable,
    dropped_refusal,
    migrated_refusal,
    step_row_of,
)

PG_STEP_LOG_VERSION = "pg1"  # `step_log` in the schema's `_stategym_meta`
EXPORT_FORMAT = "stategym-pg-schema/1"
_QUIET = "SELECT set_config('stategym.quiet', '{}', true)"  # the step triggers, transaction-local


class PgStepLog:
    """The step log of one session schema, read in the caller's transaction on `conn`."""

    def __init__(self, conn: Connection, schema: str, metadata: MetaData, *, batched: bool = True):
        self.conn = conn
        self.schema = checked_schema(schema)
        self.s = quoted(self.schema)
        self.metadata = metadata
        # `batched`: the migration step, the change counts and the steps are read once, in one
        # round trip, and kept until this object changes the log (undo, redo, scratch); the row
        # images in one round trip. False: one query per read, as before (what tests compare).
        self.batched = batched
        self._summary: tuple[int, list[tuple[Any, ...]], list[tuple[Any, ...]]] | None = None

    @classmethod
    def of(cls, conn: Connection, metadata: MetaData) -> PgStepLog | None:
        """The log of the schema `conn` is pinned to, or None when that schema keeps none."""
        schema = schema_of(conn)
        if schema is None:
            return None
        found = cls(conn, schema, metadata)
        return found if found.version() == PG_STEP_LOG_VERSION else None

    def _run(self, statement: str, params: dict[str, Any] | None = None) -> Any:
        if params:
            return self.conn.exec_driver_sql(statement, params)
        return self.conn.exec_driver_sql(statement)

    def version(self) -> str | None:
        row = self._run(f"SELECT value FROM {self.s}.{META_TABLE} WHERE key = 'step_log'").first()
        return row[0] if row else None

    # --- reading -------------------------------------------------------------------------------
    def _steps_sql(self, upto: int | None = None) -> str:
        where = "" if upto is None else f" WHERE idx <= {int(upto)}"
        return (
            "SELECT idx, tool, args, outcome, output, output_digest, output_bytes, duration_ms "
            f"FROM {self.s}.{STEPS_TABLE}{where} ORDER BY idx"
        )

    def _counts_sql(self) -> str:
        return (
            f"SELECT step, tbl, count(*) FROM {self.s}.{STEP_ROWS_TABLE} GROUP BY step, tbl "
            "ORDER BY step, tbl"
        )

    def _migrated_sql(self) -> str:
        return f"SELECT value FROM {self.s}.{META_TABLE} WHERE key = '{MIGRATED_AT_STEP}'"

    def _read(self) -> tuple[int, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """(migrated_at, change count rows, step rows): one round trip, kept (`batched`)."""
        if self._summary is None:
            migrated, counts, steps = results(
                self.conn, [self._migrated_sql(), self._counts_sql(), self._steps_sql()]
            )
            self._summary = (int(migrated[0][0]) if migrated else 0, counts, steps)
        return self._summary

    def _changed(self) -> None:
        """This object is about to change the log (or the state it is read in): reread after."""
        self._summary = None

    def steps(self, upto: int | None = None) -> list[StepRow]:
        if self.batched and upto is None:
            return [step_row_of(*row) for row in self._read()[2]]
        return [step_row_of(*row) for row in self._run(self._steps_sql(upto)).all()]

    def count(self) -> int:
        return int(self._run(f"SELECT coalesce(max(idx), 0) FROM {self.s}.{STEPS_TABLE}").scalar())

    def migrated_at(self) -> int:
        if self.batched:
            return self._read()[0]
        found = self._run(
            f"SELECT value FROM {self.s}.{META_TABLE} WHERE key = %(key)s",
            {"key": MIGRATED_AT_STEP},
        ).scalar()
        return int(found) if found is not None else 0

    def changed_steps(self) -> set[int]:
        if self.batched:  # the steps that have row changes: those the counts are grouped by
            return {row[0] for row in self._read()[1]}
        rows = self._run(f"SELECT DISTINCT step FROM {self.s}.{STEP_ROWS_TABLE}").all()
        return {row[0] for row in rows}

    def change_counts(self) -> dict[int, dict[str, int]]:
        rows = self._read()[1] if self.batched else self._run(self._counts_sql()).all()
        out: dict[int, dict[str, int]] = {}
        for step, table, n in rows:
            out.setdefault(step, {})[table] = n
        return out

    def row_images(self) -> list[RowImage]:
        """Every logged row change in the order made, values read back through the columns'
        types: with `batched` the changes and every changed table's values in one round trip
        (`_typed_results`), else one query per table changed."""
        listing = (
            f"SELECT seq, step, tbl, op, old_rid, new_rid FROM {self.s}.{STEP_ROWS_TABLE} "
            "ORDER BY seq"
        )
        values: dict[int, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
        if self.batched:
            names = sorted({row[1] for row in self._read()[1]})
            known = [n for n in names if n in self.metadata.tables]
            found = _typed_results(
                self.conn,
                [(listing, None)]
                + [
                    (_values_sql(self.metadata.tables[n], self.s), self.metadata.tables[n])
                    for n in known
                ],
            )
            changes = found[0]
            for name, rows in zip(known, found[1:], strict=True):
                values.update(self._images_of(self.metadata.tables[name], rows))
            if {row[2] for row in changes} - set(names):  # not what the counts said: reread
                return PgStepLog(self.conn, self.schema, self.metadata, batched=False).row_images()
        else:
            changes = self._run(listing).all()
            for name in sorted({row[2] for row in changes}):
                values.update(self._values_of(name))
        out = []
        for seq, step, table, op, old_rid, new_rid in changes:
            before, after = values.get(seq, (None, None))
            out.append(RowImage(step, table, op, old_rid, new_rid, before, after))
        return out

    def _values_of(
        self, name: str
    ) -> dict[int, tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        table = self.metadata.tables.get(name)
        if table is None:
            return {}
        # On a connection pinned to this schema (search_path), the statement names no schema:
        # one text, compiled once per table (compiling it per schema was ~10 % of a verify).
        pinned = schema_of(self.conn) == self.schema
        query = _values_query(table, None if pinned else self.schema)
        return self._images_of(table, self.conn.execute(query, {"tbl": name}))

    def _images_of(
        self, table: Table, rows: Iterable[Any]
    ) -> dict[int, tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        names = [c.name for c in table.columns]
        out = {}
        width = len(names)
        for row in rows:
            seq, has_old, has_new, *vals = row
            before = dict(zip(names, vals[:width], strict=True)) if has_old else None
            after = dict(zip(names, vals[width:], strict=True)) if has_new else None
            out[seq] = (before, after)
        return out

    def changes(self, steps: Iterable[int] | None = None) -> dict[int, list[RowChange]]:
        wanted = None if steps is None else set(steps)
        out: dict[int, list[RowChange]] = {}
        for image in self.row_images():
            if wanted is None or image.step in wanted:
                out.setdefault(image.step, []).append(
                    RowChange(image.step, image.table, _OPS[image.op], image.before, image.after)
                )
        return out

    # --- undo ----------------------------------------------------------------------------------
    def _columns(self) -> dict[str, list[str]]:
        return _columns_of(self._run(f"SELECT tbl, cols FROM {self.s}.{STEP_COLS_TABLE}").all())

    def undo_supported(self, tables: Iterable[str]) -> bool:
        """Whether every one of `tables` is logged with its current columns and its trigger
        (one catalog query, by the tables' oids)."""
        names = list(tables)
        recorded = self._columns()
        current = self._run(
            "WITH t AS (SELECT n, to_regclass(%(s)s || '.' || quote_ident(n)) AS oid "
            "FROM unnest(%(names)s::text[]) n) "
            "SELECT t.n, (SELECT string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_attribute a "
            "WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped), "
            # By (tgrelid, tgname): an index scan, where a join on the function scanned every
            # trigger of the database (~10 ms with many schemas).
            "(SELECT count(*) FROM pg_trigger g WHERE g.tgrelid = t.oid "
            "AND g.tgname = %(prefix)s || t.n AND g.tgenabled <> 'D') = 1 FROM t",
            {"s": self.s, "names": names, "prefix": STEP_PREFIX},
        ).all()
        for table, cols, triggered in current:
            logged = recorded.get(table)
            if logged is None or ",".join(logged) != cols or not triggered:
                return False
        return len(current) == len(names)

    def undo_to(self, to_step: int, *, sequences: bool = False) -> int:
        """The state after step `to_step` (0: as seeded), later steps dropped, in the caller's
        transaction (or savepoint); returns the steps undone. `sequences`: move each SERIAL
        sequence back too (sequences are not transactional: never inside a savepoint that is
        rolled back, or the live session would reuse ids). Two round trips: the log's rows
        (`undo_reads`), then the script (`undo_script`)."""
        try:
            reads = results(self.conn, self.undo_reads(to_step))
        except psycopg.Error as exc:
            raise UndoUnavailable(str(exc).splitlines()[0]) from exc
        script, count = self.undo_script(to_step, reads, sequences=sequences)
        try:
            self._script(script)
        except (DBAPIError, psycopg.Error) as exc:  # the script runs on the driver's connection
            cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            raise UndoUnavailable(str(cause).splitlines()[0]) from exc
        return count

    def undo_reads(self, to_step: int) -> list[str]:
        """The three statements an undo to `to_step` reads (for `db.results`, possibly with
        others in the same round trip): the steps undone and the migration's step, the row
        changes to take back (latest first), the columns each table was logged with."""
        k = int(to_step)
        return [
            f"SELECT count(*), (SELECT value FROM {self.s}.{META_TABLE} "
            f"WHERE key = '{MIGRATED_AT_STEP}') FROM {self.s}.{STEPS_TABLE} WHERE idx > {k}",
            f"SELECT step, tbl, op, old_vals::text, new_vals::text FROM {self.s}.{STEP_ROWS_TABLE} "
            f"WHERE step > {k} ORDER BY seq DESC",
            f"SELECT tbl, cols FROM {self.s}.{STEP_COLS_TABLE}",
        ]

    def undo_script(
        self, to_step: int, reads: list[list[tuple[Any, ...]]], *, sequences: bool = False
    ) -> tuple[str, int]:
        """The script undoing the log to `to_step` from what `undo_reads` returned, and the
        number of steps it undoes; UndoUnavailable when the log cannot be undone so."""
        self._changed()
        k = int(to_step)
        ((count, migrated),), changes, recorded = reads
        if migrated is not None and k < int(migrated):
            raise UndoUnavailable(migrated_refusal(int(migrated)))
        script = []
        if changes:
            for step, name, *_ in reversed(changes):  # (a session migrated before its step
                if name not in self.metadata.tables:  # was recorded)
                    raise UndoUnavailable(dropped_refusal(step, name))
            columns = _columns_of(recorded)
            raw = self.conn.connection.driver_connection
            script += [_QUIET.format("on"), "SET CONSTRAINTS ALL DEFERRED"]
            for _step, name, op, old, new in changes:
                script.append(self._row_statement(name, op, old, new, columns, raw, forward=False))
            # Checked now (not at commit): a failure raises before any sequence moves.
            script += ["SET CONSTRAINTS ALL IMMEDIATE", _QUIET.format("off")]
        script += [
            f"DELETE FROM {self.s}.{STEP_ROWS_TABLE} WHERE step > {k}",
            f"DELETE FROM {self.s}.{STEPS_TABLE} WHERE idx > {k}",
        ]
        if sequences and count:
            script += self._sequences_sql(k)
        return ";\n".join(script), int(count)

    def redo(self) -> None:
        """Apply the logged after-images in the order made, on this schema holding its template's
        rows: the state the log describes, rebuilt (an archived session read back,
        app/storage/postgres/archive.py). The step triggers stay silent, as for an undo. One
        statement per change, each required to change exactly one row: a log that does not
        fit the rows (lost or altered entries) raises UndoUnavailable instead of rebuilding
        something else (a read path, and a rollout changes a handful of rows)."""
        self._changed()
        changes = self._run(
            f"SELECT seq, tbl, op, old_vals::text, new_vals::text FROM {self.s}.{STEP_ROWS_TABLE} "
            "ORDER BY seq"
        ).all()
        if not changes:
            return
        columns = self._columns()
        raw = self.conn.connection.driver_connection
        assert raw is not None
        try:
            self._script(f"{_QUIET.format('on')}; SET CONSTRAINTS ALL DEFERRED")
            for seq, name, op, old, new in changes:
                statement = self._row_statement(name, op, old, new, columns, raw, forward=True)
                if raw.execute(statement.encode()).rowcount != 1:
                    raise UndoUnavailable(f"logged change {seq} ({op} on {name}) fits no row")
            self._script(f"SET CONSTRAINTS ALL IMMEDIATE; {_QUIET.format('off')}")
        except (DBAPIError, psycopg.Error) as exc:
            cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            raise UndoUnavailable(str(cause).splitlines()[0]) from exc

    def _row_statement(
        self,
        name: str,
        op: str,
        old: str | None,
        new: str | None,
        columns: dict[str, list[str]],
        raw: Any,
        *,
        forward: bool,
    ) -> str:
        """The statement that makes one logged change (`forward`, a redo) or takes it back (an
        undo): an insert is undone by a delete, an update by writing the before-image back."""
        table = self.metadata.tables.get(name)
        cols = columns.get(name)
        missing = (op != "i" and old is None) or (op != "d" and new is None)
        if table is None or cols is None or missing:
            raise UndoUnavailable(f"no record of {name}'s columns")
        target = f"{self.s}.{quoted(name)}"
        quoted_cols = ", ".join(quoted(c) for c in cols)
        key = ", ".join(quoted(c.name) for c in table.primary_key.columns)

        def record(values: str | None) -> str:
            literal = pgsql.Literal(values).as_string(raw)
            return f"json_populate_record(NULL::{target}, {literal}::json)"

        # The row is found by its key before the change (redo) or after it (undo).
        written, found = (new, old) if forward else (old, new)
        action = op if forward else {"i": "d", "d": "i", "u": "u"}[op]
        if action == "i":
            return (
                f"INSERT INTO {target} ({quoted_cols}) SELECT {quoted_cols} FROM {record(written)}"
            )
        where = f"({key}) = (SELECT {key} FROM {record(found)})"
        if action == "d":
            return f"DELETE FROM {target} WHERE {where}"
        return (
            f"UPDATE {target} SET ({quoted_cols}) = (SELECT {quoted_cols} FROM {record(written)}) "
            f"WHERE {where}"
        )

    def _sequences_sql(self, k: int) -> list[str]:
        """Each SERIAL sequence where a run of steps 1..k leaves it: after the largest id present
        now or logged up to step k (inserted, or seen before a change)."""
        out = []
        for table, col in serial_columns(self.metadata):
            target = f"{self.s}.{quoted(table.name)}"
            name = table.name.replace("'", "''")
            out.append(
                f"SELECT setval(pg_get_serial_sequence('{target}', '{col}'), coalesce(greatest("
                f"(SELECT max({quoted(col)}) FROM {target}), "
                f"(SELECT max(greatest(old_rid, new_rid)) FROM {self.s}.{STEP_ROWS_TABLE} "
                f"WHERE tbl = '{name}' AND step <= {k})), 0) + 1, false)"
            )
        return out

    def _script(self, script: str) -> None:
        # Several statements, no parameters: psycopg sends them as one simple query.
        raw = self.conn.connection.driver_connection
        assert raw is not None
        raw.execute(script.encode())

    @contextmanager
    def scratch(self) -> Iterator[None]:
        self._run("SAVEPOINT stategym_scratch")
        self._changed()
        try:
            yield
        except DBAPIError as exc:  # a READ ONLY transaction (inspection) cannot undo
            raise UndoUnavailable(str(exc.orig or exc).splitlines()[0]) from exc
        finally:
            self._changed()
            self._run("ROLLBACK TO SAVEPOINT stategym_scratch")
            self._run("RELEASE SAVEPOINT stategym_scratch")


def _values_sql(table: Table, s: str) -> str:
    """`_values_query`'s SQL for `table` in (quoted) schema `s`, its table name a literal."""
    cols = ", ".join(f"{side}.{quoted(c.name)}" for side in ("o", "n") for c in table.columns)
    rtype = f"NULL::{s}.{quoted(table.name)}"
    return (
        f"SELECT r.seq, r.old_vals IS NOT NULL, r.new_vals IS NOT NULL, {cols} "
        f"FROM {s}.{STEP_ROWS_TABLE} r "
        f"CROSS JOIN LATERAL json_populate_record({rtype}, r.old_vals) o "
        f"CROSS JOIN LATERAL json_populate_record({rtype}, r.new_vals) n "
        f"WHERE r.tbl = '{quoted(table.name)[1:-1]}'"
    )


_IMAGE_HEAD: tuple[TypeEngine[Any], ...] = (BigInteger(), Boolean(), Boolean())


def _typed_results(
    conn: Connection, statements: list[tuple[str, Table | None]]
) -> list[list[tuple[Any, ...]]]:
    """`db.results` of `statements` (SQL, the table whose values `_values_sql` selects, or None:
    rows as psycopg loads them), each table's values passed through its columns' types'
    result processors for the column types the database answered with, as SQLAlchemy does
    for `_values_query`'s typed columns: the rows `conn.execute` would return."""
    assert conn.in_transaction(), "read in the caller's transaction"
    raw = conn.connection.driver_connection
    assert raw is not None
    cursor = raw.execute(";\n".join(sql for sql, _ in statements).encode())
    out: list[list[tuple[Any, ...]]] = []
    for _, table in statements:
        rows = list(cursor.fetchall()) if cursor.description is not None else []
        if table is not None and cursor.description is not None:
            types = [
                *_IMAGE_HEAD,
                *(c.type for c in table.columns),
                *(c.type for c in table.columns),
            ]
            procs = [
                t._cached_result_processor(conn.dialect, d.type_code)
                for t, d in zip(types, cursor.description, strict=True)
            ]
            if any(procs):
                rows = [
                    tuple(p(v) if p is not None else v for p, v in zip(procs, row, strict=True))
                    for row in rows
                ]
        out.append(rows)
        cursor.nextset()
    return out


def _columns_of(rows: Iterable[Any]) -> dict[str, list[str]]:
    """`_stategym_step_cols`'s rows as table -> its logged columns."""
    return {t: cols.split(",") if cols else [] for t, cols in rows}


_values_queries: dict[tuple[Table, str | None], TextualSelect] = {}


def _values_query(table: Table, schema: str | None) -> TextualSelect:
    """(seq, has old, has new, old values..., new values...) of the table's logged changes, read
    back through its columns' types; `schema` None: the search path's (cached per table)."""
    cached = _values_queries.get((table, schema))
    if cached is not None:
        return cached
    prefix = f"{quoted(checked_schema(schema))}." if schema is not None else ""
    cols = ", ".join(f"{side}.{quoted(c.name)}" for side in ("o", "n") for c in table.columns)
    rtype = f"NULL::{prefix}{quoted(table.name)}"
    query = text(
        f"SELECT r.seq, r.old_vals IS NOT NULL, r.new_vals IS NOT NULL, {cols} "
        f"FROM {prefix}{STEP_ROWS_TABLE} r "
        f"CROSS JOIN LATERAL json_populate_record({rtype}, r.old_vals) o "
        f"CROSS JOIN LATERAL json_populate_record({rtype}, r.new_vals) n "
        "WHERE r.tbl = :tbl"
    ).columns(
        column("seq", BigInteger),
        column("has_old", Boolean),
        column("has_new", Boolean),
        *[column(f"{side}_{i}", c.type) for side in "on" for i, c in enumerate(table.columns)],
    )
    if schema is None:  # per schema: not kept (one per session would grow without bound)
        _values_queries[(table, schema)] = query
    return query


def step_log_reader(metadata: MetaData) -> Any:
    """The step-log reader the backend binds to its connections (postgres/driver.py)."""
    return lambda conn: PgStepLog.of(conn, metadata)


# --- export / restore --------------------------------------------------------------------------
def export_schema(conn: Connection, schema: str, metadata: MetaData) -> bytes:
    """The session schema as portable JSON (format `stategym-pg-schema/1`):

        {"format", "meta": {key: value}, "sequences": {table: [last_value, is_called]},
         "tables": {name: "<JSON array of row objects>"}}

    one entry per table of the environment, `_stategym_meta`, `alembic_version`, the step
    log's three and `_stategym_seed`; each table's rows are kept as the text `json_agg` wrote
    (PostgreSQL's own text of every value), restored by `json_populate_recordset`, so every
    value comes back exactly.
    """
    s = quoted(checked_schema(schema))
    names = [t.name for t in metadata.sorted_tables] + [META_TABLE, VERSION_TABLE, *STEP_LOG_TABLES]
    if has_table(conn, schema, SEED_TABLE):  # an older release's schema has none
        names.append(SEED_TABLE)
    tables: dict[str, str] = {}
    for name in names:
        tables[name] = str(
            conn.exec_driver_sql(
                f"SELECT coalesce(json_agg(t), '[]')::text FROM {s}.{quoted(name)} t"
            ).scalar()
        )
    meta: dict[str, str] = dict(
        conn.exec_driver_sql(f"SELECT key, value FROM {s}.{META_TABLE}").all()
    )
    sequences: dict[str, list[Any]] = {}  # table -> [last_value, is_called]
    for table, col in serial_columns(metadata):
        sequence = conn.exec_driver_sql(
            "SELECT pg_get_serial_sequence(%(t)s, %(c)s)",
            {"t": f"{s}.{quoted(table.name)}", "c": col},
        ).scalar()
        if sequence is not None:  # PostgreSQL's own quoting of the name
            row = conn.exec_driver_sql(f"SELECT last_value, is_called FROM {sequence}").one()
            sequences[table.name] = [int(row[0]), bool(row[1])]
    doc = {"format": EXPORT_FORMAT, "meta": meta, "sequences": sequences, "tables": tables}
    return json.dumps(doc, separators=(",", ":")).encode()


def reopened_export(image: bytes, metadata: MetaData) -> tuple[bytes, dict[str, str]]:
    """An export made restorable (status open, no activity stamp) and its meta; ValueError
    when `image` is not a PostgreSQL session export of these tables."""
    if image[:16].startswith(b"SQLite format 3"):
        raise ValueError("it is a SQLite session image: restore it on a SQLite server")
    doc = json.loads(image)
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise ValueError(f"not a PostgreSQL session export ({EXPORT_FORMAT})")
    tables = doc.get("tables")
    known = set(metadata.tables) | {META_TABLE, VERSION_TABLE, *STEP_LOG_TABLES, SEED_TABLE}
    if not isinstance(tables, dict) or not set(tables) <= known:
        raise ValueError("the export's tables are not this environment's")
    meta = {str(k): str(v) for k, v in dict(doc.get("meta") or {}).items() if k != "last_write"}
    meta["status"] = "open"
    tables[META_TABLE] = json.dumps([{"key": k, "value": v} for k, v in meta.items()])
    return json.dumps(doc, separators=(",", ":")).encode(), meta


def restore_statements(image: bytes, target: str, metadata: MetaData) -> list[tuple[str, Any]]:
    """(statement, parameters) filling the freshly created schema `target` (its tables
    created, no index, foreign key or trigger yet) from an export."""
    doc = json.loads(image)
    t = quoted(checked_schema(target))
    out: list[tuple[str, Any]] = []
    for name, rows in doc["tables"].items():
        out.append(
            (
                f"INSERT INTO {t}.{quoted(name)} SELECT * FROM "
                f"json_populate_recordset(NULL::{t}.{quoted(name)}, %(rows)s::json)",
                {"rows": rows},
            )
        )
    for table, col in serial_columns(metadata):
        state = (doc.get("sequences") or {}).get(table.name)
        if state is not None:  # where the exported session's sequence was, exactly
            out.append(
                (
                    f"SELECT setval(pg_get_serial_sequence('{t}.{quoted(table.name)}', '{col}'), "
                    "%(v)s, %(called)s)",
                    {"v": int(state[0]), "called": bool(state[1])},
                )
            )
    return out
