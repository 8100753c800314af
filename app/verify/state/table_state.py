"""The comparable state of a database: per compared table, its normalised rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Patch:
    """How a patched dump was made: `base` (a table read whole) less `removed`, plus `added`.
    Two dumps patched from one base differ only among those rows (app/verify/state/diff.py)."""

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
    # The rows' reprs, in order, when whoever made the table had them (a patch does).
    reprs: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def key_of(self, row: Row) -> tuple[Any, ...]:
        return row[: len(self.key)]

    @cached_property
    def sort_keys(self) -> tuple[str, ...]:
        """Each row's repr (what rows are sorted by), in order: a patch bisects these instead of
        calling repr on the rows it compares (computed once for a table read whole)."""
        return self.reprs if self.reprs is not None else tuple(map(repr, self.rows))

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
RowIndex = Mapping[int, tuple[Any, ...]]  # rowid -> normalised row, of a pristine dump


# What caching a dump costs, estimated: a row read whole is a tuple of a few values (~150 bytes
# with them); a patched table shares its base's rows and holds new tuples of pointers to them and
# to their reprs (8 bytes a row each); an index of a pristine dump one dict entry a row; a cache
# entry its key and bookkeeping.
ROW_BYTES, POINTER_BYTES, INDEX_ENTRY_BYTES, ENTRY_BYTES = 150, 8, 100, 4096


def state_bytes(state: DbState, shared: frozenset[int] = frozenset()) -> int:
    """About what `state` holds beyond the tables of `shared` (ids of TableStates another
    cached dump holds too): what caching it costs."""
    total = 0
    for table in state.values():
        if id(table) in shared:
            continue
        origin = table.origin
        if origin is not None:
            total += 2 * POINTER_BYTES * len(table.rows) + ROW_BYTES * len(origin.added)
        else:
            total += ROW_BYTES * len(table.rows)
    return total
