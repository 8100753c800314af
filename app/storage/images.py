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
from app.storage.sqlite.db import (
    as_legacy_image,
    bind_connection,
    bind_engine,
    configure,
    memory_from_image,
)
from app.storage.sqlite.store import Store, snapshot_image, template_image

# A connection to an in-memory copy of an image (memory_from_image): replays run on it.
ImageConnection = sqlite3.Connection

__all__ = [
    "ImageConnection",
    "Snapshot",
    "Store",
    "as_legacy_image",
    "bind_connection",
    "bind_engine",
    "clone",
    "image_connection",
    "memory_from_image",
    "read_only_image",
    "raw_rows",
    "serialize",
    "snapshot_image",
    "template_image",
]


def clone(image: bytes) -> ImageConnection:
    """A private in-memory database holding `image`, configured like every session connection.

    `image` must come from serializing an in-memory database, so it is already in
    rollback-journal mode: `memory_from_image` would copy it twice more to make sure."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.deserialize(image)
    return configure(conn, wal=False)


def image_connection(conn: Connection) -> ImageConnection:
    """The in-memory database `conn` is on (bound by `bind_connection`): to serialize it, count
    the rows written (`total_changes`) or close it."""
    return _sqlite3(conn)


def serialize(conn: Connection) -> bytes:
    """The image of the SQLite database `conn` is on (an in-memory one, built by the caller)."""
    return image_connection(conn).serialize()


def raw_rows(db: Session, sql: str) -> list[tuple[Any, ...]]:
    """`sql` run on the session's own sqlite3 connection, its uncommitted writes included: no
    statement compilation or type processing (for dumps that only serve comparisons)."""
    return image_connection(db.connection()).execute(sql).fetchall()


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
