"""A comparable snapshot of a database's state, following the environment's comparison spec:
read whole (app/verify/state/table_reads.py) or, for a database that tracks its changes, patched
from its snapshot's dump (app/verify/state/patching.py)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, Table

from app.sdk.compare_spec import CompareSpec
from app.storage.meta import META_TABLE, Changes, seed_changes
from app.storage.tracking import tracked_changes
from app.verify.state import table_reads
from app.verify.state.patching import Pristine, patch_dump, remember, remembered
from app.verify.state.table_state import DbState, Patch, Row, RowIndex, TableState

__all__ = ["DbState", "Patch", "Row", "RowIndex", "TableState", "dump_state"]


def dump_state(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec, *, reuse: bool = True
) -> DbState:
    """Every compared table's rows, normalised and sorted (order-insensitive comparison).

    With `reuse` (the default) a database that tracks its changes is dumped by patching its
    snapshot's dump; `reuse=False` reads every table whole (what tests compare it against).
    """
    return _dump(conn, tables, compare, reuse=reuse)[0]


def pristine_dump(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec
) -> tuple[DbState, Pristine | None]:
    """The dump of a clone nothing has written yet, and the kept entry verify patches for the
    sessions of its snapshot (None: the clone does not track its changes). A holder of the
    entry can put it back when the cache lets it go (`patching.keep_again`)."""
    state = dump_state(conn, tables, compare)
    tracked = tracked_changes(conn, tables)
    if tracked is None or tracked.tables:
        return state, None
    kept = remembered(tracked.snapshot, compare)
    return (kept.state, kept) if kept is not None else (state, None)


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
    pristine = remembered(tracked.snapshot, compare) if tracked is not None else None
    if pristine is None and tracked is not None and tracked.origin is not None:
        pristine = _read_origin(conn, tables, compare, names, tracked)
    if pristine is None:
        if tracked is not None and not tracked.tables:
            seeded = _seeded_from_template(conn, tables, compare, names, tracked.snapshot)
            if seeded is not None:
                return seeded
        return _dump_all(conn, tables, compare, names, tracked, indexed=indexed)
    assert tracked is not None  # a pristine entry is only found for a tracked database
    patched = patch_dump(conn, tables, compare, names, pristine, tracked, indexed=indexed)
    if patched is None:
        # A write the tracking missed (it records every path we know of; this is the backstop):
        # the reused dumps cannot be trusted, so every table is read whole.
        return _dump_all(conn, tables, compare, names, None, indexed=indexed)
    return patched


def _read_origin(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    tracked: Changes,
) -> Pristine | None:
    """The snapshot's dump read where its changes' origin says (indexed), and kept: once per
    snapshot and process (PostgreSQL: the session's own schema with its log undone in a
    savepoint, on the caller's connection). Where the snapshot's own writes over a base are
    known (`Changes.seeded`), the base's dump (kept too) patched with them, not a whole read."""
    assert tracked.origin is not None
    seeded = tracked.seeded(conn) if tracked.seeded is not None else None
    base = _base_dump(conn, tables, compare, names, seeded) if seeded is not None else None
    with tracked.origin(conn) as source:
        if source is None:  # the origin is gone (a template dropped): the caller reads all
            return None
        patched = None
        if base is not None and seeded is not None:
            patched = patch_dump(source, tables, compare, names, base, seeded, indexed=True)
        if patched is None:
            patched = _dump_all(source, tables, compare, names, None, indexed=True)
        state, indexes = patched
    twin = remembered(tracked.twin, compare) if tracked.twin is not None else None
    if twin is not None:  # the same rows: its table objects, whose patches diffs compare
        state = {n: twin.state[n] if twin.state.get(n) == t else t for n, t in state.items()}
    remember(tracked.snapshot, compare, state, indexes, over=twin or base)
    return remembered(tracked.snapshot, compare)


def _base_dump(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    names: list[str],
    seeded: Changes,
) -> Pristine | None:
    """The dump of the base a snapshot was seeded from: kept, else read whole where its origin
    says (once per base and process); None when neither can be had."""
    found = remembered(seeded.snapshot, compare)
    if found is not None or seeded.origin is None:
        return found
    with seeded.origin(conn) as source:
        if source is None:
            return None
        state, indexes = _dump_all(source, tables, compare, names, None, indexed=True)
    remember(seeded.snapshot, compare, state, indexes)
    return remembered(seeded.snapshot, compare)


def remember_template_dump(
    conn: Connection, tables: Mapping[str, Table], compare: CompareSpec, template: str
) -> None:
    """Dump a template database (`conn`, fingerprint `template`) whole, with rowid indexes, and
    keep it: the snapshots built from it are then dumped by patching it with their seed's rows
    (app.storage.meta.seed_changes) instead of reading every base row once per task."""
    if remembered(f"{template}:", compare) is not None:
        return
    names = [n for n in sorted(tables) if compare.for_table(n).compared]
    _dump_all(conn, tables, compare, names, Changes(f"{template}:", frozenset(), {}))


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
    base = remembered(seed.snapshot, compare) if seed is not None else None
    if seed is None or base is None:
        return None
    patched = patch_dump(conn, tables, compare, names, base, seed, indexed=True)
    if patched is None:
        return None
    remember(snapshot, compare, *patched, over=base)
    return patched


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
    refs = table_reads.reference_maps(conn, tables, compare)
    state: dict[str, TableState] = {}
    indexes: dict[str, RowIndex] = {}
    for name in names:
        spec = compare.for_table(name)
        state[name], index = table_reads.read_table(
            conn, tables[name], spec, compare, refs, index=pristine or indexed
        )
        if index is not None:
            indexes[name] = index
    if pristine and tracked is not None:
        remember(tracked.snapshot, compare, state, indexes)
    return state, indexes
