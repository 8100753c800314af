"""SQLite's driver (sqlite3) as app/storage/driver.py asks for it: errors, the time limit, and
the step log and changes, read on the session's sqlite3 connection itself (no SQLAlchemy round
trip)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from app.storage import steplog, tracking
from app.storage.driver import Bind, Classified, DbError
from app.storage.meta import Changes
from app.storage.sqlite import db as sqlite_db


def classify(exc: DBAPIError, bind: Bind) -> Classified | None:
    reason = str(exc.orig) if exc.orig is not None else str(exc)
    if isinstance(exc, IntegrityError):
        return DbError.CONSTRAINT, {"reason": reason}
    if not isinstance(exc, OperationalError):
        return None
    if "interrupted" in reason:  # the progress handler of `time_limit` below
        return DbError.TIME_LIMIT, {}
    if "database is locked" in reason:
        return DbError.BUSY, {}
    if "disk is full" in reason:
        cap = _size_limit(bind)
        if cap is not None:
            return DbError.SIZE_LIMIT, {"cap_mib": cap // 2**20}
        return DbError.STORAGE_FULL, {}
    return DbError.DATABASE, {"reason": reason}


WALL_BACKSTOP = 5


@contextmanager
def time_limit(db: Session, limit_ms: int) -> Iterator[None]:
    """SQLite's progress handler, called every 10k VM steps: a truthy answer makes SQLite abort
    the statement with "interrupted". The limit is on this thread's CPU time, SQLite's work:
    time spent waiting for the GIL or a core on a loaded machine does not count, so the same
    call (a gold replay's included) gives the same answer under load. WALL_BACKSTOP times the
    limit in wall-clock time stops it whatever the load."""
    raw = db.connection().connection.driver_connection
    if not isinstance(raw, sqlite3.Connection):
        yield
        return
    cpu_deadline = time.thread_time() + limit_ms / 1000
    wall_deadline = time.monotonic() + WALL_BACKSTOP * limit_ms / 1000

    def expired() -> bool:
        return time.thread_time() > cpu_deadline or time.monotonic() > wall_deadline

    raw.set_progress_handler(expired, 10_000)
    try:
        yield
    finally:
        raw.set_progress_handler(None, 0)


def is_storage_full(exc: BaseException) -> bool:
    return sqlite_db.is_disk_full(exc)


def _size_limit(bind: Bind) -> int | None:
    """The session's size cap when a "database or disk is full" was that cap (not the disk)."""
    raw = getattr(getattr(bind, "connection", None), "driver_connection", None)
    return sqlite_db.size_limit_hit(raw) if isinstance(raw, sqlite3.Connection) else None


def step_log(conn: Connection) -> steplog.SqliteStepLog | None:
    raw = _raw(conn)
    return steplog.SqliteStepLog(raw) if steplog.has_step_log(raw) else None


def tracked_changes(conn: Connection, tables: Iterable[str]) -> Changes | None:
    return tracking.changes_in_file(_raw(conn), tables)


def write_step(conn: Connection, step: Mapping[str, Any]) -> None:
    steplog.write_step(_raw(conn), step)


def _raw(conn: Connection) -> sqlite3.Connection:
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw
