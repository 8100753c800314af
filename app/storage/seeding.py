"""Apply a task's `seed` (rows it adds or changes on top of the base dataset) through SQLAlchemy.

Seed format, as written in a task row:

    "seed": {"now": "2026-03-14T10:00:00+00:00",
             "rows": {"customers": [{"id": 9001, "email": "..."}], "orders": [...]}}

Each row is an upsert by primary key: a row whose key exists is updated on the given columns,
otherwise inserted. Tables are applied parents first (foreign-key order), whatever their order
in the task file, so a generator that sorts JSON keys cannot break seeding. Table and column
names are checked against the environment's metadata, so nothing from a task becomes raw SQL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Date,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from app.sdk.compare_spec import ANSWER_TABLE, CONVERSATION_TABLE


class SeedError(ValueError):
    """The task's seed does not fit the environment's schema."""


def parse_now(value: Any, default: datetime) -> datetime:
    """The session's frozen clock: the seed's `now` (ISO 8601) or the environment's default."""
    if value is None:
        return default
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise SeedError(f"seed.now {value!r} is not an ISO 8601 timestamp") from exc
    # Naive UTC throughout: SQLite stores datetimes without an offset.
    if parsed.tzinfo is not None:
        try:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
        except OverflowError as exc:  # 0001-01-01T00:00+01:00 is before year 1 in UTC
            raise SeedError(f"seed.now {value!r} is out of range") from exc
    return parsed


NOW_RANGE = (datetime(1900, 1, 1), datetime(9000, 1, 1))


def parse_seed_now(value: Any, default: datetime) -> datetime:
    """A seed's `now`, within NOW_RANGE: tools add days and years to it, and a clock at
    9999-12-31 made that arithmetic overflow inside a tool call."""
    now = parse_now(value, default)
    if not NOW_RANGE[0] <= now < NOW_RANGE[1]:
        raise SeedError(
            f"seed.now {value!r} is outside {NOW_RANGE[0]:%Y}-{NOW_RANGE[1]:%Y}; "
            "use a realistic timestamp"
        )
    return now


def _coerce(table: Table, column: str, value: Any) -> Any:
    col_type = table.c[column].type
    if value is None or not isinstance(value, str):
        return value
    try:
        if isinstance(col_type, DateTime):
            return parse_now(value, datetime.min)
        if isinstance(col_type, Date):
            return date.fromisoformat(value)
    except ValueError as exc:
        raise SeedError(f"seed {table.name}.{column}: {value!r} is not an ISO date") from exc
    return value


def _checked_row(table: Table, row: Any) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise SeedError(f"seed.rows.{table.name}: each row must be an object, got {row!r}")
    unknown = [c for c in row if c not in table.c]
    if unknown:
        raise SeedError(
            f"seed.rows.{table.name}: unknown column(s) {unknown}; "
            f"columns are {list(table.c.keys())}"
        )
    for column, value in row.items():
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise SeedError(f"seed {table.name}.{column}: {value} does not fit a 64-bit integer")
        if isinstance(value, list | dict) and _python_type(table, column) not in (list, dict):
            raise SeedError(
                f"seed {table.name}.{column}: a JSON {type(value).__name__} is no value"
            )
    return {c: _coerce(table, c, v) for c, v in row.items()}


def _python_type(table: Table, column: str) -> Any:
    try:
        return table.c[column].type.python_type
    except NotImplementedError:
        return None


def apply_seed(db: Session, metadata: MetaData, seed: Mapping[str, Any] | None) -> int:
    """Upsert the seed's rows; returns how many rows were written."""
    if not seed:
        return 0
    rows_by_table = seed.get("rows") or {}
    if not isinstance(rows_by_table, Mapping):
        raise SeedError("seed.rows must be an object of table name -> list of rows")
    unknown = [name for name in rows_by_table if name not in metadata.tables]
    if unknown:
        raise SeedError(
            f"seed.rows: unknown table(s) {unknown}; tables are {sorted(metadata.tables)}"
        )
    if ANSWER_TABLE in rows_by_table:
        # The agent's answer is the agent's to write (app/sdk/answer.py), never a seed's.
        raise SeedError(f"seed.rows: {ANSWER_TABLE} is the framework's answer table; seed omits it")
    if CONVERSATION_TABLE in rows_by_table:
        # Likewise the conversation: message_user writes it (app/sdk/user.py).
        raise SeedError(
            f"seed.rows: {CONVERSATION_TABLE} is the framework's conversation table; seed omits it"
        )
    written = 0
    # Core statements on the session's connection (its transaction): seed rows are no ORM
    # objects, and the ORM's execution path cost as much again per statement.
    conn = db.connection()
    for table in _parents_first(metadata):
        if table.name not in rows_by_table:
            continue
        rows = rows_by_table[table.name]
        if not isinstance(rows, list):
            raise SeedError(f"seed.rows.{table.name} must be a list of rows")
        checked = [_checked_row(table, raw) for raw in rows]
        try:
            written += _upsert_rows(conn, table, checked)
        except (StatementError, sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
            # NOT NULL, foreign keys, CHECK, UNIQUE, types: the seed's fault, a 422.
            message = f"seed.rows.{table.name}: the database refused a row: {_why(exc)}"
            raise SeedError(message) from exc
    return written


# Per MetaData: its tables parents first, and the tables that order was computed for.
# `MetaData.sorted_tables` sorts anew on every access (~0.15 ms for retail, per seed).
_orders: dict[MetaData, tuple[frozenset[Table], list[Table]]] = {}


def _parents_first(metadata: MetaData) -> list[Table]:
    found = _orders.get(metadata)
    tables = frozenset(metadata.tables.values())
    if found is None or found[0] != tables:  # computed again when a table was added
        found = _orders[metadata] = (tables, list(metadata.sorted_tables))
    return found[1]


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "orig", None) or exc
    return (str(reason).splitlines() or [type(reason).__name__])[0][:300]


def _upsert_rows(db: Connection, table: Table, rows: list[dict[str, Any]]) -> int:
    """Upsert in the rows' order, in batches (one executemany per run of rows of the same kind
    and columns): a 10,000-row seed is a few statements, not 20,000."""
    pk = [c.name for c in table.primary_key.columns]
    present = _existing_keys(db, table, pk, rows)
    batch: list[dict[str, Any]] = []
    batch_shape: tuple[str, frozenset[str]] | None = None

    def flush() -> None:
        if batch and batch_shape is not None:
            raw = _raw_statement(db, table, batch_shape[0], pk, batch[0])
            if raw is not None:
                sql, order, processors = raw
                db.connection.driver_connection.executemany(  # type: ignore[union-attr]
                    sql, [_bound(params, order, processors) for params in batch]
                )
            elif batch_shape[0] == "insert":
                db.execute(insert(table), batch)
            else:  # SET takes the parameters' other keys
                where = [table.c[c] == bindparam(f"_key_{c}") for c in pk]
                db.execute(update(table).where(*where), batch)
            batch.clear()

    for row in rows:
        key = _key_of(table, pk, row)
        if key is not None and key in present:
            if not row.keys() - set(pk):
                continue  # only the key: nothing to change
            shape = ("update", frozenset(row))
            params = {c: v for c, v in row.items() if c not in pk}
            params.update({f"_key_{c}": row[c] for c in pk})
        else:
            shape, params = ("insert", frozenset(row)), row
            if key is not None:
                present.add(key)  # a later row with this key updates it
        if shape != batch_shape:
            flush()
            batch_shape = shape
        batch.append(params)
    flush()
    return len(rows)


# Per (table, kind, columns): the SQL and bind processors of a seed's INSERT or UPDATE on SQLite,
# compiled once per process. SQLAlchemy compiled them per engine, and executing through it cost
# ~1 ms a batch more than the sqlite3 executemany it ends in (bench/cold_path.py).
Processor = Callable[[Any], Any] | None
# (parameter name or None, fixed value): where each `?` takes its value from.
Source = tuple[str | None, Any]
RawStatement = tuple[str, list[Source], list[Processor]]
_raw_statements: dict[tuple[Table, str, tuple[str, ...]], RawStatement] = {}


def _raw_statement(
    db: Connection, table: Table, kind: str, pk: list[str], params: Mapping[str, Any]
) -> RawStatement | None:
    """The plain statement writing rows shaped like `params`, or None where SQLAlchemy must
    run it (another dialect, a column default or onupdate computed by a function)."""
    if db.dialect.name != "sqlite":
        return None
    names = tuple(params)
    cache_key = (table, kind, names)
    found = _raw_statements.get(cache_key)
    if found is not None:
        return found
    columns: list[Any] = []
    sources: list[Source] = []
    if kind == "insert":
        for name in names:
            columns.append(table.c[name])
            sources.append((name, None))
        for column in table.columns:  # what SQLAlchemy's INSERT adds: scalar column defaults
            default = column.default
            if column.name in params or default is None:
                continue
            if not getattr(default, "is_scalar", False):
                return None  # a Python function computes it, per row
            columns.append(column)
            sources.append((None, default.arg))  # type: ignore[attr-defined]
        quoted = ", ".join(f'"{c.name}"' for c in columns)
        sql = f'INSERT INTO "{table.name}" ({quoted}) VALUES ({", ".join("?" * len(columns))})'
    else:
        if any(c.onupdate is not None for c in table.columns):
            return None
        sets = [n for n in names if not n.startswith("_key_")]
        columns = [table.c[n] for n in sets] + [table.c[c] for c in pk]
        sources = [(n, None) for n in [*sets, *(f"_key_{c}" for c in pk)]]
        assignments = ", ".join(f'"{n}" = ?' for n in sets)
        where = " AND ".join(f'"{c}" = ?' for c in pk)
        sql = f'UPDATE "{table.name}" SET {assignments} WHERE {where}'
    # The processors SQLAlchemy binds each value with (dates as text, JSON, TypeDecorators).
    processors = [c.type._cached_bind_processor(db.dialect) for c in columns]
    found = _raw_statements[cache_key] = (sql, sources, processors)
    return found


def _bound(
    params: Mapping[str, Any], sources: list[Source], processors: list[Processor]
) -> list[Any]:
    out = []
    for (name, fixed), process in zip(sources, processors, strict=True):
        value = params[name] if name is not None else fixed
        out.append(process(value) if process is not None else value)
    return out


def _key_of(table: Table, pk: list[str], row: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The row's primary key as the database returns it ("7" and 7 are one integer key)."""
    if not all(c in row for c in pk):
        return None
    key = []
    for c in pk:
        value = row[c]
        if isinstance(value, str) and isinstance(table.c[c].type, Integer):
            try:
                value = int(value)
            except ValueError:
                pass
        key.append(value)
    return tuple(key)


def _existing_keys(
    db: Connection, table: Table, pk: list[str], rows: list[dict[str, Any]]
) -> set[tuple[Any, ...]]:
    """Which of the rows' primary keys the database holds already (one query per 500 keys;
    on SQLite, one query of a statement compiled once, the keys a JSON array)."""
    keys = list({k for k in (_key_of(table, pk, row) for row in rows) if k is not None})
    if not keys:
        return set()
    fast = _sqlite_existing(db, table, pk, keys)
    if fast is not None:
        return fast
    found: set[tuple[Any, ...]] = set()
    columns = [table.c[c] for c in pk]
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        if len(pk) == 1:
            match = columns[0].in_([k[0] for k in chunk])
        else:
            match = tuple_(*columns).in_(chunk)
        found.update(tuple(r) for r in db.execute(select(*columns).where(match)))
    return found


def _sqlite_existing(
    db: Connection, table: Table, pk: list[str], keys: list[tuple[Any, ...]]
) -> set[tuple[Any, ...]] | None:
    """`_existing_keys` for a one-column integer or text key on SQLite, whose values SQLite
    returns as SQLAlchemy would (no result conversion); None otherwise."""
    if db.dialect.name != "sqlite" or len(pk) != 1:
        return None
    column = table.c[pk[0]]
    if not isinstance(column.type, Integer | String) or column.type.result_processor(
        db.dialect, None
    ):
        return None
    values = []
    for (value,) in keys:
        if type(value) is int or (type(value) is str and value.isascii() and "\x00" not in value):
            values.append(value)
        else:
            return None  # JSON would not carry it back unchanged: bind it as it is
    raw = db.connection.driver_connection
    assert raw is not None
    sql = (
        f'SELECT "{column.name}" FROM "{table.name}" '
        f'WHERE "{column.name}" IN (SELECT value FROM json_each(?))'
    )
    return {tuple(r) for r in raw.execute(sql, (json.dumps(values),)).fetchall()}
