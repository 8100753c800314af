"""Outcomes: the changes a task asks for, one per requested change however many rows it writes.

A diff's change units (app/verify/state/diff.py: one per added, removed or changed row) are grouped
into outcomes: units joined when one row references a row another unit writes (a refund
payment and the order it refunds, the lines of a new invoice, timesheets linked to it: the
comparison spec's `references`, and reference columns of a natural key), or when they are the
same kind of write to one table (rows added to it, rows removed from it, rows whose same
columns changed: eight timesheets approved, two orders cancelled). Each unit
weighs 1 / (units in its outcome), so an outcome counts 1 whatever its size. Rows of log tables
(`TableSpec.log`) are no units. Partial credit and step rewards count outcomes
(app/verify/reward.py).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.verify.state.diff import StateDiff, TableDiff, units_of

Unit = tuple[Any, ...]
Entity = tuple[str, Any]


@dataclass(frozen=True)
class Outcomes:
    """The outcomes of one diff: its units, each unit's weight, how many outcomes, and the
    rows (table, identity) its units write."""

    units: Counter[Unit]
    weight: Mapping[Unit, float]
    identity: Mapping[Unit, Entity]
    count: int
    touched: frozenset[Entity]
    logs: frozenset[Unit]  # the units of log tables' rows
    group: Mapping[Unit, frozenset[int]]  # the outcome(s) each unit is part of

    def change_units(self) -> Counter[Unit]:
        """The units but log rows' (what diff.change_units counts)."""
        return Counter({u: n for u, n in self.units.items() if u not in self.logs})


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _identity(table: str, d: TableDiff, kind: str, row: Mapping[str, Any]) -> Entity:
    """The row a unit writes: its table and natural key (its content, without a key)."""
    if kind == "changed":
        key = row["key"]
        return table, tuple(_hashable(key[k]) for k in d.key) if d.key else _hashable(key)
    if d.key and all(k in row for k in d.key):
        return table, tuple(_hashable(row[k]) for k in d.key)
    return table, _hashable(row)


def _references(d: TableDiff, kind: str, row: Mapping[str, Any]) -> list[Entity]:
    """The rows a unit's row points at (by natural key), before and after a change."""
    if kind == "changed":
        values: list[tuple[str, Any]] = list(row["key"].items())
        for column, (before, after) in row["changes"].items():
            values += [(column, before), (column, after)]
    else:
        values = list(row.items())
    out = []
    for column, value in values:
        target = d.references.get(column)
        if target is not None and value is not None:
            value = _hashable(value)
            out.append((target, value if isinstance(value, tuple) else (value,)))
    return out


def outcomes(diff: StateDiff) -> Outcomes:
    """Group `diff`'s change units into outcomes (module docstring)."""
    entries: list[tuple[Unit, Entity, list[Entity], Any]] = []
    logged: list[tuple[int, set[Any]]] = []  # log rows: entry index, the values they hold
    for table, d in diff.items():
        for kind, unit, row in units_of(table, d):
            if d.log:
                if kind != "changed":
                    logged.append((len(entries), {_hashable(v) for v in row.values()}))
                entries.append((unit, (table, _hashable(row)), [], ("log", table, kind)))
                continue
            columns = tuple(sorted(row["changes"])) if kind == "changed" else ()
            edit = (table, kind, columns)
            entries.append((unit, _identity(table, d, kind, row), _references(d, kind, row), edit))
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    owner: dict[Entity, int] = {}
    same_edit: dict[Any, int] = {}
    for i, (_unit, ident, _refs, edit) in enumerate(entries):
        if ident in owner:
            join(i, owner[ident])
        owner.setdefault(ident, i)
        if edit[0] == "log":
            continue  # a log row joins the rows it names, below
        if edit in same_edit:
            join(i, same_edit[edit])
        same_edit.setdefault(edit, i)
    if logged:
        named: dict[Any, list[int]] = {}  # a natural key's first value -> rows keyed by it
        for ident, i in owner.items():
            key = ident[1]
            if entries[i][3][0] != "log" and isinstance(key, tuple) and key:
                named.setdefault(key[0], []).append(i)
        for i, held in logged:
            for value in held:
                for j in named.get(value, ()):
                    if all(part in held for part in entries[j][1][1]):
                        join(i, j)
    for i, (_unit, _ident, refs, _edit) in enumerate(entries):
        for ref in refs:
            if ref in owner:
                join(i, owner[ref])
    size = Counter(find(i) for i in range(len(entries)))
    units: Counter[Unit] = Counter()
    total: dict[Unit, float] = {}
    identity: dict[Unit, Entity] = {}
    group: dict[Unit, set[int]] = {}
    for i, (unit, ident, _refs, _edit) in enumerate(entries):
        group.setdefault(unit, set()).add(find(i))
        units[unit] += 1
        total[unit] = total.get(unit, 0.0) + 1 / size[find(i)]
        identity.setdefault(unit, ident)
    weight = {u: total[u] / units[u] for u in units}
    logs = frozenset(e[0] for e in entries if e[3][0] == "log")
    touched = frozenset(ident for ident, i in owner.items() if entries[i][3][0] != "log")
    groups = {u: frozenset(g) for u, g in group.items()}
    return Outcomes(units, weight, identity, len(size), touched, logs, groups)


_GOLD: dict[int, tuple[weakref.ref[Any], Outcomes]] = {}
_GOLD_LOCK = threading.Lock()


def of_gold(reference: Any) -> Outcomes:
    """`outcomes(reference.seed_to_gold)` of a cached gold state, computed once per gold state
    (every verify and every step-reward potential of its task reads it); forgotten with it."""
    key = id(reference)
    with _GOLD_LOCK:
        hit = _GOLD.get(key)
    if hit is not None and hit[0]() is reference:
        return hit[1]
    found = outcomes(reference.seed_to_gold)

    def forget(_: Any, key: int = key) -> None:
        with _GOLD_LOCK:
            _GOLD.pop(key, None)

    with _GOLD_LOCK:
        _GOLD[key] = (weakref.ref(reference, forget), found)
    return found
