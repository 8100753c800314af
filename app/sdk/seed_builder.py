"""The rows one generated story seeds on top of the base data: id blocks, table order, updates.

Every environment's generator builds its stories' seeds with one `SeedBuilder`:
- id blocks: story `index` takes ids from `STORY_ID_FLOOR + BLOCK * index` up, one counter per
  table, so its rows never collide with the base data (below the floor, checked once per run)
  nor with another story's (a distractor's block);
- table order: parents first (the environment's order or its metadata's), empty tables left out;
- partial updates of base rows: a base row's id and only the columns it changes; totals known
  only at the end (seats left, a balance) go to `seed(updates=...)`, after the table's rows.
A leaf of the SDK: it imports SQLAlchemy and the standard library only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import MetaData

# A story's new rows take ids from here up; base tables stay below it (app/taskgen/validate.py).
STORY_ID_FLOOR = 100_000
# Ids one story may take per table (story `index` starts at STORY_ID_FLOOR + BLOCK * index).
BLOCK = 100

Row = dict[str, Any]


def table_order(tables: Sequence[str] | MetaData) -> tuple[str, ...]:
    """The seed's table order: as given, or the metadata's dependency order (parents first)."""
    if isinstance(tables, MetaData):
        return tuple(t.name for t in tables.sorted_tables)
    return tuple(tables)


class SeedBuilder:
    """The rows one story (`index`) seeds; `now` is the seed's clock (None: the base's)."""

    def __init__(
        self, index: int, tables: Sequence[str] | MetaData, now: datetime | str | None = None
    ) -> None:
        self.index = index
        self.block = STORY_ID_FLOOR + BLOCK * index
        self.now = now
        self.rows: dict[str, list[Row]] = {t: [] for t in table_order(tables)}
        self._new: defaultdict[str, int] = defaultdict(int)

    def _table(self, table: str) -> list[Row]:
        if table not in self.rows:
            raise KeyError(f"table {table!r} is not one of the seed's tables {list(self.rows)}")
        return self.rows[table]

    def next_id(self, table: str) -> int:
        """The id the next new row of `table` takes."""
        return self.block + self._new[table]

    def count(self, table: str) -> int:
        """How many new rows of `table` the story has added."""
        return self._new[table]

    def add(self, table: str, **columns: Any) -> Row:
        """A new row (its id first, from the story's block); returns it (still editable)."""
        rows = self._table(table)
        if self._new[table] >= BLOCK:
            raise ValueError(f"story {self.index} adds more than {BLOCK} {table} rows")
        row = {"id": self.next_id(table), **columns}
        self._new[table] += 1
        rows.append(row)
        return row

    def update(self, table: str, id: int, **columns: Any) -> Row:
        """A partial update of base row `id` (only `columns` change), in call order."""
        if id >= STORY_ID_FLOOR:
            raise ValueError(f"{table} {id} is a story's row, not a base row: edit it instead")
        row = {"id": id, **columns}
        self._table(table).append(row)
        return row

    def seed(self, *, updates: Mapping[str, Iterable[Row]] | None = None) -> dict[str, Any]:
        """The task's seed: `{"now": ..., "rows": {table: rows}}`, empty tables left out.

        `updates` are partial updates computed at the end (running totals), listed after the
        table's own rows; the builder itself is left unchanged (seed may be called again)."""
        rows = {t: list(r) for t, r in self.rows.items()}
        for table, extra in (updates or {}).items():
            if table not in rows:
                raise KeyError(f"table {table!r} is not one of the seed's tables {list(rows)}")
            rows[table].extend(extra)
        seed: dict[str, Any] = {}
        if self.now is not None:
            seed["now"] = self.now.isoformat() if isinstance(self.now, datetime) else self.now
        seed["rows"] = {t: r for t, r in rows.items() if r}
        return seed
