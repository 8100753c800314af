"""Structured differences between two states: per table, rows added, removed and changed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.sdk.compare_spec import CompareSpec
from app.verify.state import DbState, TableState


@dataclass
class TableDiff:
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    # {"key": {col: value}, "changes": {col: [before, after]}}
    changed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.added) + len(self.removed) + len(self.changed)

    def summary(self, limit: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "added": len(self.added),
            "removed": len(self.removed),
            "changed": len(self.changed),
        }
        if limit:
            for kind in ("added", "removed", "changed"):
                rows = getattr(self, kind)
                if rows:
                    out[f"{kind}_rows"] = rows[:limit]
        return out


StateDiff = dict[str, TableDiff]


def _close(a: Any, b: Any, tolerance: float | None) -> bool:
    if tolerance is not None and isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= tolerance
    return a == b


def _as_dict(table: TableState, row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(table.columns, row, strict=True))


def _changed_rows(
    before: TableState, after: TableState
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] | None:
    """(rows only in `before`, rows only in `after`), as multisets in table order, from the
    patches alone when `after` was patched from `before` or both from one base; else None.

    With R and A a patch's removed and added rows: before = base - Rb + Ab and after =
    base - Ra + Aa, so before - after = (Ra + Ab) - (Rb + Aa) and after - before the reverse
    (Counter subtraction truncates at zero, as the whole tables' would)."""
    mine, theirs = after.delta, before.delta
    if mine is not None and mine.base is before:
        gone, came = Counter(mine.removed), Counter(mine.added)
    elif mine is not None and theirs is not None and mine.base is theirs.base:
        gone = Counter(mine.removed) + Counter(theirs.added)
        came = Counter(theirs.removed) + Counter(mine.added)
    else:
        return None
    return (
        sorted((gone - came).elements(), key=repr),
        sorted((came - gone).elements(), key=repr),
    )


def _unique_keys(table: TableState) -> bool:
    """Whether every row has its own key; for a patched table from its base's cached key set
    and the few rows patched, not a set of every row."""
    delta = table.delta
    if delta is None or delta.base.keys is None or delta.base.key != table.key:
        return table.keys is not None
    base_keys = delta.base.keys
    removed = {table.key_of(r) for r in delta.removed}
    added = [table.key_of(r) for r in delta.added]
    fresh = set(added)
    return len(fresh) == len(added) and all(k in removed or k not in base_keys for k in fresh)


def diff_table(before: TableState, after: TableState, money: set[str], tol: float) -> TableDiff:
    result = TableDiff()
    keyed = bool(before.key) and before.key == after.key
    unique = keyed and _unique_keys(before) and _unique_keys(after)
    changed = _changed_rows(before, after)
    if changed is not None:
        # Only patched rows can differ. With unique keys no row outside the patches equals a
        # patched one, so these are also what the whole tables' set algebra below finds.
        old_only, new_only = changed
        if not unique:  # content matching, duplicates allowed: the multiset difference
            result.added = [_as_dict(after, r) for r in new_only]
            result.removed = [_as_dict(before, r) for r in old_only]
            return result
    else:
        old_set, new_set = before.row_set, after.row_set
        # Rows present on both sides are unchanged; only the rest is matched (set algebra in C,
        # so a one-row change in a 5,000-row table costs two set builds, not 5,000 comparisons).
        gone, came = old_set - new_set, new_set - old_set
        old_only = [r for r in before.rows if r in gone] if gone else []
        new_only = [r for r in after.rows if r in came] if came else []
    if unique:
        old_index = {before.key_of(r): r for r in old_only}
        new_keys = set()
        for row in new_only:
            key = after.key_of(row)
            new_keys.add(key)
            old = old_index.get(key)
            if old is None:
                result.added.append(_as_dict(after, row))
                continue
            changes = {
                col: [a, b]
                for col, a, b in zip(after.columns, old, row, strict=True)
                if not _close(a, b, tol if col in money else None)
            }
            if changes:
                key_dict = dict(zip(after.key, key, strict=True))
                result.changed.append({"key": key_dict, "changes": changes})
        result.removed = [_as_dict(before, r) for k, r in old_index.items() if k not in new_keys]
        return result
    if len(old_set) == len(before.rows) and len(new_set) == len(after.rows):
        result.added = [_as_dict(after, r) for r in new_only]  # no duplicates: sets suffice
        result.removed = [_as_dict(before, r) for r in old_only]
        return result
    old_rows, new_rows = Counter(before.rows), Counter(after.rows)
    result.added = [_as_dict(after, r) for r in (new_rows - old_rows).elements()]
    result.removed = [_as_dict(before, r) for r in (old_rows - new_rows).elements()]
    return result


def diff_states(before: DbState, after: DbState, compare: CompareSpec) -> StateDiff:
    """Only tables that differ appear in the result."""
    out: StateDiff = {}
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None or new is None:
            continue
        changed = _changed_rows(old, new)
        if (changed == ([], [])) if changed is not None else old.rows == new.rows:
            continue
        money = set(compare.for_table(name).money)
        table_diff = diff_table(old, new, money, compare.money_tolerance)
        if table_diff.count:
            out[name] = table_diff
    return out


def change_units(diff: StateDiff) -> Counter[tuple[Any, ...]]:
    """Each added/removed/changed row as a hashable unit, to count shared and extra changes."""
    units: Counter[tuple[Any, ...]] = Counter()
    for table, d in diff.items():
        for row in d.added:
            units[("added", table, _freeze(row))] += 1
        for row in d.removed:
            units[("removed", table, _freeze(row))] += 1
        for row in d.changed:
            after = {c: v[1] for c, v in row["changes"].items()}
            units[("changed", table, _freeze(row["key"]), _freeze(after))] += 1
    return units


def _freeze(d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, _money_key(v)) for k, v in d.items()))


def _money_key(v: Any) -> Any:
    return round(v, 2) if isinstance(v, float) else v


def summarize(diff: StateDiff, limit: int) -> dict[str, Any]:
    return {table: d.summary(limit) for table, d in diff.items()}


def describe(diff: StateDiff) -> str:
    parts = []
    for table, d in diff.items():
        bits = [
            f"{n} {kind}"
            for kind, n in (
                ("added", len(d.added)),
                ("removed", len(d.removed)),
                ("changed", len(d.changed)),
            )
            if n
        ]
        parts.append(f"{table}: {', '.join(bits)}")
    return "; ".join(parts)
