"""The SQLite backend: each session is a file cloned from its task's snapshot image.

Layout and images: app/storage/sqlite/store.py. An open session keeps its own sqlite3
connection and a SQLAlchemy Connection over it from the process's shared engine
(app/storage/sqlite/db.py), so a tool call is one BEGIN IMMEDIATE transaction and no reconnect.
Calls on one session are serialised across worker processes by SQLite's write lock; a close is
written into the file's meta table, so every worker sees it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from app.core.tasks import TaskSpec
from app.errors import SessionClosed, SessionUnavailable
from app.sdk.environment import Environment, Tool, ToolContext
from app.storage.base import Capabilities, NotOnDisk, SessionHandle, Work
from app.storage.control import ControlDB, SessionRecord
from app.storage.meta import read_meta, read_status, reopened_image, write_meta
from app.storage.snapshots import Snapshot, check_session_id
from app.storage.sqlite import branch
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.packing import PACK_SUFFIX, Packer, pack_path, unpack_file
from app.storage.sqlite.store import Store
from app.storage.steplog import has_step_log, write_alone

T = TypeVar("T")
# Closes queued on the closer thread past which a closed session is not packed (its close still
# runs): packing is ~2 ms of CPU and two fsyncs a session, and must not make the queue grow.
PACK_BACKLOG_MAX = 64
log = logging.getLogger("stategym.sqlite")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # environment names, before they join a path
CAPABILITIES = Capabilities(
    name="sqlite", inline_calls=True, raw_sqlite=True, file_copy=True, step_log=True
)


@dataclass
class OpenSession:
    id: str
    conn: sqlite3.Connection
    bind: Connection  # SQLAlchemy over `conn`, from the process's shared engine
    ctx: ToolContext
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    logs_steps: bool = False  # the file keeps a step log (app/storage/steplog.py)

    def close(self) -> None:
        self.bind.close()
        self.conn.close()


class SqliteBackend:
    """Session files under `<data_dir>/sessions/<env>/`, the control database beside them."""

    capabilities = CAPABILITIES

    def __init__(
        self,
        data_dir: Path,
        env: Environment,
        store: Store,
        control: ControlDB,
        *,
        pack_closed: bool = True,
    ):
        self.data_dir = data_dir
        self.env = env
        self.snapshots = self.store = store
        self.control = control
        # Kept sessions stored as their pages that differ from the template (packing.py).
        self._packer = Packer(store.template_image) if pack_closed else None
        # Closes kept sessions' connections (their WAL checkpoint) off the request path.
        self._closer: ThreadPoolExecutor | None = None
        self._closing = 0  # closes queued on the closer thread, not yet done
        self._backlog_warned = 0.0
        self._closer_lock = threading.Lock()

    def snapshot(self, task: TaskSpec) -> Snapshot:
        return self.store.snapshot(task)

    def location(self, session_id: str) -> str:
        return str(self.store.session_path(session_id).relative_to(self.data_dir))

    def create(self, session_id: str, snapshot: Snapshot) -> None:
        self.store.create_session_file(session_id, snapshot)

    def open(self, session_id: str, *, ahead: bool = False) -> OpenSession:
        conn = self.store.open_session(session_id)
        meta = read_meta(conn)
        if meta.get("status") == "closed":
            conn.close()
            raise SessionClosed(
                f"session {session_id} is closed", hint="Start a new rollout with /seed_session."
            )
        now = datetime.fromisoformat(meta["now"]) if "now" in meta else self.env.default_now
        ctx = ToolContext(now=now, session_id=session_id, task_id=None)
        handle = OpenSession(session_id, conn, sqlite_db.bind_connection(conn), ctx)
        handle.logs_steps = has_step_log(conn)
        if ahead:
            _create_wal(conn)
            # Nobody has called it yet, and many such sessions may wait (a whole batch): give
            # back the pages the open read (the schema's), ~85 KB of what a retail connection
            # holds; its first call reads what it needs again, from the OS's cache.
            conn.execute("PRAGMA shrink_memory")
        return handle

    def call(
        self, handle: SessionHandle, tool: Tool, work: Work, *, limit_ms: int, inline: bool
    ) -> dict[str, Any]:
        assert isinstance(handle, OpenSession)
        # Read in the session file itself, so a close by another worker is seen at once.
        if read_status(handle.conn) == "closed":
            raise SessionClosed(f"session {handle.id} is closed")
        if not inline:
            return work(handle.bind)
        # On the event loop: never wait for another process's write lock, answer "busy".
        handle.conn.execute("PRAGMA busy_timeout=0")
        try:
            return work(handle.bind)
        finally:
            handle.conn.execute(f"PRAGMA busy_timeout={sqlite_db.BUSY_TIMEOUT_MS}")

    def read(self, handle: SessionHandle, work: Callable[[Connection], T]) -> T:
        assert isinstance(handle, OpenSession)
        return work(handle.bind)

    def release(self, handle: SessionHandle | None, session_id: str, *, delete: bool) -> None:
        """Mark the session closed in its file (committed before this returns), then close its
        connection. Closing the last connection of a WAL file checkpoints it and fsyncs (~10 ms
        of a 10.5 ms close, bench/history/rounds.md): a file about to be deleted skips the fsync,
        a kept one is closed by a background thread, off the request path. A kill before that thread
        ran leaves a WAL that the next open replays, so the close mark is never lost."""
        path = self.store.session_path(session_id)
        if isinstance(handle, OpenSession):
            try:
                write_meta(handle.conn, {"status": "closed"})
            except BaseException:
                handle.close()
                raise
            self._close_connection(handle, delete=delete)
        elif path.exists():
            self._mark_file_closed(path, delete=delete)
        if delete:
            self.drop(session_id)

    def _mark_file_closed(self, path: Path, *, delete: bool) -> None:
        """The close mark written in a session file no connection of ours holds (a session of
        another worker's, or closed already: then its pack may be under way, and a file that
        vanishes under us was closed)."""
        try:
            conn = sqlite_db.open_file(path)
        except sqlite3.DatabaseError:
            if path.exists():
                raise
            return
        try:
            if read_status(conn) != "closed":
                write_meta(conn, {"status": "closed"})
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not path.exists():
                return  # packed (only a closed session is) or dropped meanwhile
            raise
        self._close_connection(conn, delete=delete)

    def _close_connection(self, conn: OpenSession | sqlite3.Connection, *, delete: bool) -> None:
        if delete:
            raw = conn.conn if isinstance(conn, OpenSession) else conn
            raw.execute("PRAGMA synchronous=OFF")  # the checkpoint need not reach the disk
            conn.close()
            return
        with self._closer_lock:
            if self._closer is None:
                self._closer = ThreadPoolExecutor(1, thread_name_prefix="stategym-close")
            packer = self._packer
            if packer is not None and self._closing >= PACK_BACKLOG_MAX:
                packer = None  # behind: the file stays plain (`stategym sessions pack` later)
                if time.monotonic() - self._backlog_warned > 60:
                    self._backlog_warned = time.monotonic()
                    log.warning(
                        "%d closes queued: closed sessions are kept unpacked until it drains",
                        self._closing,
                    )
            self._closing += 1
            self._closer.submit(self._close_in_background, conn, packer)

    def flush_closes(self) -> None:
        """Wait until every close queued so far is done, its pack written (tests, tools)."""
        with self._closer_lock:
            closer = self._closer
        if closer is not None:
            closer.submit(lambda: None).result()

    def _close_in_background(
        self, conn: OpenSession | sqlite3.Connection, packer: Packer | None
    ) -> None:
        try:
            _close_quietly(conn, packer)
        finally:
            with self._closer_lock:
                self._closing -= 1

    def drop(self, session_id: str) -> None:
        _remove_files(self.store.session_path(session_id))

    def last_activity(self, session_id: str, created_at: datetime) -> float:
        """Unix time of the session's last write: its file or WAL mtime, else its creation."""
        path = self.store.session_path(session_id)
        stamps = [created_at.replace(tzinfo=UTC).timestamp()]
        for candidate in (path, path.with_name(path.name + "-wal")):
            with contextlib.suppress(FileNotFoundError):
                stat = candidate.stat()
                # Opening a WAL database creates an empty -wal file: that is not a write.
                if stat.st_size:
                    stamps.append(stat.st_mtime)
        return max(stamps)

    def session_bytes(self, handle: SessionHandle) -> int:
        """The database's pages (what one copy of it writes)."""
        assert isinstance(handle, OpenSession)
        pages = handle.conn.execute("PRAGMA page_count").fetchone()[0]
        return int(pages) * int(handle.conn.execute("PRAGMA page_size").fetchone()[0])

    def stored_bytes(self) -> int:
        return 0  # every session is a file of the data dir

    def maintain(self) -> None:
        """Nothing to do: a closed session's file goes whole, and SQLite reuses the control
        database's free pages itself."""

    def view(self) -> SqliteView:
        return SqliteView(self.data_dir)

    # --- steps, forks and copies (app/storage/sqlite/branch.py) -------------------------------
    def logs_steps(self, handle: SessionHandle) -> bool:
        return isinstance(handle, OpenSession) and handle.logs_steps

    def write_failed_step(self, handle: SessionHandle, write: Callable[[Any], None]) -> None:
        assert isinstance(handle, OpenSession)
        write_alone(handle.conn, write)

    def fork(self, handle: SessionHandle, session_ids: list[str], at_step: int | None) -> int:
        assert isinstance(handle, OpenSession)
        image, step = branch.state_image(handle.conn, at_step, self._tables)
        for session_id in session_ids:  # each written whole (temp file + rename)
            sqlite_db.write_image(self.store.session_path(session_id), image, wal=True)
        return step

    def rewind(self, handle: SessionHandle, to_step: int) -> int:
        assert isinstance(handle, OpenSession)
        return branch.rewind(handle.conn, to_step, self._tables)

    def export_image(self, handle: SessionHandle) -> tuple[bytes, int]:
        assert isinstance(handle, OpenSession)
        return branch.state_image(handle.conn, None, self._tables)

    def open_image(self, image: bytes) -> tuple[bytes, dict[str, str]]:
        if image[:1] == b"{":
            raise ValueError("it is a PostgreSQL session export: restore it on a PostgreSQL server")
        return reopened_image(image)

    def restore_image(self, session_id: str, image: bytes) -> None:
        sqlite_db.write_image(self.store.session_path(session_id), image, wal=True)

    @property
    def _tables(self) -> list[str]:
        return list(self.env.metadata.tables)

    def dispose(self) -> None:
        with self._closer_lock:
            closer, self._closer = self._closer, None
        if closer is not None:
            closer.shutdown(wait=True)  # every closed session's connection closed
        self.store.drop_spare()
        self.control.dispose()


def _create_wal(conn: sqlite3.Connection) -> None:
    """A session's first write creates its WAL file and syncs its header and the directory
    (~0.5 ms, most of what made a rollout's first call slower than the next ones): done now by
    writing the header's user_version back unchanged, which changes no row, no meta key and
    nothing a dump shows. At best: a session that cannot be written now (full disk) still opens."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            conn.execute(f"PRAGMA user_version={version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error:
        log.debug("could not create the WAL of a session opened ahead", exc_info=True)


def _close_quietly(conn: OpenSession | sqlite3.Connection, packer: Packer | None = None) -> None:
    raw = conn.conn if isinstance(conn, OpenSession) else conn
    path = raw.execute("PRAGMA database_list").fetchone()[2] if packer is not None else ""
    try:
        conn.close()
    except Exception:  # the close mark is committed; a failed checkpoint is redone on open
        log.exception("closing a closed session's connection failed")
        return
    if packer is not None and path:
        try:
            packer.pack(Path(path))
        except Exception:  # the plain file stays, whole: it is read as before
            log.exception("packing a closed session's file failed")


def _remove_files(path: Path, *, dry_run: bool = False) -> int:
    freed = 0
    for suffix in ("", "-wal", "-shm", PACK_SUFFIX):  # the pack last: see packing.pack_file
        target = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):  # a pack in progress may remove it first
            size = target.stat().st_size
            if not dry_run:
                os.unlink(target)
            freed += size
    return freed


class SqliteView:
    """Session files opened read-only (`mode=ro`, or `immutable=1` once closed and
    checkpointed); paths are built from checked parts only, never from the stored `file`."""

    capabilities = CAPABILITIES

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir

    def _path(self, record: SessionRecord) -> Path:
        if not _NAME_RE.fullmatch(record.env):
            raise SessionUnavailable(f"session {record.id} has an invalid environment name")
        path = self.data_dir / "sessions" / record.env / f"{check_session_id(record.id)}.sqlite"
        if not path.resolve().is_relative_to(self.data_dir.resolve()):
            raise SessionUnavailable(f"session {record.id}'s file is outside the data dir")
        return path

    def present(self, record: SessionRecord) -> bool:
        path = self._path(record)
        return path.is_file() or pack_path(path).is_file()

    def packed_image(self, record: SessionRecord) -> bytes | None:
        """The image of a session stored packed (packing.py), None when it is a plain file."""
        path = self._path(record)
        if path.is_file():
            return None
        try:
            return unpack_file(pack_path(path), record.id)
        except FileNotFoundError:
            if path.is_file():  # unpacked again in between (a migration): read the file
                return None
            raise NotOnDisk(
                f"session {record.id} has no database file (removed by retention or gc?)"
            ) from None

    def file(self, record: SessionRecord, scratch: Path) -> Path:
        image = self.packed_image(record)
        if image is None:
            return self._path(record)
        target = scratch / f"{check_session_id(record.id)}.sqlite"
        if not target.is_file():
            sqlite_db.write_image(target, image, wal=False)
        return target

    def _open(self, record: SessionRecord) -> sqlite3.Connection:
        path = self._path(record)
        image = self.packed_image(record)
        if image is not None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.deserialize(sqlite_db.as_legacy_image(image))
            conn.execute("PRAGMA query_only=ON")
            return conn
        # No -wal file: no connection has the session open (a live one keeps it), so read it as
        # immutable, which creates no -wal/-shm. Otherwise read through the WAL, read-only.
        wal = path.with_name(path.name + "-wal")
        mode = "mode=ro" if wal.exists() else "immutable=1"
        try:
            return open_read_only(path, mode)
        except sqlite3.DatabaseError as exc:
            if not path.exists() and pack_path(path).exists():  # packed while opening it
                return self._open(record)
            raise SessionUnavailable(
                f"session {record.id}'s database cannot be opened (corrupt?): {exc}"
            ) from None

    @contextmanager
    def raw(self, record: SessionRecord) -> Iterator[sqlite3.Connection]:
        """The session's sqlite3 connection, read-only, checked to be the record's env: its file,
        or its pack unpacked in memory."""
        conn = self._open(record)
        try:
            meta = read_meta(conn)
            if meta.get("env") != record.env:
                raise SessionUnavailable(
                    f"session {record.id}'s file belongs to environment {meta.get('env')!r}, "
                    f"not {record.env!r}"
                )
            yield conn
        except (sqlite3.DatabaseError, DBAPIError) as exc:
            raise SessionUnavailable(
                f"session {record.id}'s database cannot be read (corrupt?): {exc}"
            ) from None
        finally:
            conn.close()

    @contextmanager
    def connect(self, record: SessionRecord) -> Iterator[Connection]:
        with self.raw(record) as conn:
            engine = sqlite_db.bind_engine(conn, begin="BEGIN")
            try:
                with engine.connect() as c:
                    yield c
            finally:
                engine.dispose()

    def meta(self, record: SessionRecord) -> dict[str, str]:
        with self.raw(record) as conn:
            return read_meta(conn)

    @contextmanager
    def scratch(self, record: SessionRecord, env: Environment) -> Iterator[Connection]:
        conn = sqlite_db.memory_from_image(self.image(record))
        bind = sqlite_db.bind_connection(conn, begin="BEGIN")
        try:
            with bind.begin() as transaction:
                yield bind
                transaction.rollback()
        finally:
            bind.close()
            conn.close()

    def image(self, record: SessionRecord) -> bytes:
        """A consistent copy of the session database (rollback-journal mode, one file)."""
        with self.raw(record) as conn:
            if not conn.execute("PRAGMA database_list").fetchone()[2]:  # a pack, in memory
                return sqlite_db.as_legacy_image(conn.serialize())
            mem = sqlite3.connect(":memory:")
            try:
                conn.backup(mem)
                return sqlite_db.as_legacy_image(mem.serialize())
            finally:
                mem.close()

    def remove(self, record: SessionRecord, *, dry_run: bool = False) -> int:
        return _remove_files(self._path(record), dry_run=dry_run)


def open_read_only(path: Path, mode: str = "mode=ro") -> sqlite3.Connection:
    """Open a database file read-only through a URI built from the resolved path."""
    uri = f"{path.resolve().as_uri()}?{mode}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={sqlite_db.BUSY_TIMEOUT_MS}")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # fails on a non-database
    return conn
