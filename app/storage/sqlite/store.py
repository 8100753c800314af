"""The Store owns database files (templates, sessions); snapshots it keeps in memory, bounded.

Layout under the data dir:
    templates/<env>/<fingerprint>.sqlite       schema + the environment's base dataset
    sessions/<env>/<session_id>.sqlite         one rollout's database (its snapshot's image)
    sessions/<env>/<session_id>.sqlite.pack    a kept closed one, packed (packing.py)

A snapshot (snapshots.py) is rebuilt from the template and the task (every control row stores
it) whenever it is not in memory; a session is written from the image (WAL-marked in passing).
Ids reach a path only after `check_session_id`.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

from app.core.lru import LRU
from app.core.tasks import TaskSpec
from app.errors import SessionClosed, SessionNotFound, SessionUnavailable, StorageFull
from app.sdk.environment import Environment
from app.storage.meta import LOG_TRACKING, read_meta
from app.storage.migrations import schema_state, upgrade_retained
from app.storage.seeding import parse_seed_now
from app.storage.snapshots import SESSION_ID_RE, Snapshot, check_session_id
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.packing import pack_path
from app.storage.sqlite.snapshots import (
    built_snapshot,
    schema_fingerprint,
    seed_base_clone,
    snapshot_image,
    template_image,
)
from app.storage.steplog import STEP_LOG_VERSION

__all__ = ["SESSION_ID_RE", "Snapshot", "Store", "check_session_id", "schema_fingerprint"]
__all__ += ["snapshot_image", "template_image"]

# Default of the byte bound (setting `snapshot_cache_mb`).
SNAPSHOT_CACHE_BYTES = 256 * 2**20
# Where releases before 2026-12-05 kept seed files (`snapshots/<env>/.seed/`, sessions copied
# from them by the kernel): a write from the image in memory costs what the copy did, and each
# file cost a 0.8 ms hash and a write (bench/history/cold_path.md, "Seed files dropped").
LEGACY_SEED_DIR = ".seed"
# Built snapshots' connections kept for their task's seed state and gold (`Store.clone`), which
# the gold built at the seed takes within milliseconds: a hand-off, not a cache. Each holds its
# image and parsed schema (~1.3 MB for retail).
BUILT_CONNECTIONS_KEPT = 8


def _tracking_versions(image: bytes) -> tuple[str | None, str | None]:
    """(change tracking, step log) versions of a snapshot image."""
    conn = sqlite_db.memory_from_image(image)
    try:
        meta = read_meta(conn)
        return meta.get("change_tracking"), meta.get("step_log")
    finally:
        conn.close()


def _close_built(_key: str, conn: sqlite3.Connection) -> None:
    conn.close()


def _image_bytes(snapshot: Snapshot) -> int:
    return len(snapshot.image)


class Store:
    def __init__(
        self,
        data_dir: Path,
        env: Environment,
        *,
        snapshot_cache_size: int = 256,
        snapshot_cache_bytes: int = SNAPSHOT_CACHE_BYTES,
        max_session_bytes: int | None = None,
    ):
        self.data_dir = data_dir
        self.env = env
        self.max_session_bytes = max_session_bytes  # None: sessions may grow without a cap
        self.fingerprint = schema_fingerprint(env)
        self._template: bytes | None = None
        self._snapshots: LRU[str, Snapshot] = LRU(
            snapshot_cache_size, max_bytes=snapshot_cache_bytes, size_of=_image_bytes
        )
        self._built: LRU[str, sqlite3.Connection] = LRU(BUILT_CONNECTIONS_KEPT, _close_built)
        self._lock = threading.RLock()
        # A clone of the seed base made ahead (`prepare_spare`), taken by the next build.
        self._spare: sqlite3.Connection | None = None
        self._spare_lock = threading.Lock()

    # --- paths -------------------------------------------------------------------------------
    @property
    def template_path(self) -> Path:
        return self.data_dir / "templates" / self.env.name / f"{self.fingerprint}.sqlite"

    def snapshot_path(self, key: str) -> Path:
        """Where releases before seed bases kept a task's snapshot (read when present)."""
        return self.data_dir / "snapshots" / self.env.name / f"{key}.sqlite"

    def session_path(self, session_id: str) -> Path:
        return self.data_dir / "sessions" / self.env.name / f"{check_session_id(session_id)}.sqlite"

    # --- templates ---------------------------------------------------------------------------
    def template_image(self) -> bytes:
        """The environment's template (schema + base data), built once and kept on disk."""
        if self._template is None:
            with self._lock:
                if self._template is None:
                    self._template = self._load_or_build_template()
        return self._template

    def _load_or_build_template(self) -> bytes:
        path = self.template_path
        if path.exists():
            return sqlite_db.image_of_file(path)
        built = template_image(self.env)
        sqlite_db.write_image(path, built, wal=False)
        return built

    # --- snapshots ---------------------------------------------------------------------------
    def snapshot(self, task: TaskSpec) -> Snapshot:
        """The task's seeded state: from memory, else built from the template (in memory only;
        a snapshot file of an earlier release is read instead when present)."""
        key = task.snapshot_key
        cached = self._snapshots.get(key)
        if cached is not None:
            return cached
        with self._lock:
            cached = self._snapshots.get(key)
            if cached is None:
                cached = self._load_or_build_snapshot(task, key)
                self._snapshots.put(key, cached)
        return cached

    def _load_or_build_snapshot(self, task: TaskSpec, key: str) -> Snapshot:
        path = self.snapshot_path(key)
        now = parse_seed_now((task.seed or {}).get("now"), self.env.default_now)
        if path.exists():
            image = sqlite_db.image_of_file(path)
            if _tracking_versions(image) == (LOG_TRACKING, STEP_LOG_VERSION):
                return Snapshot(key, image, now)
            # Built by an older release: rebuilt, with today's step log and change tracking.
        template = self.template_image()
        base = self._take_spare()
        image, conn = built_snapshot(self.env, template, task.seed, key, now, base=base)
        stale = self._built.pop(key)  # a rebuild of a snapshot the cache let go; under the lock
        if stale is not None:
            stale.close()
        self._built.put(key, conn)
        return Snapshot(key, image, now)

    @property
    def has_spare(self) -> bool:
        return self._spare is not None

    def prepare_spare(self) -> None:
        """Clone the seed base and parse its schema now, off the request path, so the next
        never-seen task's build starts from it (`seed_base_clone`: ~1 ms of a retail build).
        One spare at most: a build that finds none clones the base itself, as before."""
        if self._spare is not None:
            return
        conn: sqlite3.Connection | None = seed_base_clone(self.env, self.template_image())
        with self._spare_lock:
            if self._spare is None:
                self._spare, conn = conn, None
        if conn is not None:  # another thread made one meanwhile
            conn.close()

    def _take_spare(self) -> sqlite3.Connection | None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
        return spare

    def drop_spare(self) -> None:
        """Close the spare clone, if any (a backend's shutdown)."""
        spare = self._take_spare()
        if spare is not None:
            spare.close()

    def clone(self, snapshot: Snapshot) -> sqlite3.Connection:
        """A private in-memory database holding the snapshot's image, for the caller to read or
        write and close: the connection that built the snapshot when nothing has taken it yet
        (a never-seen task's seed state and gold then parse its schema once, not twice more:
        ~1.5 ms each for retail), else a new copy (`memory_from_image`)."""
        with self._lock:
            built = self._built.pop(snapshot.key)
        return built if built is not None else sqlite_db.memory_from_image(snapshot.image)

    @property
    def cached_snapshot_bytes(self) -> int:
        return self._snapshots.bytes

    # --- sessions ----------------------------------------------------------------------------
    def create_session_file(self, session_id: str, snapshot: Snapshot) -> Path:
        """The session's file, written (atomically) from the snapshot's image in memory."""
        path = self.session_path(session_id)
        sqlite_db.write_image(path, snapshot.image, wal=True)
        return path

    def remove_legacy_seed_files(self) -> None:
        """Delete the seed files an earlier release kept (up to `seed_file_cache_mb`, 64 MiB, per
        environment); nothing reads them any more. Run once before workers start."""
        shutil.rmtree(self.data_dir / "snapshots" / self.env.name / LEGACY_SEED_DIR, True)

    def open_session(self, session_id: str) -> sqlite3.Connection:
        path = self.session_path(session_id)
        _refuse_without_file(path, session_id)
        try:
            conn = sqlite_db.open_file(path)
            meta = read_meta(conn)
        except sqlite3.DatabaseError as exc:
            # A closed session's file may be packed or dropped while it opens ("disk I/O error").
            _refuse_without_file(path, session_id)
            if sqlite_db.is_disk_full(exc):
                raise StorageFull(
                    f"session {session_id}'s database cannot be opened: no space left on the disk",
                    hint="Free disk space and retry.",
                ) from exc
            raise SessionUnavailable(
                f"session {session_id}'s database cannot be opened: {exc}"
            ) from exc
        if meta.get("env") != self.env.name:
            conn.close()
            raise SessionUnavailable(
                f"session {session_id}'s database belongs to environment {meta.get('env')!r}, "
                f"not {self.env.name!r}"
            )
        if schema_state(conn, self.env.name) == "older":
            conn.close()
            upgrade_retained(path, self.env.name)  # one transaction; raises if it cannot
            conn = sqlite_db.open_file(path)
        if self.max_session_bytes:
            sqlite_db.cap_size(conn, self.max_session_bytes)
        return conn


def _refuse_without_file(path: Path, session_id: str) -> None:
    """SessionClosed when the session is stored packed (only a closed one is), SessionNotFound
    when it has no database at all."""
    if path.exists():
        return
    if pack_path(path).exists():
        raise SessionClosed(
            f"session {session_id} is closed", hint="Start a new rollout with /seed_session."
        )
    raise SessionNotFound(
        f"session {session_id} has no database (deleted by retention?)",
        hint="Start a new rollout with POST /seed_session.",
    )
