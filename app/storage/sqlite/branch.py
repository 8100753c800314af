"""Copies of a SQLite session's state: fork, rewind, export and restore (docs/steps.md).

A session's state is its database image. A fork serialises the parent's database (one read
transaction, consistent), rewinds the copy in memory when asked for an earlier step, and writes
each child's file with `write_image` (a temp file renamed into place): a kill -9 leaves a child
whole or absent, never half-written, and the parent is only read. A rewind is the undo log
applied in one transaction on the session's own connection (app/storage/steplog.py): kill -9
mid-way and SQLite rolls it back on next open.
"""

from __future__ import annotations

import sqlite3

from app.errors import CannotRewind
from app.storage.sqlite import db as sqlite_db
from app.storage.steplog import SqliteStepLog, UndoUnavailable, step_count, undo_to
from app.storage.steplog import check_step as check_log_step


def check_step(conn: sqlite3.Connection, to_step: int, tables: list[str]) -> int:
    """The session's step count, after checking `to_step` is one of its steps (0: as seeded)."""
    return check_log_step(SqliteStepLog(conn), to_step, tables)


def rewind(conn: sqlite3.Connection, to_step: int, tables: list[str]) -> int:
    """Undo the steps after `to_step` in one transaction; returns how many were undone."""
    check_step(conn, to_step, tables)
    conn.execute("BEGIN IMMEDIATE")
    try:
        undone = undo_to(conn, to_step)
    except (UndoUnavailable, sqlite3.Error) as exc:
        conn.execute("ROLLBACK")
        raise CannotRewind(f"rewind to step {to_step} failed and was rolled back: {exc}") from exc
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return undone


def state_image(
    conn: sqlite3.Connection, at_step: int | None, tables: list[str]
) -> tuple[bytes, int]:
    """The session's database image as of `at_step` (default: now) and that step; the live
    file is only read."""
    count = check_step(conn, at_step, tables) if at_step is not None else step_count(conn)
    image = conn.serialize()
    if at_step is None or at_step == count:
        return image, count
    copy = sqlite_db.memory_from_image(image)
    try:
        rewind(copy, at_step, tables)
        return copy.serialize(), at_step
    finally:
        copy.close()
