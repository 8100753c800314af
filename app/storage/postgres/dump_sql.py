"""PostgreSQL's dump SQL (app/storage/dump_sql.py): column types are enforced, so values are
read as they are; rows are found by their single integer primary key (what the step log
records, app/storage/postgres/changes.py); statements go through SQLAlchemy."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, select
from sqlalchemy.engine import Dialect

Rows = Iterable[tuple[Any, ...]]


def value_processor(column: ColumnElement[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    return None


def execute(conn: Connection, key: tuple[Any, ...], build: Callable[[], Any]) -> Rows:
    return conn.execute(build())


def rows_where_in(
    conn: Connection,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    column: ColumnElement[Any],
    values: Iterable[Any],
) -> Rows | None:
    return None  # the caller binds the values


def _integer_key(table: Table) -> ColumnElement[Any] | None:
    pk = list(table.primary_key.columns)
    try:
        integer = len(pk) == 1 and pk[0].type.python_type is int
    except NotImplementedError:  # a custom type that does not say
        integer = False
    return pk[0] if integer else None


def row_identity(table: Table) -> ColumnElement[int] | None:
    key = _integer_key(table)
    # Labelled: the key may also be a compared column, selected again beside it.
    return key.label("_stategym_identity") if key is not None else None


def identity_is_id(table: Table, dialect: Dialect) -> bool:
    return _integer_key(table) is not None


def rows_by_identity(
    conn: Connection,
    key: tuple[Any, ...],
    table: Table,
    columns: Callable[[], list[Any]],
    ids: frozenset[int],
) -> list[tuple[Any, ...]]:
    identity = row_identity(table)
    assert identity is not None, f"{table.name}'s rows have no identity to patch by"
    pk = list(table.primary_key.columns)[0]
    stmt = select(identity, *columns()).where(pk.in_(sorted(ids)))
    return [tuple(row) for row in conn.execute(stmt)]
