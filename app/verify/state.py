"""A comparable snapshot of a database's state, following the environment's comparison spec."""

from __future__ import annotations

import json
import logging
import threading
from bisect import bisect_left, insort_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import cached_property, partial
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, bindparam, func, literal_column, select

from app.runtime.lru import LRU
from app.sdk.compare_spec import CompareSpec, TableSpec
from app.storage.meta import (
    META_TABLE,
    Changes,
    reset_change_tracking,
    seed_changes,
    tracked_changes,
)
from app.verify.raw_values import UnreadableValue, plain_scalar, raw_column, reader

log = logging.getLogger("stategym.verify")


Row = tuple[Any, ...]


@dataclass(frozen=True)
class Patch:
    """How a patched dump was made: `base` (a table read whole) less `removed`, plus `added`.
    Two dumps patched from one base differ only among those rows (app/verify/diff.py)."""

    base: TableState
    removed: tuple[Row, ...]
    added: tuple[Row, ...]


@dataclass(frozen=True)
class TableState:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # natural-key columns (a prefix of `columns`), () = match by content
    rows: tuple[Row, ...]  # normalised, sorted (by repr)
    origin: Patch | None = field(default=None, compare=False, repr=False)

    def key_of(self, row: Row) -> tuple[Any, ...]:
        return row[: len(self.key)]

    # Per table read whole, once (cached): what a diff of two dumps patched from it needs.
    @cached_property
    def row_counts(self) -> Counter[Row]:
        return Counter(self.rows)

    @cached_property
    def key_counts(self) -> Counter[tuple[Any, ...]]:
        width = len(self.key)
        return Counter(row[:width] for row in self.rows)

    @cached_property
    def repeated_rows(self) -> int:
        """How many distinct rows appear more than once."""
        return sum(1 for n in self.row_counts.values() if n > 1)

    @cached_property
    def repeated_keys(self) -> int:
        return sum(1 for n in self.key_counts.values() if n > 1)


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


# How to read each column, per (table, column names), on SQLite (whose dialect is one per
# process): building a reader asks the type for its result processor (~5 us a column).
_sqlite_readers: dict[tuple[Table, tuple[str, ...]], list[Callable[[Any], Any]]] = {}


def _readers(conn: Connection, table: Table, names: tuple[str, ...]) -> list[Callable[[Any], Any]]:
    if conn.dialect.name != "sqlite":
        return [reader(table.c[c], conn.dialect) for c in names]
    reads = _sqlite_readers.get((table, names))
    if reads is None:
        reads = _sqlite_readers[(table, names)] = [reader(table.c[c], conn.dialect) for c in names]
    return reads


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
        reads = _readers(conn, table, tuple(key))

        def query(pk: Any = pk[0], key_columns: list[Any] = key_columns) -> Any:
            return select(pk, *_read_raw(conn, key_columns)[0])

        some = ids.get(ref, set()) if ids is not None else None
        param = _json_array(some) if some is not None and conn.dialect.name == "sqlite" else None
        if param is not None:  # one statement compiled once, whatever the ids

            def query_ids(pk: Any = pk[0], query: Any = query) -> Any:
                return query().where(pk.in_(_JSON_VALUES))

            rows = _execute(conn, ("ref-ids", table, tuple(key)), query_ids, (param,))
            maps[ref] = dict(_mapped_keys(rows, reads))
            continue
        maps[ref] = {}
        for chunk in _chunks(some):
            if chunk is None:
                rows = _execute(conn, ("refs", table, tuple(key)), query)
            else:
                rows = conn.execute(query().where(pk[0].in_(chunk)))
            maps[ref].update(_mapped_keys(rows, reads))
    return maps


def _mapped_keys(
    rows: Iterable[Any], reads: list[Callable[[Any], Any]]
) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    for row in rows:
        yield row[0], tuple(_plain(f(v)) for f, v in zip(reads, row[1:], strict=True))


# `IN (SELECT value FROM json_each(?))`: a set of ids as one JSON parameter, so the statement's
# SQL is the same whatever the ids and is compiled once (an `IN (?, ?, ...)` is rebuilt and
# recompiled for every set: ~0.4 ms each, several per patched dump).
_JSON_VALUES = (
    select(literal_column("value")).select_from(func.json_each(bindparam("ids"))).scalar_subquery()
)
_INT64 = (-(2**63), 2**63)


def _json_array(values: Iterable[Any]) -> str | None:
    """`values` as a JSON array that json_each reads back as the same values (SQLite only), or
    None when some value would not survive the trip (a float, bytes, a huge int: what an agent
    may have written into a reference column): the caller then binds them as they are."""
    out: list[int | str] = []
    for value in values:
        if type(value) is int and _INT64[0] <= value < _INT64[1]:
            out.append(value)
        elif type(value) is str and value.isascii() and "\x00" not in value:
            out.append(value)
        else:
            return None
    return json.dumps(out)


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
    conn: Connection,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    params: tuple[Any, ...] = (),
) -> Iterable[tuple[Any, ...]]:
    """The rows of the statement `build` makes (built only when its SQL is not cached);
    `params`: the values of its bound parameters, in order (`bindparam("ids")` only)."""
    if conn.dialect.name != "sqlite":
        assert not params, "JSON-array parameters are read by SQLite's json_each only"
        return conn.execute(build())
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
    reads = _readers(conn, table, columns)
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
) -> tuple[TableState, RowIndex]:
    """`base` (the snapshot's dump) with the rows at `rowids` taken out and their current
    contents read back in: a few indexed reads instead of the whole table. Also the patched
    table's rowid index (`by_rowid` with those rowids rewritten)."""
    table, spec = tables[name], compare.for_table(name)
    rows = list(base.rows)
    removed = []
    for rowid in rowids:
        old = by_rowid.get(rowid)
        if old is not None:  # rows are sorted by repr, and equal reprs are equal rows
            del rows[bisect_left(rows, repr(old), key=repr)]
            removed.append(old)
    columns = [table.c[c] for c in base.columns]
    reads = _readers(conn, table, base.columns)

    def query() -> Any:
        return select(_ROWID, *_read_raw(conn, columns)[0]).where(_ROWID.in_(_JSON_VALUES))

    param = json.dumps(sorted(rowids))  # rowids are integers: always one JSON parameter
    raw_rows = list(_execute(conn, ("rows", table, base.columns), query, (param,)))
    ids: dict[str, set[Any]] = {}
    for position, column in enumerate(base.columns, 1):
        target = spec.references.get(column)
        if target is not None:
            ids.setdefault(target, set()).update(r[position] for r in raw_rows)
    refs = _reference_maps(conn, tables, compare, set(ids), ids)
    converters = _converters(base.columns, spec, refs, reads)
    now = {
        raw[0]: tuple(f(v) for f, v in zip(converters, raw[1:], strict=True)) for raw in raw_rows
    }
    added = list(now.values())
    for row in added:
        insort_right(rows, row, key=repr)
    origin = Patch(base, tuple(removed), tuple(added))
    if base.origin is not None:  # a patch of a patch: one patch of the table read whole
        first = base.origin
        origin = Patch(first.base, first.removed + origin.removed, first.added + origin.added)
    patched = TableState(base.name, base.columns, base.key, tuple(rows), origin)
    return patched, _Rewritten(by_rowid, now, rowids)


class _Rewritten(Mapping[int, Row]):
    """A rowid index with some rowids rewritten: `now` holds those that still exist."""

    def __init__(self, base: RowIndex, now: dict[int, Row], rewritten: frozenset[int]):
        self._base, self._now, self._rewritten = base, now, rewritten

    def __getitem__(self, rowid: int) -> Row:
        if rowid in self._rewritten:
            return self._now[rowid]
        return self._base[rowid]

    def __iter__(self) -> Iterator[int]:
        yield from self._now
        yield from (r for r in self._base if r not in self._rewritten)

    def __len__(self) -> int:
        return sum(1 for _ in self)


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
    snapshot's dump; `reuse=False` reads every table whole (what tests compare it against).
    """
    return _dump(conn, tables, compare, reuse=reuse)[0]


def _dump(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    *,
    reuse: bool = True,
    indexed: bool = False,
) -> tuple[DbState, dict[str, RowIndex]]:
    """`dump_state`, and with `indexed` the rowid index of every table that has rowids."""
    names = [n for n in sorted(tables) if compare.for_table(n).compared]
    tracked = tracked_changes(conn, tables) if reuse else None
    pristine: _Pristine | None = None
    if tracked is not None:
        with _pristine_lock:
            entry = _pristine.get((tracked.snapshot, id(compare)))
        if entry is not None and entry.compare is compare:
            pristine = entry
    if pristine is None:
        if tracked is not None and not tracked.tables:
            seeded = _seeded_from_template(conn, tables, compare, names, tracked.snapshot)
            if seeded is not None:
                return seeded
        return _dump_all(conn, tables, compare, names, tracked, indexed=indexed)
    assert tracked is not None  # a pristine entry is only found for a tracked database
    patched = _patch(conn, tables, compare, names, pristine, tracked, indexed=indexed)
    if patched is None:
        # A write the tracking missed (it records every path we know of; this is the backstop):
        # the reused dumps cannot be trusted, so every table is read whole.
        return _dump_all(conn, tables, compare, names, None, indexed=indexed)
    return patched


def remember_template_dump(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec, template: str
) -> None:
    """Dump a template database (`conn`, fingerprint `template`) whole, with rowid indexes, and
    keep it: the snapshots built from it are then dumped by patching it with their seed's rows
    (app.storage.meta.seed_changes) instead of reading every base row once per task."""
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
) -> tuple[DbState, dict[str, RowIndex]] | None:
    """A pristine snapshot clone's dump: its template's (kept by remember_template_dump) patched
    with the rows its seed wrote, then kept as the snapshot's own. None when either is unknown
    (the caller reads every table)."""
    meta: dict[str, str] = dict(
        conn.exec_driver_sql(f"SELECT key, value FROM {META_TABLE}").fetchall()
    )
    seed = seed_changes(meta)
    base = _pristine_of(seed.snapshot, compare) if seed is not None else None
    if seed is None or base is None:
        return None
    patched = _patch(conn, tables, compare, names, base, seed, indexed=True)
    if patched is None:
        return None
    with _pristine_lock:
        _pristine.put((snapshot, id(compare)), _Pristine(compare, *patched))
    return patched


def _patch(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    pristine: _Pristine,
    changes: Changes,
    *,
    indexed: bool,
) -> tuple[DbState, dict[str, RowIndex]] | None:
    """`pristine` patched with the rows `changes` says were written, or None when the row
    counts disagree (a write the tracking missed)."""
    changed, rows = changes.tables, changes.rows or {}
    rekeyed = _rekeyed(compare, names, changed)
    patch: dict[str, frozenset[int]] = {}
    whole: set[str] = set(rekeyed)
    for name in names:
        if name not in changed or name in rekeyed:
            continue
        index, written = pristine.indexes.get(name), rows.get(name)
        base_rows = len(pristine.state[name].rows)
        if index is None or written is None or len(written) > max(64, base_rows * _PATCH_SHARE):
            whole.add(name)
        else:
            patch[name] = written
    wanted = {ref for n in whole for ref in compare.for_table(n).references.values()}
    refs = _reference_maps(conn, tables, compare, wanted)
    state: dict[str, TableState] = {}
    indexes: dict[str, RowIndex] = {}
    for name in names:
        found: RowIndex | None
        if name in whole:
            spec = compare.for_table(name)
            state[name], found = _dump_table(conn, tables[name], spec, compare, refs, index=indexed)
        elif name in patch:
            state[name], found = _patched_table(
                conn,
                tables,
                name,
                compare,
                pristine.state[name],
                pristine.indexes[name],
                patch[name],
            )
        else:
            state[name], found = pristine.state[name], pristine.indexes.get(name)
        if found is not None:
            indexes[name] = found
    disagree = _miscounted(conn, tables, [n for n in names if n not in whole], state)
    if disagree:
        log.warning("change tracking missed writes to %s; reading every table", disagree)
        return None
    return state, indexes


def rebase(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec, snapshot: str
) -> DbState:
    """Dump a database that tracks its rows' changes (SQLite), then make that dump the
    pristine dump of a new snapshot `snapshot`: the change records are cleared and the database
    renamed, so later dumps of it (and of its clones) patch this dump with only what is written
    from now on. For a state many dumps start from (a generated task's seeded state: the gold
    and its second run write a few rows of it, app/taskgen/gold_run.py). In the caller's
    transaction, which must commit for the new tracking to hold."""
    tracked = tracked_changes(conn, tables)
    if tracked is None or tracked.rows is None:
        raise ValueError("rebase needs a database that tracks the rows it writes")
    state, indexes = _dump(conn, tables, compare, indexed=True)
    key = reset_change_tracking(conn, snapshot)
    with _pristine_lock:
        _pristine.put((key, id(compare)), _Pristine(compare, state, indexes))
    return state


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
    *,
    indexed: bool = False,
) -> tuple[DbState, dict[str, RowIndex]]:
    """Every table read whole; a pristine clone's dump is kept (with rowid indexes) for reuse."""
    pristine = tracked is not None and not tracked.tables
    refs = _reference_maps(conn, tables, compare)
    state: dict[str, TableState] = {}
    indexes: dict[str, RowIndex] = {}
    for name in names:
        spec = compare.for_table(name)
        state[name], index = _dump_table(
            conn, tables[name], spec, compare, refs, index=pristine or indexed
        )
        if index is not None:
            indexes[name] = index
    if pristine and tracked is not None:
        with _pristine_lock:
            _pristine.put((tracked.snapshot, id(compare)), _Pristine(compare, state, indexes))
    return state, indexes
