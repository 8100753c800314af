"""Snapshot images: what callers above storage use to build, cache and replay on task images.

A snapshot image is a SQLite database image on both backends (a PostgreSQL session is cloned
from a template built out of it): gold replays, seed dumps, `tasks check` and offline re-verify
run on in-memory copies of it. This is that facility's one door; the session backends stay
behind app/storage/base.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from app.storage.snapshots import Snapshot
from app.storage.sqlite.backend import open_read_only
from app.storage.sqlite.db import bind_connection, bind_engine, memory_from_image
from app.storage.sqlite.store import Store

# A connection to an in-memory copy of an image (memory_from_image): replays run on it.
ImageConnection = sqlite3.Connection

__all__ = [
    "ImageConnection",
    "Snapshot",
    "Store",
    "bind_connection",
    "bind_engine",
    "memory_from_image",
    "read_only_image",
    "raw_rows",
    "serialize",
]


def serialize(conn: Connection) -> bytes:
    """The image of the SQLite database `conn` is on (an in-memory one, built by the caller)."""
    return _sqlite3(conn).serialize()


def raw_rows(db: Session, sql: str) -> list[tuple[Any, ...]]:
    """`sql` run on the session's own sqlite3 connection, its uncommitted writes included: no
    statement compilation or type processing (for dumps that only serve comparisons)."""
    return _sqlite3(db.connection()).execute(sql).fetchall()


def read_only_image(path: Path) -> bytes:
    """The image of the SQLite file at `path`, read without writing to it (a retained
    session, or a pristine snapshot file)."""
    conn = open_read_only(path)
    try:
        mem = sqlite3.connect(":memory:")
        conn.backup(mem)
        return mem.serialize()
    finally:
        conn.close()


def _sqlite3(conn: Connection) -> sqlite3.Connection:
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection), "snapshot images are SQLite databases"
    return raw
