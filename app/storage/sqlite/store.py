"""The Store owns database files: environment templates, per-task snapshots and session databases.

Layout under the data dir:
    templates/<env>/<fingerprint>.sqlite   schema + the environment's base dataset
    snapshots/<env>/<snapshot_key>.sqlite  a template with one task's seed applied
    sessions/<env>/<session_id>.sqlite     one rollout's database (a copy of a snapshot)

A session is born by a kernel copy (copy_file_range) of its snapshot's seed file
(snapshots/<env>/.seed/<key>-<digest>.wal: the snapshot image, WAL-marked, named by a digest of
its content so a rebuilt or migrated snapshot never reuses a stale one): no row is re-inserted. Ids
reach a path only after `check_session_id`; task keys are hex digests computed here.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.orm import Session
from sqlalchemy.schema import CreateIndex, CreateTable

from app.errors import SessionNotFound, SessionUnavailable, StorageFull
from app.runtime.lru import LRU
from app.runtime.tasks import TaskSpec
from app.sdk.environment import Environment
from app.storage.log_changes import mark_log_tracked
from app.storage.meta import (
    LOG_TRACKING,
    SEED_CHANGES,
    drop_change_tracking,
    install_change_tracking,
    read_meta,
    seed_changes_value,
    take_changes,
    write_meta,
)
from app.storage.migrations import schema_state, stamp_new_database, upgrade_retained
from app.storage.seeding import apply_seed, parse_seed_now
from app.storage.snapshots import Snapshot, check_session_id
from app.storage.sqlite import db as sqlite_db
from app.storage.step_triggers import step_logged_tables
from app.storage.steplog import STEP_LOG_VERSION, install_step_log

# Template images built in this process, by (environment, fingerprint). A template is a pure
# function of what the fingerprint covers, so a second Store on another data dir (a CLI check, the
# task generator, every test's fresh data dir) writes a copy instead of building it again (~1 s).
_built_templates: dict[tuple[str, str], bytes] = {}


def schema_fingerprint(env: Environment) -> str:
    """Changes when the schema, the base data builder (its source, or `data_version`) or its
    seed change."""
    dialect = sqlite_dialect.dialect()
    ddl = []
    for table in env.metadata.sorted_tables:
        ddl.append(str(CreateTable(table).compile(dialect=dialect)))
        # table.indexes is a set: sort it, or the fingerprint changes from process to process.
        indexes = sorted(table.indexes, key=lambda ix: ix.name or "")
        ddl.extend(str(CreateIndex(ix).compile(dialect=dialect)) for ix in indexes)
    base = [env.name, env.data_version, env.base_data_digest(), str(env.base_seed)]
    text = "\n".join([*base, *ddl])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _tracking_versions(image: bytes) -> tuple[str | None, str | None]:
    """(change tracking, step log) versions of a snapshot image."""
    conn = sqlite_db.memory_from_image(image)
    try:
        meta = read_meta(conn)
        return meta.get("change_tracking"), meta.get("step_log")
    finally:
        conn.close()


def template_image(env: Environment) -> bytes:
    """The environment's template image (schema, base data, meta, migration stamp), built in
    memory once per process and fingerprint (~1 s); a Store keeps it on disk too."""
    key = (env.name, schema_fingerprint(env))
    built = _built_templates.get(key)
    if built is None:
        conn = sqlite_db.open_memory()
        engine = sqlite_db.bind_engine(conn)
        env.metadata.create_all(engine)
        with Session(bind=engine) as db, db.begin():
            env.build_base(db, random.Random(env.base_seed))
        write_meta(conn, {"env": env.name, "template": key[1]})
        stamp_new_database(conn, env.name)  # sessions record the revision they start at
        built = _built_templates[key] = sqlite_db.image_of(conn)
        engine.dispose()
        conn.close()
    return built


def snapshot_image(
    env: Environment,
    template: bytes,
    seed: Any,
    key: str,
    now: datetime,
    *,
    step_log: bool = True,
) -> bytes:
    """A snapshot's image, built in memory: `template` + the seed, then the step log (unless
    `step_log` is False: the task generator's base, which keeps the change-tracking triggers
    instead), so what sessions cloned from it write is recorded from there on."""
    conn = sqlite_db.memory_from_image(template)
    engine = sqlite_db.bind_engine(conn)
    try:
        # Tracking starts before the seed, so the rows the seed writes are known (verify dumps
        # the snapshot by patching the template's dump with them); the record is then cleared
        # and sessions record what they write from the snapshot on.
        install_change_tracking(
            conn,
            _reference_keys(env),
            guarded=_foreign_key_guarded(env),
            without_rowid=_without_rowid(env),
        )
        with Session(bind=engine) as db, db.begin():
            apply_seed(db, env.metadata, seed)
        seeded = seed_changes_value(*take_changes(conn))
        write_meta(conn, {"snapshot": key, "now": now.isoformat(), SEED_CHANGES: seeded})
        if step_log:  # every tool call's row changes, before and after (app/storage/steplog.py)
            # ... which is all change tracking needs: its own triggers go (app/storage/
            # log_changes.py), and with them ~190 KB of every open connection.
            drop_change_tracking(conn)
            install_step_log(conn, step_logged_tables(env.metadata))
            mark_log_tracked(conn, _reference_keys(env), _foreign_key_guarded(env))
        return sqlite_db.image_of(conn)
    finally:
        engine.dispose()
        conn.close()


def _reference_keys(env: Environment) -> dict[str, list[str]]:
    """Per table, the columns a reference to it resolves by (surrogate id, natural key)."""
    keys = {}
    for table in env.metadata.sorted_tables:
        natural = env.compare.for_table(table.name).key
        keys[table.name] = [c.name for c in table.primary_key.columns] + list(natural)
    return keys


def _foreign_key_guarded(env: Environment) -> set[str]:
    """Tables every compared reference to which is an enforced foreign key (SQLite runs with
    foreign_keys=ON), so rows appearing or disappearing there change no reference's reading."""
    tables, compare = env.metadata.tables, env.compare
    guarded = set(tables)
    for name, spec in compare.tables.items():
        for column, target in spec.references.items():
            pk = list(tables[target].primary_key.columns)
            if len(pk) != 1 or not tables[name].c[column].references(pk[0]):
                guarded.discard(target)
    return guarded


def _without_rowid(env: Environment) -> set[str]:
    return {
        t.name
        for t in env.metadata.sorted_tables
        if t.dialect_options["sqlite"].get("with_rowid", True) is False
    }


class Store:
    def __init__(
        self,
        data_dir: Path,
        env: Environment,
        *,
        snapshot_cache_size: int = 256,
        max_session_bytes: int | None = None,
    ):
        self.data_dir = data_dir
        self.env = env
        self.max_session_bytes = max_session_bytes  # None: sessions may grow without a cap
        self.fingerprint = schema_fingerprint(env)
        self._template: bytes | None = None
        self._snapshots: LRU[str, Snapshot] = LRU(snapshot_cache_size)
        self._lock = threading.RLock()

    # --- paths -------------------------------------------------------------------------------
    @property
    def template_path(self) -> Path:
        return self.data_dir / "templates" / self.env.name / f"{self.fingerprint}.sqlite"

    def snapshot_path(self, key: str) -> Path:
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
        """The task's seeded state: from memory, else from disk, else built from the template."""
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
        image = snapshot_image(self.env, self.template_image(), task.seed, key, now)
        sqlite_db.write_image(path, image, wal=False)
        return Snapshot(key, image, now)

    # --- sessions ----------------------------------------------------------------------------
    def create_session_file(self, session_id: str, snapshot: Snapshot) -> Path:
        path = self.session_path(session_id)
        size = len(snapshot.image)
        try:
            sqlite_db.copy_file(self.seed_file(snapshot), path, size)
        except FileNotFoundError:  # the seed file was removed under us: write it again
            snapshot.seed_file = None
            sqlite_db.copy_file(self.seed_file(snapshot), path, size)
        return path

    def seed_file(self, snapshot: Snapshot) -> Path:
        """The snapshot's image as a WAL-marked file, written once (atomically) per content."""
        seed = snapshot.seed_file
        if seed is not None:
            return seed
        with self._lock:
            digest = hashlib.blake2b(snapshot.image, digest_size=12).hexdigest()
            path = (
                self.data_dir
                / "snapshots"
                / self.env.name
                / ".seed"
                / f"{snapshot.key}-{digest}.wal"
            )
            if not path.exists():
                sqlite_db.write_image(path, snapshot.image, wal=True)
            snapshot.seed_file = path
            return path

    def create_session_file_from_image(self, session_id: str, snapshot: Snapshot) -> Path:
        """The previous way (the image written from memory): kept for the equality test."""
        path = self.session_path(session_id)
        sqlite_db.write_image(path, snapshot.image, wal=True)
        return path

    def open_session(self, session_id: str) -> sqlite3.Connection:
        path = self.session_path(session_id)
        if not path.exists():
            raise SessionNotFound(
                f"session {session_id} has no database (deleted by retention?)",
                hint="Start a new rollout with POST /seed_session.",
            )
        try:
            conn = sqlite_db.open_file(path)
            meta = read_meta(conn)
        except sqlite3.DatabaseError as exc:
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
