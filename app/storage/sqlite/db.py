"""Low-level SQLite plumbing: opening files, cloning images, binding SQLAlchemy to a connection.

Python's sqlite3 legacy transaction handling is switched off (`isolation_level=None`) and the
SQLAlchemy engine emits BEGIN itself, so a tool call is exactly one SQLite transaction.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import ConnectionPoolEntry, Pool, StaticPool
from sqlalchemy.pool.base import _ConnectionRecord

from app.errors import StorageFull

BUSY_TIMEOUT_MS = 10_000
# Offsets 18 and 19 of the SQLite header are the file-format read/write versions: 2 means WAL.
_WAL_HEADER_OFFSETS = (18, 19)


def configure(conn: sqlite3.Connection, *, wal: bool) -> sqlite3.Connection:
    conn.execute("PRAGMA foreign_keys=ON")
    # REPLACE (and UPDATE OR REPLACE) deletes the rows it conflicts with; only with recursive
    # triggers on do their DELETE triggers fire, i.e. the change tracking records them and the
    # environments' rules written as BEFORE DELETE triggers hold (docs/verification.md).
    conn.execute("PRAGMA recursive_triggers=ON")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if wal:
        # WAL + synchronous=NORMAL: a killed process loses no committed transaction; only a
        # power loss can drop the last few (docs/durability.md explains the choice).
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def open_file(path: Path, *, create: bool = False, wal: bool = True) -> sqlite3.Connection:
    """Open a database file; without `create` a missing file is an error, never a new empty DB."""
    mode = "rwc" if create else "rw"
    conn = sqlite3.connect(
        f"file:{path}?mode={mode}", uri=True, isolation_level=None, check_same_thread=False
    )
    return configure(conn, wal=wal)


def open_memory() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    return configure(conn, wal=False)


def memory_from_image(image: bytes) -> sqlite3.Connection:
    """A private in-memory database holding a copy of `image` (a serialized database)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.deserialize(as_legacy_image(image))
    return configure(conn, wal=False)


def image_of(conn: sqlite3.Connection) -> bytes:
    return conn.serialize()


def as_wal_image(image: bytes) -> bytes:
    """The same database image, marked as WAL so the file is born in WAL mode."""
    data = bytearray(image)
    for offset in _WAL_HEADER_OFFSETS:
        data[offset] = 2
    return bytes(data)


def as_legacy_image(image: bytes) -> bytes:
    if image[18:20] == b"\x01\x01":  # already (the images we build): no 0.8 MB copy
        return image
    data = bytearray(image)
    for offset in _WAL_HEADER_OFFSETS:
        data[offset] = 1
    return bytes(data)


def image_of_file(path: Path) -> bytes:
    """A consistent image of a database file (reads through SQLite, so WAL content is included)."""
    src = open_file(path, wal=False)
    try:
        mem = sqlite3.connect(":memory:", check_same_thread=False)
        src.backup(mem)
        return mem.serialize()
    finally:
        src.close()


@contextmanager
def _atomic_write(path: Path) -> Iterator[Path]:
    """A temp file to write beside `path`, renamed onto it when the block ends; on OSError it
    goes, and a full disk is StorageFull."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per writer: two threads may write the same (identical) gold or snapshot at once.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # a partial temp file would eat what space is left
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise StorageFull(
                f"no space left to write {path.name} in the data dir",
                hint="Free disk space (e.g. `stategym sessions gc`) and retry.",
            ) from exc
        raise


def write_image(path: Path, image: bytes, *, wal: bool) -> None:
    """Write a database image to `path` atomically (temp file + rename)."""
    with _atomic_write(path) as tmp:
        mode = b"\x02\x02" if wal else b"\x01\x01"
        view = memoryview(image)
        with open(tmp, "wb") as out:  # the header's mode bytes set in passing, not by a copy
            out.write(view[:18])
            out.write(mode)
            out.write(view[20:])


def is_disk_full(exc: BaseException) -> bool:
    """SQLite's or the OS's way of saying the disk (or a file-size limit) is full."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    text = str(exc).lower()
    return "database or disk is full" in text or "disk i/o error" in text


# SQLite's default max_page_count: no cap of our own on the database.
_UNCAPPED_PAGES = 0xFFFFFFFE
# After a checkpoint the WAL file is cut back to this, so a big transaction's WAL does not stay.
WAL_SIZE_LIMIT = 4 * 2**20


def cap_size(conn: sqlite3.Connection, max_bytes: int) -> None:
    """Refuse (SQLITE_FULL) any write that would grow the database past `max_bytes`. A
    connection setting, not stored in the file: set on every open of a session."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={max(1, max_bytes // page_size)}")
    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")


def size_limit_hit(conn: sqlite3.Connection) -> int | None:
    """After SQLITE_FULL: the database's size cap in bytes when that is what was reached (the
    disk had room for it to grow to the cap), None when the disk itself is full."""
    max_pages = conn.execute("PRAGMA max_page_count").fetchone()[0]
    if max_pages >= _UNCAPPED_PAGES:
        return None
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if path:
        disk = os.statvfs(os.path.dirname(path))
        if disk.f_bavail * disk.f_frsize <= (max_pages - pages) * page_size:
            return None
    return max_pages * page_size


def bind_engine(conn: sqlite3.Connection, *, begin: str = "BEGIN IMMEDIATE") -> Engine:
    """A SQLAlchemy engine over one existing connection; each transaction starts with `begin`.

    BEGIN IMMEDIATE takes the write lock up front, so two workers writing the same session
    queue on busy_timeout instead of failing with SQLITE_BUSY at commit.
    """
    engine = create_engine("sqlite://", creator=lambda: conn, poolclass=StaticPool)

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine


# --- one engine per process for session connections ------------------------------------------
# An Engine per session gave every session its own dialect and statement cache, so each new
# session recompiled every ORM statement its tools ran (several ms per rollout) and paid for
# create_engine. Sessions instead share one Engine per BEGIN mode, whose pool hands out the
# sqlite3 connection the caller lends it, and keep one SQLAlchemy Connection open per session.
_lent = threading.local()
_shared: dict[str, Engine] = {}
_shared_lock = threading.Lock()


class _LentConnectionPool(Pool):
    """Wraps whichever sqlite3 connection the calling thread lends; never opens or closes one."""

    def _do_get(self) -> ConnectionPoolEntry:
        return _ConnectionRecord(self)  # calls the creator, which returns the lent connection

    def _do_return_conn(self, record: ConnectionPoolEntry) -> None:
        pass  # the connection belongs to its session, which closes it

    def dispose(self) -> None:
        pass

    def recreate(self) -> _LentConnectionPool:
        return self

    def status(self) -> str:
        return "LentConnectionPool"


def _lent_connection() -> sqlite3.Connection:
    conn = getattr(_lent, "conn", None)
    if conn is None:
        raise RuntimeError("no sqlite3 connection lent to the shared engine on this thread")
    return conn


def _shared_engine(begin: str) -> Engine:
    with _shared_lock:
        engine = _shared.get(begin)
        if engine is None:
            engine = create_engine(
                "sqlite://", creator=_lent_connection, poolclass=_LentConnectionPool
            )

            @event.listens_for(engine, "begin")
            def _begin(connection: Any) -> None:
                # On the sqlite3 connection itself: 3 us instead of SQLAlchemy's 40 us per call.
                try:
                    connection.connection.driver_connection.execute(begin)
                except sqlite3.OperationalError as exc:  # "database is locked": a busy session
                    raise OperationalError(begin, None, exc) from exc

            _shared[begin] = engine
        return engine


def bind_connection(conn: sqlite3.Connection, *, begin: str = "BEGIN IMMEDIATE") -> Connection:
    """A SQLAlchemy Connection over `conn` from the shared engine; a Session bound to it runs
    each `begin()` as one transaction started with `begin`. Close it before closing `conn`."""
    _lent.conn = conn
    try:
        return _shared_engine(begin).connect()
    finally:
        _lent.conn = None
