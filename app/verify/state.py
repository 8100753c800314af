"""A comparable snapshot of a database's state, following the environment's comparison spec."""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, insort_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import cached_property, partial
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, func, literal_column, select

from app.runtime.lru import LRU
from app.sdk.compare_spec import CompareSpec, TableSpec
from app.storage.meta import META_TABLE, Changes, seed_changes, tracked_changes
from app.verify.raw_values import UnreadableValue, plain_scalar, raw_column, reader

log = logging.getLogger("stategym.verify")


@dataclass(frozen=True)
class RowDelta:
    """How a patched table was made: `base` with the rows `removed` taken out and `added` put
    in (each sorted as `rows` is). Lets a diff against `base` look at those rows only."""

    base: TableState
    removed: tuple[tuple[Any, ...], ...]
    added: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class TableState:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # natural-key columns (a prefix of `columns`), () = match by content
    rows: tuple[tuple[Any, ...], ...]  # normalised, sorted
    # Provenance, not content: two states with equal rows are equal however they were made.
    delta: RowDelta | None = field(default=None, compare=False, repr=False)

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return row[: len(self.key)]

    @cached_property
    def keys(self) -> frozenset[tuple[Any, ...]] | None:
        """The set of natural keys when every row has its own (None: some key is shared)."""
        width = len(self.key)
        keys = frozenset(row[:width] for row in self.rows)
        return keys if len(keys) == len(self.rows) else None

    # Built once per state, not per diff: a snapshot's and a gold's tables are diffed against
    # every verify's final state (cached_property writes the instance dict: fine when frozen).
    @cached_property
    def row_set(self) -> frozenset[tuple[Any, ...]]:
        return frozenset(self.rows)


DbState = Mapping[str, TableState]


def _text(value: Any) -> Any:
    return " ".join(str(value).split()).casefold() if value is not None else None


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return plain_scalar(value)


def _money(value: Any) -> Any:
    # Rounded to cents for content matching; keyed rows also compare within the tolerance.
    if value is None or isinstance(value, UnreadableValue):
        return value
    try:
        money = round(float(value), 2)
    except (ValueError, TypeError, OverflowError):  # text or bytes an agent wrote
        return UnreadableValue.of("money", value)
    return plain_scalar(money)


def _read_raw(conn: Connection, columns: list[Any]) -> tuple[list[Any], list[Callable[[Any], Any]]]:
    """What to select for `columns`, and how to read each value without raising
    (app/verify/raw_values.py: an agent may have written anything into any SQLite column)."""
    dialect = conn.dialect
    return [raw_column(c, dialect) for c in columns], [reader(c, dialect) for c in columns]


def compared_columns(table: Table, spec: TableSpec, compare: CompareSpec) -> tuple[str, ...]:
    ignored = set(spec.ignore) | (set(compare.ignore_everywhere) - set(spec.key))
    names = [c.name for c in table.columns if c.name not in ignored]
    # Key columns first, so a row's key is a prefix of the row.
    return tuple(spec.key) + tuple(n for n in names if n not in spec.key)


def _reference_maps(
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
    for ref in wanted:
        table = tables[ref]
        key = compare.for_table(ref).key
        pk = list(table.primary_key.columns)
        if not key or len(pk) != 1:
            continue
        key_columns = [table.c[k] for k in key]
        reads = [reader(c, conn.dialect) for c in key_columns]

        def query(pk: Any = pk[0], key_columns: list[Any] = key_columns) -> Any:
            return select(pk, *_read_raw(conn, key_columns)[0])

        maps[ref] = {}
        for chunk in _chunks(ids.get(ref, set()) if ids is not None else None):
            if chunk is None:
                rows = _execute(conn, ("refs", table, tuple(key)), query)
            else:
                rows = _execute_in(conn, ("refs", table, tuple(key)), query, pk[0], chunk)
            maps[ref].update(
                (row[0], tuple(_plain(f(v)) for f, v in zip(reads, row[1:], strict=True)))
                for row in rows
            )
    return maps


def _chunks(values: Iterable[Any] | None, size: int = 500) -> Iterator[list[Any] | None]:
    """`None` once (no filter), else the values in lists small enough for one IN (...)."""
    if values is None:
        yield None
        return
    ordered = sorted(values, key=repr)
    for i in range(0, len(ordered), size):
        yield ordered[i : i + size]


def _converters(
    columns: tuple[str, ...],
    spec: TableSpec,
    refs: Mapping[str, dict[Any, tuple[Any, ...]]],
    reads: list[Callable[[Any], Any]],
) -> list[Callable[[Any], Any]]:
    converters: list[Callable[[Any], Any]] = []
    for col, read in zip(columns, reads, strict=True):
        convert: Callable[[Any], Any]
        if col in spec.references and spec.references[col] in refs:
            mapping = refs[spec.references[col]]
            convert = partial(_mapped, mapping)
        elif col in spec.text:
            convert = _text
        elif col in spec.money:
            convert = _money
        else:
            convert = _plain
        if read is not plain_scalar:  # the column's type converts: read raw, tag what fails
            convert = partial(_read_then, read, convert)
        converters.append(convert)
    return converters


def _mapped(mapping: Mapping[Any, Any], value: Any) -> Any:
    """A reference by its natural key (the referenced row's), else the value itself."""
    return mapping.get(value, _plain(value))


def _read_then(read: Callable[[Any], Any], convert: Callable[[Any], Any], value: Any) -> Any:
    """Read a raw value by its column's type, then normalise it (unreadable ones tagged)."""
    return _unless_unreadable(read(value), convert)


def _unless_unreadable(value: Any, convert: Callable[[Any], Any]) -> Any:
    return value if isinstance(value, UnreadableValue) else convert(value)


# SQL text of the dump's parameterless statements, per (kind, table objects, columns): on SQLite
# they run on the DB-API cursor, with no statement built, cache-keyed and compiled per verify
# (~41 % of a verify before, bench/README.md). Only statements without bound parameters are
# cached; their values come back as SQLAlchemy returns them, as every column that SQLAlchemy
# would convert is selected raw (`raw_column`), and the rest it passes through on SQLite.
_sql_text: dict[tuple[Any, ...], str] = {}


def _execute(
    conn: Connection, key: tuple[Any, ...], build: Callable[[], Any]
) -> Iterable[tuple[Any, ...]]:
    """The rows of the statement `build` makes (built only when its SQL is not cached)."""
    if conn.dialect.name != "sqlite":
        return conn.execute(build())
    sql = _sql_text.get(key)
    if sql is None:
        stmt = build()
        compiled = stmt.compile(dialect=conn.dialect)
        if compiled.params:  # never expected: fall back rather than run it without them
            return conn.execute(stmt)
        sql = _sql_text[key] = str(compiled)
    driver = conn.connection.driver_connection
    assert driver is not None
    rows: list[Any] = driver.execute(sql).fetchall()
    return rows


def _execute_in(
    conn: Connection,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    column: ColumnElement[Any],
    values: list[Any] | None,
) -> Iterable[tuple[Any, ...]]:
    """The rows of `build()` whose `column` is one of `values`; on SQLite the cached SQL text
    of `build()` with a `WHERE column IN (?, ...)` of the values' count (no statement built)."""
    values = values or []
    if conn.dialect.name != "sqlite":
        return conn.execute(build().where(column.in_(values)))
    sql = _sql_text.get(("in", *key))
    if sql is None:
        stmt = build()
        compiled = stmt.compile(dialect=conn.dialect)
        if compiled.params:  # never expected: fall back rather than run it without them
            return conn.execute(stmt.where(column.in_(values)))
        match = column.compile(dialect=conn.dialect)
        sql = _sql_text[("in", *key)] = f"{compiled} WHERE {match} IN "
    driver = conn.connection.driver_connection
    assert driver is not None
    marks = ", ".join("?" * len(values))
    rows: list[Any] = driver.execute(f"{sql}({marks})", values).fetchall()
    return rows


def _has_rowid(table: Table) -> bool:
    return table.dialect_options["sqlite"].get("with_rowid", True) is not False


# `_rowid_` rather than `rowid`: a column may be named rowid, which would shadow it.
_ROWID: ColumnElement[int] = literal_column("_rowid_")
RowIndex = Mapping[int, tuple[Any, ...]]  # rowid -> normalised row, of a pristine dump


def _dump_table(
    conn: Connection,
    table: Table,
    spec: TableSpec,
    compare: CompareSpec,
    refs: Mapping[str, dict[Any, tuple[Any, ...]]],
    *,
    index: bool = False,
) -> tuple[TableState, RowIndex | None]:
    """The whole table; with `index`, also which row each rowid holds (to patch it later)."""
    columns = compared_columns(table, spec, compare)
    reads = [reader(table.c[c], conn.dialect) for c in columns]
    converters = _converters(columns, spec, refs, reads)
    index = index and _has_rowid(table)

    def query() -> Any:
        raw = _read_raw(conn, [table.c[c] for c in columns])[0]
        return select(*([_ROWID] if index else []), *raw)

    by_rowid: dict[int, tuple[Any, ...]] = {}
    rows = []
    for raw in _execute(conn, ("dump", table, columns, index), query):
        values = raw[1:] if index else raw
        row = tuple(f(v) for f, v in zip(converters, values, strict=True))
        rows.append(row)
        if index:
            by_rowid[raw[0]] = row
    rows.sort(key=repr)
    return TableState(table.name, columns, tuple(spec.key), tuple(rows)), (
        by_rowid if index else None
    )


def _patched_table(
    conn: Connection,
    tables: Mapping[str, Table],
    name: str,
    compare: CompareSpec,
    base: TableState,
    by_rowid: RowIndex,
    rowids: frozenset[int],
    *,
    index: bool = False,
) -> tuple[TableState, RowIndex | None]:
    """`base` (the snapshot's dump) with the rows at `rowids` taken out and their current
    contents read back in: a few indexed reads instead of the whole table. With `index`, also
    which row each rowid now holds (`by_rowid` updated, for a dump kept to patch later)."""
    table, spec = tables[name], compare.for_table(name)
    rows = list(base.rows)
    removed = []
    for rowid in rowids:
        old = by_rowid.get(rowid)
        if old is not None:  # rows are sorted by repr, and equal reprs are equal rows
            del rows[bisect_left(rows, repr(old), key=repr)]
            removed.append(old)
    raw_rows: list[Any] = []
    raw, reads = _read_raw(conn, [table.c[c] for c in base.columns])

    def query() -> Any:
        return select(_ROWID, *raw)

    for chunk in _chunks(rowids):
        raw_rows.extend(_execute_in(conn, ("rows", table, base.columns), query, _ROWID, chunk))
    ids: dict[str, set[Any]] = {}
    for position, column in enumerate(base.columns, start=1):
        target = spec.references.get(column)
        if target is not None:
            ids.setdefault(target, set()).update(r[position] for r in raw_rows)
    refs = _reference_maps(conn, tables, compare, set(ids), ids)
    converters = _converters(base.columns, spec, refs, reads)
    new_index = None
    if index:
        new_index = {k: v for k, v in by_rowid.items() if k not in rowids}
    added = []
    for raw in raw_rows:
        row = tuple(f(v) for f, v in zip(converters, raw[1:], strict=True))
        insort_right(rows, row, key=repr)
        added.append(row)
        if new_index is not None:
            new_index[raw[0]] = row
    delta = RowDelta(base, tuple(sorted(removed, key=repr)), tuple(sorted(added, key=repr)))
    return TableState(base.name, base.columns, base.key, tuple(rows), delta), new_index


@dataclass(frozen=True)
class _Pristine:
    """The dump of a snapshot clone nothing has written yet, and its rowid indexes."""

    compare: CompareSpec
    state: DbState
    indexes: Mapping[str, RowIndex]


# Dumps of pristine snapshot clones, by (template:snapshot, compare spec): a database that tracks
# its changes (app.storage.meta) reuses these for every table neither it nor its references wrote,
# and patches them with the rows it wrote.
_pristine: LRU[tuple[str, int], _Pristine] = LRU(256)
_pristine_lock = threading.Lock()
# Past this share of a table's rows, reading the table whole beats patching it row by row.
_PATCH_SHARE = 0.25


def _rekeyed(compare: CompareSpec, names: list[str], changed: frozenset[str]) -> set[str]:
    """Tables referencing a table whose references may now resolve differently ("#key")."""
    return {
        name
        for name in names
        if any(f"{ref}#key" in changed for ref in compare.for_table(name).references.values())
    }


def dump_state(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec, *, reuse: bool = True
) -> DbState:
    """Every compared table's rows, normalised and sorted (order-insensitive comparison).

    With `reuse` (the default) a database that tracks its changes is dumped by patching its
    snapshot's dump, and a pristine snapshot clone by patching its template's dump with the rows
    its seed wrote (app.storage.meta.seed_changes); `reuse=False` reads every table whole (what
    tests compare it against).
    """
    names = [n for n in sorted(tables) if compare.for_table(n).compared]
    tracked = tracked_changes(conn, tables) if reuse else None
    if tracked is None:
        return _dump_all(conn, tables, compare, names, None)
    pristine = _pristine_of(tracked.snapshot, compare)
    if pristine is not None:
        patched = _patch(conn, tables, compare, names, pristine, tracked, index=False)
        if patched is not None:
            return patched.state
    elif not tracked.tables:
        seeded = _seeded_from_template(conn, tables, compare, names, tracked.snapshot)
        if seeded is not None:
            return seeded
    return _dump_all(conn, tables, compare, names, tracked if pristine is None else None)


def remember_template_dump(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec, template: str
) -> None:
    """Dump a template database (`conn`, fingerprint `template`) whole, with rowid indexes, and
    keep it: the snapshots built from it are then dumped by patching it with their seed's rows."""
    if _pristine_of(f"{template}:", compare) is not None:
        return
    names = [n for n in sorted(tables) if compare.for_table(n).compared]
    _dump_all(conn, tables, compare, names, Changes(f"{template}:", frozenset(), {}))


def _pristine_of(snapshot: str, compare: CompareSpec) -> _Pristine | None:
    with _pristine_lock:
        entry = _pristine.get((snapshot, id(compare)))
    return entry if entry is not None and entry.compare is compare else None


def _seeded_from_template(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    snapshot: str,
) -> DbState | None:
    """A pristine snapshot clone's dump from its template's (kept by remember_template_dump),
    patched with the rows its seed wrote; kept as the snapshot's own. None when either is
    unknown (the caller reads every table)."""
    meta: dict[str, str] = dict(
        conn.exec_driver_sql(f"SELECT key, value FROM {META_TABLE}").fetchall()
    )
    seed = seed_changes(meta)
    base = _pristine_of(seed.snapshot, compare) if seed is not None else None
    if seed is None or base is None:
        return None
    patched = _patch(conn, tables, compare, names, base, seed, index=True)
    if patched is None:
        return None
    with _pristine_lock:
        _pristine.put((snapshot, id(compare)), patched)
    return patched.state


def _patch(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    pristine: _Pristine,
    changes: Changes,
    *,
    index: bool,
) -> _Pristine | None:
    """`pristine` patched with the rows `changes` says were written (with rowid indexes when
    `index`), or None when the row counts disagree (a write the tracking missed)."""
    changed, rows = changes.tables, changes.rows or {}
    rekeyed = _rekeyed(compare, names, changed)
    patch: dict[str, frozenset[int]] = {}
    whole: set[str] = set(rekeyed)
    for name in names:
        if name not in changed or name in rekeyed:
            continue
        base_index, written = pristine.indexes.get(name), rows.get(name)
        base_rows = len(pristine.state[name].rows)
        if (
            base_index is None
            or written is None
            or len(written) > max(64, base_rows * _PATCH_SHARE)
        ):
            whole.add(name)
        else:
            patch[name] = written
    wanted = {ref for n in whole for ref in compare.for_table(n).references.values()}
    refs = _reference_maps(conn, tables, compare, wanted)
    state: dict[str, TableState] = {}
    indexes: dict[str, RowIndex] = {}
    for name in names:
        table_index: RowIndex | None
        if name in whole:
            spec = compare.for_table(name)
            state[name], table_index = _dump_table(
                conn, tables[name], spec, compare, refs, index=index
            )
        elif name in patch:
            state[name], table_index = _patched_table(
                conn,
                tables,
                name,
                compare,
                pristine.state[name],
                pristine.indexes[name],
                patch[name],
                index=index,
            )
        else:
            state[name], table_index = pristine.state[name], pristine.indexes.get(name)
        if table_index is not None:
            indexes[name] = table_index
    disagree = _miscounted(conn, tables, [n for n in names if n not in whole], state)
    if disagree:
        # A write the tracking missed (it records every path we know of; this is the backstop):
        # the reused dumps cannot be trusted, so every table is read whole.
        log.warning("change tracking missed writes to %s; reading every table", disagree)
        return None
    return _Pristine(compare, state, indexes)


def _miscounted(
    conn: Connection, tables: Mapping[str, Table], names: list[str], state: DbState
) -> list[str]:
    """Tables whose reused or patched dump holds another number of rows than the table.

    One statement of count(*) subqueries: ~0.1 ms for retail's 8,000 rows (docs/verification.md).
    """
    if not names:
        return []

    def counts() -> Any:
        return select(
            *(select(func.count()).select_from(tables[n]).scalar_subquery() for n in names)
        )

    (row,) = list(_execute(conn, ("count", *(tables[n] for n in names)), counts))
    return [n for n, count in zip(names, row, strict=True) if count != len(state[n].rows)]


def _dump_all(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    tracked: Changes | None,
) -> DbState:
    """Every table read whole; a pristine clone's dump is kept (with rowid indexes) for reuse."""
    pristine = tracked is not None and not tracked.tables
    refs = _reference_maps(conn, tables, compare)
    state: dict[str, TableState] = {}
    indexes: dict[str, RowIndex] = {}
    for name in names:
        spec = compare.for_table(name)
        state[name], index = _dump_table(conn, tables[name], spec, compare, refs, index=pristine)
        if index is not None:
            indexes[name] = index
    if pristine and tracked is not None:
        with _pristine_lock:
            _pristine.put((tracked.snapshot, id(compare)), _Pristine(compare, state, indexes))
    return state
