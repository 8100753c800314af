"""SQLite's dump SQL (app/storage/dump_sql.py): values read raw, rows found by rowid, a set of
ids bound as one JSON array, and parameterless statements run on the DB-API cursor from SQL text
cached per statement."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, bindparam, func, literal_column, select
from sqlalchemy.engine import Dialect

Rows = Iterable[tuple[Any, ...]]


def value_processor(column: ColumnElement[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    # SQLite stores any value in any column: its type's processor may raise on what it reads.
    return column.type.dialect_impl(dialect).result_processor(dialect, None)


# SQL text of the dump's statements, per (kind, table objects, columns): they run on the DB-API
# cursor, with no statement built, cache-keyed and compiled per verify (~41 % of a verify
# before, bench/history/rounds.md). Their values come back as SQLAlchemy returns them, as every
# column that SQLAlchemy would convert is selected raw (`value_processor`), and the rest it passes
# through on SQLite.
_sql_text: dict[tuple[Any, ...], str] = {}


def execute(
    conn: Connection,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    params: tuple[Any, ...] = (),
) -> Rows:
    """The rows of the statement `build` makes (built only when its SQL is not cached);
    `params`: the values of its bound parameters, in order (`bindparam("ids")` only)."""
    sql = _sql_text.get(key)
    if sql is None:
        stmt = build()
        compiled = stmt.compile(dialect=conn.dialect)
        if len(compiled.positiontup or ()) != len(params):  # never expected: let SQLAlchemy bind
            return conn.execute(stmt, dict(zip(("ids",), params, strict=False)))
        sql = _sql_text[key] = str(compiled)
    driver = conn.connection.driver_connection
    assert driver is not None
    rows: list[Any] = driver.execute(sql, params).fetchall()
    return rows


# `IN (SELECT value FROM json_each(?))`: a set of ids as one JSON parameter, so the statement's
# SQL is the same whatever the ids and is compiled once (an `IN (?, ?, ...)` is rebuilt and
# recompiled for every set: ~0.4 ms each, several per patched dump).
JSON_VALUES = (
    select(literal_column("value")).select_from(func.json_each(bindparam("ids"))).scalar_subquery()
)
_INT64 = (-(2**63), 2**63)


def _json_array(values: Iterable[Any]) -> str | None:
    """`values` as a JSON array that json_each reads back as the same values, or None when some
    value would not survive the trip (a float, bytes, a huge int: what an agent may have
    written into a reference column)."""
    out: list[int | str] = []
    for value in values:
        if type(value) is int and _INT64[0] <= value < _INT64[1]:
            out.append(value)
        elif type(value) is str and value.isascii() and "\x00" not in value:
            out.append(value)
        else:
            return None
    return json.dumps(out)


def rows_where_in(
    conn: Connection,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    column: ColumnElement[Any],
    values: Iterable[Any],
) -> Rows | None:
    param = _json_array(values)
    if param is None:
        return None
    return execute(conn, key, lambda: build().where(column.in_(JSON_VALUES)), (param,))


_rowid_tables: dict[Table, bool] = {}


def _has_rowid(table: Table) -> bool:
    # Cached: SQLAlchemy builds a view of the dialect options on each access (~20 us).
    known = _rowid_tables.get(table)
    if known is None:
        known = _rowid_tables[table] = (
            table.dialect_options["sqlite"].get("with_rowid", True) is not False
        )
    return known


# `_rowid_` rather than `rowid`: a column may be named rowid, which would shadow it.
ROWID: ColumnElement[int] = literal_column("_rowid_")


def row_identity(table: Table) -> ColumnElement[int] | None:
    return ROWID if _has_rowid(table) else None


def identity_is_id(table: Table, dialect: Dialect) -> bool:
    # A single INTEGER PRIMARY KEY is the rowid (any other declared type is not).
    pk = list(table.primary_key.columns)
    if len(pk) != 1:
        return False
    declared = pk[0].type.compile(dialect=dialect)
    return declared.upper() == "INTEGER" and row_identity(table) is not None


def rows_by_identity(
    conn: Connection,
    key: tuple[Any, ...],
    table: Table,
    columns: Callable[[], list[Any]],
    ids: frozenset[int],
) -> list[tuple[Any, ...]]:
    assert row_identity(table) is not None, f"{table.name}'s rows have no identity to patch by"

    def query() -> Any:
        return select(ROWID, *columns()).where(ROWID.in_(JSON_VALUES))

    param = json.dumps(sorted(ids))  # rowids are integers: always one JSON parameter
    return list(execute(conn, key, query, (param,)))
