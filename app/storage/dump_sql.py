"""What verify's dumps ask of a backend's SQL, found from the connection's dialect.

Reading a session's tables for a state dump differs per backend: SQLite stores any value in
any column (values are read raw and converted), finds rows by rowid and binds a set of ids as
one JSON array; PostgreSQL enforces column types and finds rows by their integer key. Each
backend writes that once (app/storage/sqlite/dump_sql.py, app/storage/postgres/dump_sql.py), as
SQLAlchemy's dialects do; callers ask `dump_sql(conn.dialect)` and never name a dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import import_module
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Connection, Table
from sqlalchemy.engine import Dialect

Rows = Iterable[tuple[Any, ...]]


class DumpSql(Protocol):
    """One backend's dump SQL (a module: app/storage/{sqlite,postgres}/dump_sql.py)."""

    def value_processor(
        self, column: ColumnElement[Any], dialect: Dialect
    ) -> Callable[[Any], Any] | None:
        """How a value of `column`, selected raw, is read as its type (may raise on what an
        agent wrote); None: values are read as they are (the database enforces the type)."""
        ...

    def execute(self, conn: Connection, key: tuple[Any, ...], build: Callable[[], Any]) -> Rows:
        """The rows of the parameterless statement `build` makes; `key` names the statement
        (its SQL may be cached under it, so `build` may not be called)."""
        ...

    def rows_where_in(
        self,
        conn: Connection,
        key: tuple[Any, ...],
        build: Callable[[], Any],
        column: ColumnElement[Any],
        values: Iterable[Any],
    ) -> Rows | None:
        """The rows of `build()` where `column` is one of `values`, by one statement compiled
        once whatever the values; None when they cannot be bound so (the caller binds them)."""
        ...

    def row_identity(self, table: Table) -> ColumnElement[int] | None:
        """What a patch finds `table`'s rows by (what the backend's change records hold);
        None: its rows have none (a write there makes verify read the table whole)."""
        ...

    def identity_is_id(self, table: Table, dialect: Dialect) -> bool:
        """Whether that identity is the value references to `table` hold."""
        ...

    def rows_by_identity(
        self,
        conn: Connection,
        key: tuple[Any, ...],
        table: Table,
        columns: Callable[[], list[Any]],
        ids: frozenset[int],
    ) -> list[tuple[Any, ...]]:
        """(identity, *`columns()`) of `table`'s rows at `ids` that exist."""
        ...


# SQLAlchemy dialect name -> the backend module that knows its dump SQL (loaded on first use).
_MODULES = {
    "sqlite": "app.storage.sqlite.dump_sql",
    "postgresql": "app.storage.postgres.dump_sql",
}
_loaded: dict[str, DumpSql] = {}


def dump_sql(dialect: Dialect) -> DumpSql:
    found = _loaded.get(dialect.name)
    if found is None:
        module: DumpSql = import_module(_MODULES[dialect.name])
        found = _loaded[dialect.name] = module
    return found
