"""Reading a table into comparable rows: values normalised per the comparison spec, references
by natural key, the SQL of each read the backend's own (app/storage/dump_sql.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import date, datetime
from decimal import Decimal
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, select

from app.sdk.compare_spec import CompareSpec, TableSpec
from app.storage.dump_sql import DumpSql, dump_sql
from app.verify.state.match_form import StoredText
from app.verify.state.raw_values import UnreadableValue, plain_scalar, raw_column, reader
from app.verify.state.table_state import RowIndex, TableState


def plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return plain_scalar(value)


def read_raw(conn: Connection, columns: list[Any]) -> tuple[list[Any], list[Callable[[Any], Any]]]:
    """What to select for `columns`, and how to read each value without raising
    (app/verify/state/raw_values.py: an agent may have written anything into any SQLite column)."""
    dialect = conn.dialect
    return [raw_column(c, dialect) for c in columns], [reader(c, dialect) for c in columns]


# How to read each column, per (table, column names, backend): building a reader asks the type
# for its result processor (~5 us a column).
_readers: dict[tuple[Table, tuple[str, ...], DumpSql], list[Callable[[Any], Any]]] = {}


def column_readers(
    conn: Connection, table: Table, names: tuple[str, ...]
) -> list[Callable[[Any], Any]]:
    key = (table, names, dump_sql(conn.dialect))
    reads = _readers.get(key)
    if reads is None:
        reads = _readers[key] = [reader(table.c[c], conn.dialect) for c in names]
    return reads


def compared_columns(table: Table, spec: TableSpec, compare: CompareSpec) -> tuple[str, ...]:
    ignored = set(spec.ignore) | (set(compare.ignore_everywhere) - set(spec.key))
    names = [c.name for c in table.columns if c.name not in ignored]
    # Key columns first, so a row's key is a prefix of the row.
    return tuple(spec.key) + tuple(n for n in names if n not in spec.key)


def reference_maps(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    wanted: set[str] | None = None,
    ids: Mapping[str, set[Any]] | None = None,
) -> dict[str, dict[Any, tuple[Any, ...]]]:
    """For each referenced table (of `wanted`, default all): surrogate id -> natural key; with
    `ids`, only for those ids of each table (a patch reads a few rows, not the whole table)."""
    if wanted is None:
        wanted = {ref for spec in compare.tables.values() for ref in spec.references.values()}
    maps: dict[str, dict[Any, tuple[Any, ...]]] = {}
    sql = dump_sql(conn.dialect)
    for ref in wanted:
        table = tables[ref]
        key = compare.for_table(ref).key
        pk = list(table.primary_key.columns)
        if not key or len(pk) != 1:
            continue
        key_columns = [table.c[k] for k in key]
        reads = column_readers(conn, table, tuple(key))

        def query(pk: Any = pk[0], key_columns: list[Any] = key_columns) -> Any:
            return select(pk, *read_raw(conn, key_columns)[0])

        some = ids.get(ref, set()) if ids is not None else None
        if some is not None:  # one statement compiled once, whatever the ids, where it can
            found = sql.rows_where_in(conn, ("ref-ids", table, tuple(key)), query, pk[0], some)
            if found is not None:
                maps[ref] = dict(_mapped_keys(found, reads))
                continue
        maps[ref] = {}
        for chunk in _chunks(some):
            if chunk is None:
                rows = execute(conn, ("refs", table, tuple(key)), query)
            else:
                rows = conn.execute(query().where(pk[0].in_(chunk)))
            maps[ref].update(_mapped_keys(rows, reads))
    return maps


def _mapped_keys(
    rows: Iterable[Any], reads: list[Callable[[Any], Any]]
) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    for row in rows:
        yield row[0], tuple(plain(f(v)) for f, v in zip(reads, row[1:], strict=True))


def _chunks(values: Iterable[Any] | None, size: int = 500) -> Iterator[list[Any] | None]:
    """`None` once (no filter), else the values in lists small enough for one IN (...)."""
    if values is None:
        yield None
        return
    ordered = sorted(values, key=repr)
    for i in range(0, len(ordered), size):
        yield ordered[i : i + size]


def value_converters(
    columns: tuple[str, ...],
    spec: TableSpec,
    refs: Mapping[str, dict[Any, tuple[Any, ...]]],
    reads: list[Callable[[Any], Any]],
) -> list[Callable[[Any], Any]]:
    """How the dump reads each column: the value as stored, exactly (references by natural
    key); the comparison spec's text and money rules apply when matching, not here
    (app/verify/state/match_form.py), so a write they would hide is still a change."""
    converters: list[Callable[[Any], Any]] = []
    for col, read in zip(columns, reads, strict=True):
        convert: Callable[[Any], Any]
        if col in spec.references and spec.references[col] in refs:
            mapping = refs[spec.references[col]]
            convert = partial(_mapped, mapping)
            if read is not plain_scalar:
                convert = partial(_read_then, read, convert)
        elif read is not plain_scalar:  # the column's type converts: read raw, tag what fails
            convert = partial(_read_exact, read, col in spec.money)
        elif col in spec.money:
            convert = _money_exact
        else:
            convert = plain
        converters.append(convert)
    return converters


def _mapped(mapping: Mapping[Any, Any], value: Any) -> Any:
    """A reference by its natural key (the referenced row's), else the value itself."""
    return mapping.get(value, plain(value))


def _read_then(read: Callable[[Any], Any], convert: Callable[[Any], Any], value: Any) -> Any:
    """Read a raw value by its column's type, then convert it (unreadable ones tagged)."""
    got = read(value)
    return got if isinstance(got, UnreadableValue) else convert(got)


def _read_exact(read: Callable[[Any], Any], money: bool, value: Any) -> Any:
    """A raw value read by its column's type; text its type reads as a number stays that text
    (StoredText): stored another way, it is another value."""
    got = read(value)
    if isinstance(got, UnreadableValue):
        return got
    out = _money_exact(got) if money else plain(got)
    if type(value) is str and type(out) in (int, float):
        return StoredText.of(value, out)
    return out


def _money_exact(value: Any) -> Any:
    """Money to the last digit, always a float (SQLite hands back 25800, PostgreSQL 25800.0:
    one value, one form, so dumps of both sort alike)."""
    out = plain(value)
    return float(out) if type(out) is int else out


def execute(conn: Connection, key: tuple[Any, ...], build: Callable[[], Any]) -> Iterable[Any]:
    """The rows of the parameterless statement `build` makes, read the backend's way (SQLite:
    from SQL text cached under `key`, on the DB-API cursor)."""
    return dump_sql(conn.dialect).execute(conn, key, build)


def row_identity(conn: Connection, table: Table) -> ColumnElement[int] | None:
    """What a patch finds a table's rows by (SQLite's rowid, PostgreSQL's integer key); None:
    the rows have none (a write there makes verify read the table whole)."""
    return dump_sql(conn.dialect).row_identity(table)


def rows_by_identity(
    conn: Connection, table: Table, columns: tuple[str, ...], ids: frozenset[int]
) -> list[tuple[Any, ...]]:
    """(identity, *raw values of `columns`) of the rows at `ids` that exist."""
    raw = [table.c[c] for c in columns]
    sql = dump_sql(conn.dialect)
    return sql.rows_by_identity(
        conn, ("rows", table, columns), table, lambda: read_raw(conn, raw)[0], ids
    )


def read_table(
    conn: Connection,
    table: Table,
    spec: TableSpec,
    compare: CompareSpec,
    refs: Mapping[str, dict[Any, tuple[Any, ...]]],
    *,
    index: bool = False,
) -> tuple[TableState, RowIndex | None]:
    """The whole table; with `index`, also which row each identity (`row_identity`) holds, to
    patch it later."""
    columns = compared_columns(table, spec, compare)
    reads = column_readers(conn, table, columns)
    converters = value_converters(columns, spec, refs, reads)
    identity = row_identity(conn, table) if index else None
    index = identity is not None

    def query() -> Any:
        raw = read_raw(conn, [table.c[c] for c in columns])[0]
        return select(*([identity] if identity is not None else []), *raw)

    by_rowid: dict[int, tuple[Any, ...]] = {}
    rows = []
    for raw in execute(conn, ("dump", table, columns, index), query):
        values = raw[1:] if index else raw
        row = tuple(f(v) for f, v in zip(converters, values, strict=True))
        rows.append(row)
        if index:
            by_rowid[raw[0]] = row
    rows.sort(key=repr)
    return TableState(table.name, columns, tuple(spec.key), tuple(rows)), (
        by_rowid if index else None
    )
