"""Dumps patched, not read whole: a tracked database's dump is its snapshot's (kept in memory)
with the rows it wrote read back in. docs/verification.md explains why this equals a whole read."""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, func, select

from app.core.lru import LRU
from app.sdk.compare_spec import CompareSpec
from app.storage.dump_sql import dump_sql
from app.storage.meta import Changes
from app.verify.state import table_reads
from app.verify.state.table_state import (
    ENTRY_BYTES,
    INDEX_ENTRY_BYTES,
    DbState,
    Patch,
    Row,
    RowIndex,
    TableState,
    state_bytes,
)

log = logging.getLogger("stategym.verify")


def _referenced_ids(
    compare: CompareSpec, name: str, columns: tuple[str, ...], raw_rows: list[tuple[Any, ...]]
) -> dict[str, set[Any]]:
    """Per referenced table, the ids `raw_rows` (identity first, then `columns`) refer to."""
    spec = compare.for_table(name)
    ids: dict[str, set[Any]] = {}
    for position, column in enumerate(columns, 1):
        target = spec.references.get(column)
        if target is not None:
            ids.setdefault(target, set()).update(r[position] for r in raw_rows)
    return ids


def _patched_table(
    conn: Connection,
    tables: Mapping[str, Table],
    name: str,
    compare: CompareSpec,
    base: TableState,
    by_rowid: RowIndex,
    rowids: frozenset[int],
    raw_rows: list[tuple[Any, ...]],
    refs: Mapping[str, dict[Any, tuple[Any, ...]]],
) -> tuple[TableState, RowIndex]:
    """`base` (the snapshot's dump) with the rows at `rowids` taken out and their current
    contents (`raw_rows`, read by identity) put in: a few indexed reads instead of the whole
    table. Also the patched table's rowid index (`by_rowid` with those rowids rewritten).
    `refs` resolves at least every id the rows refer to."""
    table, spec = tables[name], compare.for_table(name)
    # Rows are sorted by repr; bisected on the base's reprs (kept beside the rows), one repr per
    # row patched in or out, not one per row compared (~10 per bisection of a large table).
    rows, keys = list(base.rows), list(base.sort_keys)
    removed = []
    for rowid in rowids:
        old = by_rowid.get(rowid)
        if old is not None:  # equal reprs are equal rows: any of them is the one to take out
            at = bisect_left(keys, repr(old))
            del rows[at], keys[at]
            removed.append(old)
    reads = table_reads.column_readers(conn, table, base.columns)
    converters = table_reads.value_converters(base.columns, spec, refs, reads)
    now = {
        raw[0]: tuple(f(v) for f, v in zip(converters, raw[1:], strict=True)) for raw in raw_rows
    }
    added = list(now.values())
    for row in added:
        key = repr(row)
        at = bisect_right(keys, key)
        rows.insert(at, row)
        keys.insert(at, key)
    origin = Patch(base, tuple(removed), tuple(added))
    if base.origin is not None:  # a patch of a patch: one patch of the table read whole
        first = base.origin
        origin = Patch(first.base, first.removed + origin.removed, first.added + origin.added)
    patched = TableState(base.name, base.columns, base.key, tuple(rows), origin, tuple(keys))
    return patched, _Rewritten(by_rowid, now, rowids)


class _Rewritten(Mapping[int, Row]):
    """A rowid index with some rowids rewritten: `now` holds those that still exist."""

    def __init__(self, base: RowIndex, now: dict[int, Row], rewritten: frozenset[int]):
        self._base, self._now, self._rewritten = base, now, rewritten
        self._len: int | None = None

    def __getitem__(self, rowid: int) -> Row:
        if rowid in self._rewritten:
            return self._now[rowid]
        return self._base[rowid]

    def __iter__(self) -> Iterator[int]:
        yield from self._now
        yield from (r for r in self._base if r not in self._rewritten)

    def __len__(self) -> int:
        # `now` holds the rewritten rowids that still exist; the base's others are kept. Counted
        # from the few rewritten rowids, not by walking every row (a cache weighs each entry).
        if self._len is None:
            gone = sum(1 for r in self._rewritten if r in self._base)
            self._len = len(self._base) - gone + len(self._now)
        return self._len


@dataclass(frozen=True)
class Pristine:
    """The dump of a snapshot clone nothing has written yet, and its rowid indexes."""

    compare: CompareSpec
    state: DbState
    indexes: Mapping[str, RowIndex]
    snapshot: str = ""  # its key in the cache
    # What keeping it costs beyond the dump it was patched from (a snapshot's: its template's,
    # whose tables and indexes it shares), weighed once when it is remembered.
    bytes: int = 0


def _own_entries(index: RowIndex) -> int:
    """The index entries an index holds itself (a patched one: its rewritten rows only)."""
    return len(index._now) if isinstance(index, _Rewritten) else len(index)


def _weight(state: DbState, indexes: Mapping[str, RowIndex], over: Pristine | None) -> int:
    """ENTRY_BYTES plus the rows and index entries of `state` that `over` does not hold."""
    shared = frozenset(id(t) for t in over.state.values()) if over is not None else frozenset()
    own = [
        index
        for name, index in indexes.items()
        if over is None or over.indexes.get(name) is not index
    ]
    entries = sum(_own_entries(index) for index in own)
    return ENTRY_BYTES + state_bytes(state, shared) + INDEX_ENTRY_BYTES * entries


# Dumps of pristine snapshot clones, by (template:snapshot, compare spec): a database that tracks
# its changes (app.storage.meta) reuses these for every table neither it nor its references wrote,
# and patches them with the rows it wrote. A snapshot's entry is weighed without its template's
# tables (kept once, by the template's entry): 128 MiB held 157 retail snapshots when each was
# weighed as a whole copy, while the gold cache kept 512 (bench/history/cold_path.md, "Revisited
# tasks").
def _pristine_bytes(entry: Pristine) -> int:
    return entry.bytes


_pristine: LRU[tuple[str, int], Pristine] = LRU(256, max_bytes=128 * 2**20, size_of=_pristine_bytes)
_pristine_lock = threading.Lock()
# Past this share of a table's rows, reading the table whole beats patching it row by row.
_PATCH_SHARE = 0.25


def keep_at_most(capacity: int, max_bytes: int) -> None:
    """How many pristine dumps, and how many bytes of them, the process keeps
    (`pristine_cache_size`, `pristine_cache_mb`; one cache per process, as a worker serves one
    environment)."""
    with _pristine_lock:
        _pristine.capacity = capacity
        _pristine.max_bytes = max_bytes
        _pristine.shrink()


def remembered(snapshot: str, compare: CompareSpec) -> Pristine | None:
    """The pristine dump kept for `snapshot` under `compare`, if any."""
    with _pristine_lock:
        entry = _pristine.get((snapshot, id(compare)))
    # id() of a collected spec may be reused: the entry holds its spec, so compare identity.
    return entry if entry is not None and entry.compare is compare else None


def remember(
    snapshot: str,
    compare: CompareSpec,
    state: DbState,
    indexes: Mapping[str, RowIndex],
    *,
    over: Pristine | None = None,
) -> None:
    """Keep a pristine dump; `over`: the kept dump it was patched from (its shared tables and
    indexes are not weighed again)."""
    entry = Pristine(compare, state, indexes, snapshot, _weight(state, indexes, over))
    with _pristine_lock:
        _pristine.put((snapshot, id(compare)), entry)


def keep_again(entry: Pristine) -> None:
    """Put `entry` back under its key when the cache let it go. A holder that outlives the
    cache's bound (the gold cache, whose seed states are these dumps) calls it at each use, so
    verify keeps patching the dump instead of reading every table of every verify whole."""
    key = (entry.snapshot, id(entry.compare))
    with _pristine_lock:
        if _pristine.get(key) is None:
            _pristine.put(key, entry)


def _rekeyed(compare: CompareSpec, names: list[str], changed: frozenset[str]) -> set[str]:
    """Tables referencing a table whose references may now resolve differently ("#key")."""
    return {
        name
        for name in names
        if any(f"{ref}#key" in changed for ref in compare.for_table(name).references.values())
    }


def _referencing(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    name: str,
    changed: frozenset[str],
    rows: Mapping[str, frozenset[int]],
) -> frozenset[int] | None:
    """The identities of `name`'s rows that reference a written row of a "#key" table: only
    their references may resolve differently. None when that cannot be told from the written
    rows' identities (they are not the ids references hold): the caller reads `name` whole."""
    table = tables[name]
    identity = table_reads.row_identity(conn, table)
    if identity is None:
        return None
    found: set[int] = set()
    for column, target in compare.for_table(name).references.items():
        if f"{target}#key" not in changed:
            continue
        ids = rows.get(target)
        if ids is None or not _identity_is_id(conn, tables[target]):
            return None
        if not ids:
            continue
        query = select(identity).where(table.c[column].in_(sorted(ids)))
        found.update(row[0] for row in conn.execute(query))
    return frozenset(found)


def _identity_is_id(conn: Connection, table: Table) -> bool:
    """Whether the identity the change records hold (SQLite's rowid; PostgreSQL's integer key)
    is the value references hold: a single INTEGER PRIMARY KEY, which SQLite makes the rowid."""
    return dump_sql(conn.dialect).identity_is_id(table, conn.dialect)


def patch_dump(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    pristine: Pristine,
    changes: Changes,
    *,
    indexed: bool,
) -> tuple[DbState, dict[str, RowIndex]] | None:
    """`pristine` patched with the rows `changes` says were written, or None when the row
    counts disagree (a write the tracking missed)."""
    patch, whole = _plan(conn, tables, compare, names, pristine, changes)
    wanted = {ref for n in whole for ref in compare.for_table(n).references.values()}
    refs = table_reads.reference_maps(conn, tables, compare, wanted)
    raw, patch_refs = _read_patched(conn, tables, compare, names, pristine, patch, refs)
    state: dict[str, TableState] = {}
    indexes: dict[str, RowIndex] = {}
    for name in names:
        found: RowIndex | None
        if name in whole:
            spec = compare.for_table(name)
            state[name], found = table_reads.read_table(
                conn, tables[name], spec, compare, refs, index=indexed
            )
        elif name in patch:
            state[name], found = _patched_table(
                conn,
                tables,
                name,
                compare,
                pristine.state[name],
                pristine.indexes[name],
                patch[name],
                raw[name],
                patch_refs,
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


def _plan(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    pristine: Pristine,
    changes: Changes,
) -> tuple[dict[str, frozenset[int]], set[str]]:
    """(the rows to patch by table, the tables to read whole): a table is read whole when its
    written rows are unknown, unindexed, or too large a share of it to patch."""
    changed, rows = changes.tables, changes.rows or {}
    rekeyed = _rekeyed(compare, names, changed)
    patch: dict[str, frozenset[int]] = {}
    whole: set[str] = set()
    for name in names:
        if name not in changed and name not in rekeyed:
            continue
        index, written = pristine.indexes.get(name), rows.get(name)
        if name in rekeyed:  # also the rows whose references now resolve differently
            referencing = _referencing(conn, tables, compare, name, changed, rows)
            if referencing is None or (name in changed and written is None):
                whole.add(name)
                continue
            written = (written or frozenset()) | referencing
        base_rows = len(pristine.state[name].rows)
        if index is None or written is None or len(written) > max(64, base_rows * _PATCH_SHARE):
            whole.add(name)
        else:
            patch[name] = written
    return patch, whole


def _read_patched(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    pristine: Pristine,
    patch: dict[str, frozenset[int]],
    refs: dict[str, dict[Any, tuple[Any, ...]]],
) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, dict[Any, tuple[Any, ...]]]]:
    """The patched rows read first, then the ids they refer to, one read per referenced table
    for all of them (a whole map in `refs` already resolves every id of its table)."""
    raw: dict[str, list[tuple[Any, ...]]] = {}
    ids: dict[str, set[Any]] = {}
    for name in names:
        if name in patch:
            columns = pristine.state[name].columns
            raw[name] = table_reads.rows_by_identity(conn, tables[name], columns, patch[name])
            for target, some_ids in _referenced_ids(compare, name, columns, raw[name]).items():
                ids.setdefault(target, set()).update(some_ids)
    some = {t: v for t, v in ids.items() if t not in refs}
    return raw, {**table_reads.reference_maps(conn, tables, compare, set(some), some), **refs}


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

    (row,) = list(table_reads.execute(conn, ("count", *(tables[n] for n in names)), counts))
    return [n for n, count in zip(names, row, strict=True) if count != len(state[n].rows)]
