"""Snapshot images: what callers above storage use to build, cache and replay on task images.

A snapshot image is a SQLite database image on both backends (a PostgreSQL session is cloned
from a template built out of it): gold replays, seed dumps, `tasks check` and offline re-verify
run on in-memory copies of it. This is that facility's one door; the session backends stay
behind app/storage/base.py.
"""

from __future__ import annotations

from app.storage.snapshots import Snapshot
from app.storage.sqlite.db import bind_connection, bind_engine, memory_from_image
from app.storage.sqlite.store import Store

__all__ = ["Snapshot", "Store", "bind_connection", "bind_engine", "memory_from_image"]
