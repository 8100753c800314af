"""What a session database wrote since its snapshot (`tracked_changes`), whichever way it tracks.

The session's backend reads it (app/storage/driver.py): PostgreSQL from its step log
(app/storage/postgres/changes.py); SQLite with `changes_in_file` below, from the step log of a
snapshot built with one (app/storage/log_changes.py), else from the change-tracking triggers'
own records (the task generator's bases, files of older releases; app/storage/meta.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from app.storage.driver import driver_of
from app.storage.log_changes import changes_from_log
from app.storage.meta import LOG_TRACKING, Changes, changes_from_triggers, read_tracking_meta


def tracked_changes(conn: Any, tables: Iterable[str]) -> Changes | None:
    """What the database wrote since its snapshot, or None when it does not track changes of
    every one of `tables` (built before tracking existed, not from a snapshot, migrated, or a
    table renamed or recreated without its triggers): the caller then reads every table whole.

    `conn` is a sqlite3 connection or a SQLAlchemy Connection (read in the caller's transaction).
    """
    if isinstance(conn, sqlite3.Connection):
        return changes_in_file(conn, tables)
    return driver_of(conn).tracked_changes(conn, tables)


def changes_in_file(conn: sqlite3.Connection, tables: Iterable[str]) -> Changes | None:
    """`tracked_changes` of a SQLite database, read on its sqlite3 connection."""
    meta = read_tracking_meta(conn)
    if meta is None:
        return None
    if meta.get("change_tracking") == LOG_TRACKING:
        return changes_from_log(conn, meta, tables)
    return changes_from_triggers(conn, meta, tables)
