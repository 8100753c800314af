"""The lean baseline's session state: shared read-only base rows + a per-session overlay of dicts.

What a NeMo Gym user writes first: the environment's base data is loaded once per process (from
the StateGym template file, so both servers start from the same rows) and never mutated; a
session holds only the task's own seed rows plus the rows its tools write (copy-on-write), so a
seed costs O(task rows), not O(dataset). Lookups by column use indexes built once over the base
rows and a scan of the session's few rows.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any

Row = dict[str, Any]


class Base:
    """Every table of an environment as {id: row}, plus lazily built column indexes."""

    def __init__(self, template_path: str, tables: list[str]):
        conn = sqlite3.connect(f"file:{template_path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        self.rows: dict[str, dict[int, Row]] = {}
        for name in tables:
            self.rows[name] = {r["id"]: dict(r) for r in conn.execute(f'SELECT * FROM "{name}"')}
        conn.close()
        self.max_id = {t: max(rows, default=0) for t, rows in self.rows.items()}
        self._indexes: dict[tuple[str, str], dict[Any, list[int]]] = {}

    def index(self, table: str, column: str) -> dict[Any, list[int]]:
        key = (table, column)
        idx = self._indexes.get(key)
        if idx is None:
            idx = defaultdict(list)
            for row_id, row in self.rows[table].items():
                idx[row[column]].append(row_id)
            self._indexes[key] = idx = dict(idx)
        return idx


class Db:
    """One session: the base (shared, read-only) under the session's own rows."""

    __slots__ = ("base", "own", "next_id")

    def __init__(self, base: Base, seed_rows: dict[str, list[Row]] | None):
        self.base = base
        self.own: dict[str, dict[int, Row]] = {t: {} for t in base.rows}
        self.next_id: dict[str, int] = {}
        for table, rows in (seed_rows or {}).items():
            mine = self.own[table]
            for row in rows:  # an upsert, as StateGym's seeding does
                current = mine.get(row["id"]) or base.rows[table].get(row["id"])
                mine[row["id"]] = {**current, **row} if current else dict(row)

    def get(self, table: str, row_id: Any) -> Row | None:
        row = self.own[table].get(row_id)
        return row if row is not None else self.base.rows[table].get(row_id)

    def mut(self, table: str, row_id: int) -> Row:
        """The session's own (writable) copy of a row."""
        row = self.own[table].get(row_id)
        if row is None:
            row = self.own[table][row_id] = dict(self.base.rows[table][row_id])
        return row

    def insert(self, table: str, row: Row) -> Row:
        new_id = self.next_id.get(table)
        if new_id is None:
            new_id = max(self.base.max_id[table], max(self.own[table], default=0)) + 1
        self.next_id[table] = new_id + 1
        row = {"id": new_id, **row}
        self.own[table][new_id] = row
        return row

    def where(self, table: str, column: str, value: Any) -> list[Row]:
        """Rows whose column equals value, in id order (base index + the session's rows)."""
        own = self.own[table]
        found = {
            i: own.get(i) or self.base.rows[table][i]
            for i in self.base.index(table, column).get(value, ())
        }
        for row_id, row in own.items():
            if row.get(column) == value:
                found[row_id] = row
            elif row_id in found:
                del found[row_id]
        return [found[i] for i in sorted(found)]

    def first(self, table: str, column: str, value: Any) -> Row | None:
        rows = self.where(table, column, value)
        return rows[0] if rows else None

    def scan(self, table: str) -> list[Row]:
        rows = {**self.base.rows[table], **self.own[table]}
        return [rows[i] for i in sorted(rows)]

    def state(self, tables: tuple[str, ...]) -> dict[str, dict[int, Row]]:
        """What verify compares: the session's own rows of the compared tables."""
        return {t: self.own[t] for t in tables}


def same_state(a: Db, b: Db, tables: tuple[str, ...]) -> bool:
    """Whole-state equality of two sessions over the same base: only own rows can differ."""
    for t in tables:
        mine, theirs = a.own[t], b.own[t]
        for row_id in mine.keys() | theirs.keys():
            if a.get(t, row_id) != b.get(t, row_id):
                return False
    return True


class ToolFailed(Exception):
    pass


def cents(value: float) -> float:
    return round(value, 2) + 0.0
