"""Task rows of the control database, written once per task (`task_rows`, control_schema.py).

A seed inserts its task's row unless present (ON CONFLICT DO NOTHING, race-safe across workers
and replicas) and its session row naming it; `Digests` remembers the rows this process wrote,
so a seed of a task seen before writes its session row alone. Rows no session names are deleted
when sessions go (`drop_unused`); the sessions' foreign key makes a seed that names a row deleted
meanwhile fail, and the seed then writes both again (ControlDB.add).
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy import Connection, Engine, delete, exists
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from app.storage.control_schema import sessions_table, task_rows_table

# Task rows a process remembers writing. Bounded: a digest forgotten costs one insert-if-absent.
WRITTEN_DIGESTS = 4096


def insert_task_row(conn: Connection, row: dict[str, Any]) -> None:
    """Insert a task row unless its digest is stored already (the dialect's ON CONFLICT DO
    NOTHING: racing inserts of one task leave one row and fail none)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(dialect.insert(task_rows_table).values(**row).on_conflict_do_nothing())


class Digests:
    """A bounded, thread-safe set of recently written task digests (least recent go first)."""

    def __init__(self, capacity: int = WRITTEN_DIGESTS):
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, digest: str) -> bool:
        with self._lock:
            if digest not in self._seen:
                return False
            self._seen.move_to_end(digest)
            return True

    def add(self, digest: str) -> None:
        with self._lock:
            self._seen[digest] = None
            self._seen.move_to_end(digest)
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)

    def discard(self, digest: str) -> None:
        with self._lock:
            self._seen.pop(digest, None)


def drop_unused(engine: Engine, digests: builtins.list[str]) -> None:
    """Delete those of `digests`' task rows that no session names. A seed naming one in between
    fails the batch by the foreign key (PostgreSQL): each is then tried alone."""
    if not digests:
        return
    tr, s = task_rows_table, sessions_table
    unused = ~exists().where(s.c.task_digest == tr.c.digest)
    try:
        with engine.begin() as conn:
            conn.execute(delete(tr).where(tr.c.digest.in_(digests), unused))
    except IntegrityError:
        for digest in digests:
            try:
                with engine.begin() as conn:
                    conn.execute(delete(tr).where(tr.c.digest == digest, unused))
            except IntegrityError:
                pass  # named again: kept
