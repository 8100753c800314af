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

from app.storage.meta import SEED_CHANGES, read_meta, seed_changes_value, take_changes, write_meta
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
    "mark_seeded",
    "memory_from_image",
    "read_only_image",
    "raw_rows",
    "serialize",
    "snapshot_image",
    "template_image",
    "template_of",
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


def mark_seeded(conn: Connection, snapshot: str) -> None:
    """Make the database `conn` is on (change tracking installed before its seed: the task
    generator's base) the snapshot `snapshot`: the rows written so far are recorded as its
    seed's (`seed_changes`, which verify patches its template's dump with) and the records
    cleared, so what is written from here on is what a session of it wrote. In the caller's
    transaction."""
    raw = image_connection(conn)
    write_meta(raw, {"snapshot": snapshot, SEED_CHANGES: seed_changes_value(*take_changes(raw))})


def template_of(conn: Connection) -> str:
    """The fingerprint of the template the database `conn` is on was built from."""
    return read_meta(image_connection(conn))["template"]


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
