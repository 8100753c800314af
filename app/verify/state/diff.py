"""Structured differences between two states: per table, rows added, removed and changed.

Rows are diffed as stored (`exact=True`: did anything change) or, the default, as matched
(the comparison spec's text and money rules: does it match), app/verify/state/match_form.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.sdk.compare_spec import CompareSpec
from app.verify.state.dump import DbState, Row, TableState
from app.verify.state.match_form import Matcher


@dataclass
class TableDiff:
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    # {"key": {col: value}, "changes": {col: [before, after]}}
    changed: list[dict[str, Any]] = field(default_factory=list)
    # The table's values in their form for matching (change_units compares changes so).
    match: Matcher | None = field(default=None, compare=False, repr=False)
    # An append-only record of writes (TableSpec.log): its rows are no change unit.
    log: bool = field(default=False, compare=False, repr=False)
    # The table's natural key and references (the comparison spec's), to group units into
    # outcomes (app/verify/state/outcomes.py).
    key: tuple[str, ...] = field(default=(), compare=False, repr=False)
    references: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

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


def _unique_keys(table: TableState) -> bool:
    width = len(table.key)
    return len({row[:width] for row in table.rows}) == len(table.rows)


def diff_table(before: TableState, after: TableState, money: set[str], tol: float) -> TableDiff:
    delta = _Delta.of(before, after)
    if delta is not None:
        return delta.diff(money, tol)
    result = TableDiff()
    if before.rows == after.rows:
        return result
    old_set, new_set = set(before.rows), set(after.rows)
    # Rows present on both sides are unchanged; only the rest is matched (set algebra in C, so a
    # one-row change in a 5,000-row table costs two set builds, not 5,000 comparisons).
    gone, came = old_set - new_set, new_set - old_set
    old_only = [r for r in before.rows if r in gone] if gone else []
    new_only = [r for r in after.rows if r in came] if came else []
    return _matched(result, before, after, old_only, new_only, money, tol)


def _matched(
    result: TableDiff,
    before: TableState,
    after: TableState,
    old_only: list[Row],
    new_only: list[Row],
    money: set[str],
    tol: float,
    *,
    unique_keys: tuple[bool, bool] | None = None,
    unique_rows: tuple[bool, bool] | None = None,
    counted: tuple[list[Row], list[Row]] | None = None,
) -> TableDiff:
    """Rows only before and only after, matched by key into added, removed and changed. The
    whole-table facts (unique keys, repeated rows, the multiset difference) are computed from
    the rows unless a patched diff (`_Delta`) gives them."""
    keyed = bool(before.key) and before.key == after.key
    if unique_keys is None and keyed:
        unique_keys = (_unique_keys(before), _unique_keys(after))
    if keyed and unique_keys is not None and all(unique_keys):
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
    if unique_rows is None:
        unique_rows = (
            len(set(before.rows)) == len(before.rows),
            len(set(after.rows)) == len(after.rows),
        )
    if all(unique_rows):
        result.added = [_as_dict(after, r) for r in new_only]  # no duplicates: sets suffice
        result.removed = [_as_dict(before, r) for r in old_only]
        return result
    if counted is None:
        old_rows, new_rows = Counter(before.rows), Counter(after.rows)
        counted = (list((new_rows - old_rows).elements()), list((old_rows - new_rows).elements()))
    result.added = [_as_dict(after, r) for r in counted[0]]
    result.removed = [_as_dict(before, r) for r in counted[1]]
    return result


@dataclass
class _Delta:
    """Two dumps patched from one table read whole (`TableState.origin`): every row outside
    the patches has the same count in both, so the diff is computed from the patched rows and
    the base's cached counts, in time proportional to the patches, not the table. It gives
    exactly what the whole-table path gives (same rows, same order: rows are sorted by repr,
    and rows with equal reprs are equal)."""

    before: TableState
    after: TableState
    base: TableState
    old: Counter[Row]  # count in `before` of every patched row
    new: Counter[Row]

    @classmethod
    def of(cls, before: TableState, after: TableState) -> _Delta | None:
        b, a = _lineage(before), _lineage(after)
        if b is None or a is None or b[0] is not a[0] or before.columns != after.columns:
            return None
        base = b[0]
        touched = set(b[1]) | set(b[2]) | set(a[1]) | set(a[2])
        counts = base.row_counts
        old = Counter({r: counts[r] - b[1][r] + b[2][r] for r in touched})
        new = Counter({r: counts[r] - a[1][r] + a[2][r] for r in touched})
        return cls(before, after, base, old, new)

    def diff(self, money: set[str], tol: float) -> TableDiff:
        old, new = self.old, self.new
        if old == new:
            return TableDiff()
        gone = sorted((r for r, n in old.items() if n > 0 and new[r] == 0), key=repr)
        came = sorted((r for r, n in new.items() if n > 0 and old[r] == 0), key=repr)
        old_only = [r for r in gone for _ in range(old[r])]
        new_only = [r for r in came for _ in range(new[r])]
        ordered = sorted(old.keys() | new.keys(), key=repr)
        added = [r for r in ordered for _ in range(max(new[r] - old[r], 0))]
        removed = [r for r in ordered for _ in range(max(old[r] - new[r], 0))]
        return _matched(
            TableDiff(),
            self.before,
            self.after,
            old_only,
            new_only,
            money,
            tol,
            unique_keys=(self._unique_keys(old), self._unique_keys(new)),
            unique_rows=(self._unique_rows(old), self._unique_rows(new)),
            counted=(added, removed),
        )

    def _unique_rows(self, counts: Counter[Row]) -> bool:
        """No row twice in the whole patched table."""
        base = self.base.row_counts
        repeated = self.base.repeated_rows - sum(1 for r in counts if base[r] > 1)
        return repeated == 0 and all(n <= 1 for n in counts.values())

    def _unique_keys(self, counts: Counter[Row]) -> bool:
        """No key twice in the whole patched table."""
        width = len(self.base.key)
        base = self.base.key_counts
        keys: Counter[tuple[Any, ...]] = Counter()
        for row, n in counts.items():
            keys[row[:width]] += n - self.base.row_counts[row]
        repeated = self.base.repeated_keys - sum(1 for k in keys if base[k] > 1)
        return repeated == 0 and all(base[k] + n <= 1 for k, n in keys.items())


def _lineage(table: TableState) -> tuple[TableState, Counter[Row], Counter[Row]] | None:
    """(the table read whole it was patched from, rows removed, rows added); a table read
    whole is its own base."""
    if table.origin is None:
        return table, Counter(), Counter()
    if table.origin.base.origin is not None:
        return None
    return table.origin.base, Counter(table.origin.removed), Counter(table.origin.added)


def diff_states(
    before: DbState, after: DbState, compare: CompareSpec, *, exact: bool = False
) -> StateDiff:
    """Only tables that differ appear in the result. `exact`: values as stored (what changed);
    else as matched (text and money by the spec's rules: what differs from an expected state).
    """
    out: StateDiff = {}
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None or new is None or old is new:
            continue
        spec = compare.for_table(name)
        match = Matcher.of(new.columns, spec)
        table_diff = diff_table(old, new, set(), 0.0)
        if not exact and table_diff.count:
            table_diff = _as_matched(table_diff, old, new, match, compare.money_tolerance)
        table_diff.match = match
        table_diff.log = spec.log
        table_diff.key = tuple(new.key) if new.key and new.key == old.key else ()
        table_diff.references = spec.references
        if table_diff.count:
            out[name] = table_diff
    return out


def _as_matched(
    exact: TableDiff, before: TableState, after: TableState, match: Matcher, tol: float
) -> TableDiff:
    """An exact diff with the differences normalisation hides taken out: a diff of the
    matched forms of the rows, in time proportional to the diff, not the tables."""
    out = TableDiff()

    def differs(column: str, a: Any, b: Any) -> bool:
        a, b = match.value(column, a), match.value(column, b)
        return not _close(a, b, tol if column in match.money else None)

    for row in exact.changed:
        changes = {c: v for c, v in row["changes"].items() if differs(c, *v)}
        if changes:
            out.changed.append({"key": row["key"], "changes": changes})
    width = len(after.key) if before.key and before.key == after.key else len(after.columns)
    # Rows only on one side whose matched keys (or, without a key, contents) meet.
    gone: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in exact.removed:
        gone.setdefault(_matched_key(match, row, width), []).append(row)
    for row in exact.added:
        old = gone.get(_matched_key(match, row, width))
        if not old:
            out.added.append(row)
            continue
        was = old.pop()
        changes = {c: [was[c], row[c]] for c in match.columns if differs(c, was[c], row[c])}
        if changes:
            key = {c: row[c] for c in after.key} if width < len(after.columns) else row
            out.changed.append({"key": key, "changes": changes})
    left = {id(r) for rows in gone.values() for r in rows}
    out.removed = [r for r in exact.removed if id(r) in left]
    return out


def _matched_key(match: Matcher, row: dict[str, Any], width: int) -> tuple[Any, ...]:
    values = match.row([row[c] for c in match.columns])
    return tuple(_money_key(v) for v in values[:width])


def against_gold(
    gold: DbState,
    final: DbState,
    compare: CompareSpec,
    seed_to_gold: StateDiff,
    seed_to_final: StateDiff,
    counted: tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]]] | None = None,
) -> StateDiff:
    """The final state vs the gold, as matched, plus every change (as stored) the agent made
    that the gold does not, or the other way round: a write normalisation hides is still no
    match where the gold leaves that value as it was. `counted`: `change_units` of
    (seed_to_gold, seed_to_final) where the caller has them."""
    out = diff_states(gold, final, compare)
    if counted is None:
        counted = change_units(seed_to_gold), change_units(seed_to_final)
    expected, agent = counted
    # Seed -> final units read as gold -> final as they are (a row the agent added exists
    # only in the final state); seed -> gold units the other way round (a row the gold added
    # and the agent did not is missing from the final state: `removed` from gold to final).
    flip = {"added": "removed", "removed": "added", "changed": "changed"}
    for source, units, side in (
        (seed_to_final, agent - expected, None),
        (seed_to_gold, expected - agent, flip),
    ):
        for table, d in source.items():
            for kind, unit, row in units_of(table, d):
                if units[unit] <= 0:
                    continue
                units[unit] -= 1
                shown = out.setdefault(table, TableDiff(match=d.match, log=d.log))
                if kind == "changed":
                    if any(r["key"] == row["key"] for r in shown.changed):
                        continue
                    getattr(shown, kind).append(row)
                    continue
                listed = getattr(shown, side[kind] if side else kind)
                if row not in listed:  # the matched diff may already show it
                    listed.append(row)
    return out


def split_extra_log_records(gold_vs_final: StateDiff) -> dict[str, list[dict[str, Any]]]:
    """Take out of a gold -> final diff the records of log tables (TableSpec.log) the final
    state has and the gold does not: a repeated call's record, a corrected mistake's. They
    are no difference (the outcome is judged by the other tables); returned as evidence."""
    superseded: dict[str, list[dict[str, Any]]] = {}
    for table in list(gold_vs_final):
        d = gold_vs_final[table]
        if not d.log or not d.added:
            continue
        superseded[table], d.added = d.added, []
        if not d.count:
            del gold_vs_final[table]
    return superseded


def change_units(diff: StateDiff) -> Counter[tuple[Any, ...]]:
    """Each added/removed/changed row as a hashable unit, to count shared and extra changes:
    the changed columns (as stored) with their values as matched."""
    units: Counter[tuple[Any, ...]] = Counter()
    for table, d in diff.items():
        if d.log:
            continue  # a record of writes other tables hold: no outcome of its own
        for _kind, unit, _row in units_of(table, d):
            units[unit] += 1
    return units


def units_of(table: str, d: TableDiff) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    form = d.match.value if d.match is not None else (lambda _c, v: v)
    out: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    for row in d.added:
        out.append(("added", ("added", table, _freeze(row, form)), row))
    for row in d.removed:
        out.append(("removed", ("removed", table, _freeze(row, form)), row))
    for row in d.changed:
        after = {c: v[1] for c, v in row["changes"].items()}
        unit = ("changed", table, _freeze(row["key"], form), _freeze(after, form))
        out.append(("changed", unit, row))
    return out


def _freeze(d: dict[str, Any], form: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, _money_key(form(k, v))) for k, v in d.items()))


def _money_key(v: Any) -> Any:
    return round(v, 2) if isinstance(v, float) else v


# A gold -> final diff: a row only in the final state is unexpected, one only in the gold
# state is missing (as `stategym sessions diff --against gold` reads it).
AGAINST_GOLD = ("unexpected", "missing", "differ")


def summarize(diff: StateDiff, limit: int) -> dict[str, Any]:
    return {table: d.summary(limit) for table, d in diff.items()}


def describe(diff: StateDiff, words: tuple[str, str, str] = ("added", "removed", "changed")) -> str:
    """A diff in words; `words` name its rows only after, only before, and changed
    (`AGAINST_GOLD` for a gold -> final diff)."""
    parts = []
    for table, d in diff.items():
        bits = [
            f"{n} {kind}"
            for kind, n in zip(words, (len(d.added), len(d.removed), len(d.changed)), strict=True)
            if n
        ]
        parts.append(f"{table}: {', '.join(bits)}")
    return "; ".join(parts)
