"""The rows one generated story seeds on the base data: its world's ids, table order, updates.

Every environment's generator builds its stories' seeds with one `SeedBuilder`:
- a world of its own: inside `own_world(rng)` (every generated draw) a story's new rows take ids
  drawn from the task's seed (ascending per table) and `code(width)` draws its business numbers,
  so no two tasks share entities a policy could memorise (docs/generating_tasks.md, "Worlds");
  story `index` fixes the ids' parity, so a distractor's story never collides with the task's.
  Outside a world (the shipped sets, hand-built seeds) story `index` takes a fixed block
  `STORY_ID_FLOOR + BLOCK * index`: each shipped story has its own index, hence its own ids;
- ids clear of the base data (below the floor); tables parents first; partial updates of base
  rows (`update`), totals known only at the end in `seed(updates=...)`. A leaf of the SDK.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from sqlalchemy import MetaData

# A story's new rows take ids from here up; base tables stay below it (app/taskgen/validate.py).
STORY_ID_FLOOR = 100_000
# Ids one story may take per table (story `index` starts at STORY_ID_FLOOR + BLOCK * index).
BLOCK = 100
# A world's ids stay below this (SQLite and PostgreSQL integers; 8 digits a person can read).
STORY_ID_CEIL = 100_000_000
# Largest step between two ids of a table in a world (ids ascend in the order rows are added).
_MAX_STEP = 40

_world: ContextVar[random.Random | None] = ContextVar("seed_world", default=None)


@contextmanager
def own_world(rng: random.Random) -> Iterator[None]:
    """Builders made inside draw their ids and codes from `rng`: the task's world."""
    token = _world.set(rng)
    try:
        yield
    finally:
        _world.reset(token)


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
        # The world's random stream (None: fixed blocks); drawn once per builder, so the ids a
        # story gets do not depend on what else the world's caller draws after it.
        world = _world.get()
        self.world: random.Random | None = (
            random.Random(world.getrandbits(64)) if world is not None else None
        )
        self._last: dict[str, int] = {}  # a world's last id taken, per table
        self._drawn: dict[str, int] = {}  # drawn by next_id, not yet taken by add
        self._codes: set[str] = set()

    def _table(self, table: str) -> list[Row]:
        if table not in self.rows:
            raise KeyError(f"table {table!r} is not one of the seed's tables {list(self.rows)}")
        return self.rows[table]

    def next_id(self, table: str) -> int:
        """The id the next new row of `table` takes (drawn once; asking again gives the same)."""
        if self.world is None:
            return self.block + self._new[table]
        if table not in self._drawn:
            last = self._last.get(table)
            if last is None:  # a random start, low enough for BLOCK rows to follow
                span = (STORY_ID_CEIL - STORY_ID_FLOOR) // 2 - BLOCK * _MAX_STEP
                start = STORY_ID_FLOOR + 2 * self.world.randrange(span)
                self._drawn[table] = start + self.index % 2
            else:
                self._drawn[table] = last + 2 * self.world.randint(1, _MAX_STEP // 2)
        return self._drawn[table]

    def code(self, width: int = 7) -> str:
        """A business number of exactly `width` (>= 5) digits, no leading zero, unique in this
        story: drawn from the world, or `9`, the story index and a counter outside one (drawn
        from the index once the counter outgrows the width). Its last digit has the parity of
        `index`, so a distractor's numbers never equal the task's own."""
        if width < 5:
            raise ValueError("a code needs at least 5 digits")
        for attempt in itertools.count():
            n = 2 * len(self._codes) + self.index % 2
            counted = f"9{self.index % 1000:03d}{n:0{width - 4}d}"
            if self.world is None and len(counted) == width:
                value = counted
            else:  # a world's draw, or past what a counter of the width holds
                # The attempt is in the seed: a collision redraws instead of drawing it again.
                seed = f"code/{self.index}/{len(self._codes)}" + (f"/{attempt}" if attempt else "")
                rng = self.world or random.Random(seed)
                head = rng.randrange(10 ** (width - 2), 10 ** (width - 1))
                value = f"{head}{2 * rng.randrange(5) + self.index % 2}"
            if value not in self._codes:
                self._codes.add(value)
                return value
        raise AssertionError("unreachable: itertools.count() never ends")

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
        if self.world is not None:
            self._last[table] = self._drawn.pop(table)
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
