"""The potential after each step, from the step log's row images alone (no re-dump, no undo).

Every state s_k differs from the seed only in the rows some step up to k touched, and the log
holds each such row's content before its first change and after each change. So for each step
the rows touched so far are normalised (the comparison spec's columns, text, money and
references, as `dump_state` does) on both sides, seed and s_k, and diffed: the diff of these
few rows is the diff of the whole states, because every other row is identical on both sides.
That costs a few hundred microseconds per writing step instead of a patched dump per step.

It assumes references resolve the same way in every state: a step that changes the identifying
columns of a row other tables reference (the "#key" case of change tracking) makes the caller
fall back to undoing the log in SQL and dumping each state (app/verify/step_rewards.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table

from app.sdk.compare_spec import CompareSpec
from app.storage.steplog import RowImage, StepRow
from app.verify.diff import StateDiff, diff_states
from app.verify.table_reads import (
    column_readers,
    compared_columns,
    plain,
    reference_maps,
    value_converters,
)
from app.verify.table_state import TableState

Key = tuple[str, int]  # (table, rowid)


def _rekeys(images: Sequence[RowImage], tables: Mapping[str, Table], compare: CompareSpec) -> bool:
    """Whether some change alters the identifying columns of a referenced table's row."""
    referenced = {ref for spec in compare.tables.values() for ref in spec.references.values()}
    for image in images:
        if image.table not in referenced or image.op != "u":
            continue
        table = tables[image.table]
        keys = [c.name for c in table.primary_key.columns] + list(
            compare.for_table(image.table).key
        )
        if image.old_rid != image.new_rid or any(
            (image.before or {}).get(k) != (image.after or {}).get(k) for k in keys
        ):
            return True
    return False


def potentials_from_log(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    steps: Sequence[StepRow],
    images: Sequence[RowImage],
    final: float,
    potential_of: Callable[[StateDiff], float],
) -> list[float] | None:
    """[Φ(s_1), ..., Φ(s_n)] with Φ(s_n) = `final`; None when the fast path does not apply."""
    compared = {n for n in tables if compare.for_table(n).compared}
    images = [i for i in images if i.table in compared]
    if _rekeys(images, tables, compare):
        return None
    # Row contents: at the seed (first sight of each row) and after each step.
    seed: dict[Key, dict[str, Any] | None] = {}
    current: dict[Key, dict[str, Any] | None] = {}
    after_step: dict[int, dict[Key, dict[str, Any] | None]] = {}
    for image in images:
        moves: list[tuple[int | None, dict[str, Any] | None, dict[str, Any] | None]] = []
        if image.op == "i":
            moves.append((image.new_rid, None, image.after))
        elif image.op == "d":
            moves.append((image.old_rid, image.before, None))
        elif image.old_rid == image.new_rid:
            moves.append((image.old_rid, image.before, image.after))
        else:  # a rowid change: the row leaves one rowid and takes another
            moves += [(image.old_rid, image.before, None), (image.new_rid, None, image.after)]
        for rid, before, after in moves:
            if rid is None:
                return None
            key = (image.table, rid)
            seed.setdefault(key, before)
            current[key] = after
        after_step[image.step] = dict(current)
    normalise = _normalisers(conn, tables, compare, images)
    values: list[float] = []
    # Before any writing step the state is the seed's (the potential of no change at all).
    phi, seen = potential_of({}), dict[Key, Any]()
    for step in steps:
        if step.idx == steps[-1].idx:
            values.append(final)
            break
        if step.idx in after_step:
            seen = after_step[step.idx]
            phi = potential_of(_mini_diff(seen, seed, normalise, tables, compare))
        values.append(phi)
    return values


def _mini_diff(
    state: Mapping[Key, dict[str, Any] | None],
    seed: Mapping[Key, dict[str, Any] | None],
    normalise: Mapping[str, Callable[[dict[str, Any]], tuple[Any, ...]]],
    tables: Mapping[str, Table],
    compare: CompareSpec,
) -> StateDiff:
    before: dict[str, list[tuple[Any, ...]]] = {}
    after: dict[str, list[tuple[Any, ...]]] = {}
    for key, content in state.items():
        table = key[0]
        old = seed[key]
        if old is not None:
            before.setdefault(table, []).append(normalise[table](old))
        if content is not None:
            after.setdefault(table, []).append(normalise[table](content))
    old_state: dict[str, TableState] = {}
    new_state: dict[str, TableState] = {}
    for name in set(before) | set(after):
        spec = compare.for_table(name)
        columns = compared_columns(tables[name], spec, compare)
        old_state[name] = TableState(
            name, columns, tuple(spec.key), tuple(sorted(before.get(name, []), key=repr))
        )
        new_state[name] = TableState(
            name, columns, tuple(spec.key), tuple(sorted(after.get(name, []), key=repr))
        )
    return diff_states(old_state, new_state, compare)


def _normalisers(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    images: Sequence[RowImage],
) -> dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]]:
    """Per touched table: logged row content -> the row as `dump_state` normalises it."""
    touched = {i.table for i in images}
    ids: dict[str, set[Any]] = {}
    for image in images:
        spec = compare.for_table(image.table)
        for content in (image.before, image.after):
            for column, target in spec.references.items():
                if content is not None and content.get(column) is not None:
                    ids.setdefault(target, set()).add(content[column])
    refs = reference_maps(conn, tables, compare, set(ids), ids)
    # Rows referenced but gone from the final state: their keys from the log's images.
    for image in images:
        mapping = refs.get(image.table)
        if mapping is None:
            continue
        key = compare.for_table(image.table).key
        pk = list(tables[image.table].primary_key.columns)
        reads = column_readers(conn, tables[image.table], tuple(key))
        for content in (image.before, image.after):
            if content is None or len(pk) != 1 or content.get(pk[0].name) in mapping:
                continue
            mapping[content[pk[0].name]] = tuple(
                plain(f(content[k])) for f, k in zip(reads, key, strict=True)
            )
    out: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
    for name in touched:
        spec = compare.for_table(name)
        columns = compared_columns(tables[name], spec, compare)
        reads = column_readers(conn, tables[name], columns)
        converters = value_converters(columns, spec, refs, reads)
        out[name] = _row_normaliser(columns, converters)
    return out


def _row_normaliser(
    columns: tuple[str, ...], converters: list[Callable[[Any], Any]]
) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    def normalise(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(f(row[c]) for c, f in zip(columns, converters, strict=True))

    return normalise
