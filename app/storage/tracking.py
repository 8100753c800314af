"""What a session database wrote since its snapshot (`tracked_changes`), whichever way it tracks.

- PostgreSQL: the backend's reader in `conn.info[CHANGE_READER]` (its step log,
  app/storage/postgres/changes.py);
- SQLite, a snapshot built with a step log: read from that log (app/storage/log_changes.py);
- SQLite, the task generator's bases and files of older releases: the change-tracking
  triggers' own records (app/storage/meta.py `changes_from_triggers`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.storage.log_changes import changes_from_log
from app.storage.meta import (
    CHANGE_READER,
    LOG_TRACKING,
    Changes,
    changes_from_triggers,
    read_tracking_meta,
)


def tracked_changes(conn: Any, tables: Iterable[str]) -> Changes | None:
    """What the database wrote since its snapshot, or None when it does not track changes of
    every one of `tables` (built before tracking existed, not from a snapshot, migrated, or a
    table renamed or recreated without its triggers): the caller then reads every table whole.

    `conn` is a sqlite3 connection or a SQLAlchemy Connection (read in the caller's transaction).
    """
    if getattr(getattr(conn, "dialect", None), "name", "sqlite") != "sqlite":
        reader = conn.info.get(CHANGE_READER)
        found: Changes | None = reader(conn, tables) if reader is not None else None
        return found
    if hasattr(conn, "exec_driver_sql"):  # read on its sqlite3 connection: 5x cheaper a query
        conn = conn.connection.driver_connection
    meta = read_tracking_meta(conn)
    if meta is None:
        return None
    if meta.get("change_tracking") == LOG_TRACKING:
        return changes_from_log(conn, meta, tables)
    return changes_from_triggers(conn, meta, tables)
