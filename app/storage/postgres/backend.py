"""The PostgreSQL backend: each session is a schema, every replica sees every session.

A tool call borrows a pooled connection, opens ONE transaction that takes the session's advisory
lock (calls on one session are serialised across replicas, as BEGIN IMMEDIATE does on SQLite),
pins `search_path` and the schema translate map to the session's schema (app/storage/postgres/
db.py), checks the session is not closed, and runs the work (the tool runner), whose ORM Session
joins that transaction (a tool error rolls it back, success commits it). Templates and session
schemas: app/storage/postgres/store.py; the control table: app/storage/postgres/control.py.

Every session schema keeps the step log (app/storage/postgres/steplog.py): the runner writes a
call's step in the call's transaction, triggers write its row changes; rewind, forks as of a
step and export/restore are built on it, as on SQLite.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from app.clock import naive_utcnow
from app.core.tasks import TaskSpec
from app.errors import (
    CannotRewind,
    InvalidTask,
    SessionClosed,
    SessionNotFound,
    SessionUnavailable,
)
from app.registry import load_environment
from app.sdk.environment import Environment, Tool, ToolContext
from app.settings import Settings
from app.storage.base import (
    Capabilities,
    NotOnDisk,
    SessionHandle,
    Unsupported,
    Work,
    verify_threads,
    worker_threads,
)
from app.storage.control import SessionRecord
from app.storage.postgres.archive import SessionArchive
from app.storage.postgres.control import PgControlDB, open_pg_control
from app.storage.postgres.db import (
    META_TABLE,
    STATUS,
    SchemaNames,
    drop_schema_sql,
    make_engine,
    session_connection,
)
from app.storage.postgres.driver import bind_readers
from app.storage.postgres.migrate import ensure_current
from app.storage.postgres.steplog import (
    PG_STEP_LOG_VERSION,
    PgStepLog,
    export_schema,
    reopened_export,
    step_log_reader,
)
from app.storage.postgres.store import PgStore
from app.storage.postgres.vacuum import Vacuumer
from app.storage.sqlite.store import Snapshot, Store
from app.storage.steplog import UndoUnavailable, check_step

T = TypeVar("T")
log = logging.getLogger("stategym.postgres")
_LAST_WRITE = "last_write"
ORPHAN_GRACE = timedelta(minutes=10)
# Every statement is a network round trip: calls never run on the event loop.
CAPABILITIES = Capabilities(
    name="postgres",
    inline_calls=False,
    raw_sqlite=False,
    file_copy=False,
    step_log=True,
    threads=6,
)


@dataclass
class PgOpenSession:
    """What a worker keeps per open session: no connection (those are pooled), its clock."""

    id: str
    schema: str
    ctx: ToolContext
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    logs_steps: bool = False  # the schema keeps a step log (app/storage/postgres/steplog.py)

    def close(self) -> None:
        pass


class PgBackend:
    """Session schemas `<prefix>_s_<id>` cloned from template schemas, one control schema."""

    capabilities = CAPABILITIES

    def __init__(self, settings: Settings, env: Environment, control: PgControlDB | None = None):
        self.env = env
        self.names = SchemaNames(settings.pg_schema_prefix)
        self.engine = make_engine(
            settings.database_url or "",
            pool_size=settings.pg_pool_size
            or 2 * worker_threads(settings, CAPABILITIES)
            + verify_threads(settings, CAPABILITIES)
            + 1,
            statement_timeout_ms=settings.tool_time_limit_ms,
            max_age_s=settings.pg_connection_max_age_seconds,
        )
        # Snapshot images are built (deterministically) by each replica in its own data dir;
        # templates are built from them, and gold states replay on SQLite clones of them.
        self.snapshots = Store(
            settings.data_dir,
            env,
            snapshot_cache_size=settings.snapshot_cache_size,
            snapshot_cache_bytes=settings.snapshot_cache_mb * 2**20,
        )
        self.store = PgStore(
            self.snapshots,
            self.engine,
            self.names,
            schema_pool=settings.pg_schema_pool,
            archive_closed=settings.pg_archive_closed,
        )
        # Readers of a session's step log (verify's step rewards) and of what it changed since
        # its template (verify's dump, app/storage/postgres/changes.py) find them on each
        # connection (engine_connect: every checkout).
        reader = step_log_reader(env.metadata)
        changes = self.store.changes

        @event.listens_for(self.engine, "engine_connect")
        def _step_log_reader(conn: Connection) -> None:
            bind_readers(conn, reader, changes)

        self.control = control or open_pg_control(self.engine, self.names.control)
        self.vacuum = Vacuumer(self.engine, self.names)  # with autovacuum off (vacuum.py)
        # Live records whose schema is gone (a server killed mid-seed, -fork or -recycle) are
        # closed; those younger than ORPHAN_GRACE may be a creation in flight on a replica.
        cutoff = naive_utcnow() - ORPHAN_GRACE
        if self.control.close_orphans(env.name, self.names.session("0" * 32)[:-32], cutoff):
            log.warning("closed control records of sessions whose schema is gone")

    def snapshot(self, task: TaskSpec) -> Snapshot:
        return self.snapshots.snapshot(task)

    def location(self, session_id: str) -> str:
        return f"postgresql:{self.names.session(session_id)}"

    def create(self, session_id: str, snapshot: Snapshot) -> None:
        try:
            self.store.create_session(session_id, snapshot)
        except (DataError, IntegrityError, psycopg.DataError, psycopg.IntegrityError) as exc:
            # A seed value SQLite took but PostgreSQL's types refuse (1e308 in NUMERIC(12,2)):
            # the task's fault, a 422 (the caller removes the control row and the claim).
            reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
            raise InvalidTask(
                f"the task's seed does not fit environment {self.env.name} on PostgreSQL: {reason}"
            ) from exc

    def open(self, session_id: str, *, ahead: bool = False) -> PgOpenSession:
        try:
            meta, revision = self.store.open_meta(session_id)
        except SessionNotFound:  # the schema is gone: archived at close, or deleted
            with self.engine.connect() as conn:
                archived = self.store.archive.holds(conn, session_id)
            if archived:
                meta, revision = {"status": "closed"}, None
            else:
                raise
        if meta.get("status") == "closed":
            raise SessionClosed(
                f"session {session_id} is closed", hint="Start a new rollout with /seed_session."
            )
        if meta.get("env") != self.env.name:
            raise SessionUnavailable(
                f"session {session_id} belongs to environment {meta.get('env')!r}, "
                f"not {self.env.name!r}"
            )
        # A schema retained from an older release is upgraded before use (or refused).
        ensure_current(self.engine, self.names.session(session_id), self.env.name, revision)
        now = datetime.fromisoformat(meta["now"]) if "now" in meta else self.env.default_now
        ctx = ToolContext(now=now, session_id=session_id, task_id=None)
        handle = PgOpenSession(session_id, self.names.session(session_id), ctx)
        handle.logs_steps = meta.get("step_log") == PG_STEP_LOG_VERSION
        return handle

    def call(
        self, handle: SessionHandle, tool: Tool, work: Work, *, limit_ms: int, inline: bool
    ) -> dict[str, Any]:
        assert isinstance(handle, PgOpenSession)
        with session_connection(self.engine, handle.schema, status=True) as conn:
            transaction = conn.begin()
            try:  # the transaction began with the session's lock and read its status
                status = conn.info.pop(STATUS)  # (postgres/db.make_engine)
                if status == "closed":  # closed by any replica: seen at once
                    raise SessionClosed(f"session {handle.id} is closed")
                # The ORM Session joins this transaction: a tool error rolls it back.
                result = work(conn)
                # An error may come before the ORM Session began (bad arguments): roll back.
                if transaction.is_active and "output" in result:
                    if not tool.read_only:  # the idle reaper's activity clock
                        _stamp_write_and_commit(conn)
                    transaction.commit()
                return result
            finally:
                if transaction.is_active:
                    transaction.rollback()

    def read(self, handle: SessionHandle, work: Callable[[Connection], T]) -> T:
        assert isinstance(handle, PgOpenSession)
        with session_connection(self.engine, handle.schema) as conn:
            return work(conn)

    def release(self, handle: SessionHandle | None, session_id: str, *, delete: bool) -> None:
        if delete and self.store.recycle_session(session_id):
            return  # reset into the schema pool: a later seed renames it
        if not delete and self.store.archive_closed and self.store.archive_session(session_id):
            return  # archived, closed, and its schema reset into the pool
        if self.store.session_exists(session_id):
            with session_connection(self.engine, self.names.session(session_id)) as conn:
                with conn.begin():  # waits for a call in flight on another replica (its lock)
                    self.store.write_status(conn, session_id, "closed")
        if delete:
            self.drop(session_id)

    def drop(self, session_id: str) -> None:
        self.store.drop_session(session_id)

    def last_activity(self, session_id: str, created_at: datetime) -> float:
        """Unix time of the session's last write (its meta stamp), else its creation."""
        stamps = [created_at.replace(tzinfo=UTC).timestamp()]
        try:
            meta = self.store.read_meta(session_id)
        except Exception:  # noqa: BLE001 - a vanished schema is simply idle
            return stamps[0]
        if _LAST_WRITE in meta:
            stamps.append(float(meta[_LAST_WRITE]))
        return max(stamps)

    def session_bytes(self, handle: SessionHandle) -> int:
        """The session schema's tables and their indexes and TOAST."""
        return self.read(handle, lambda bind: int(bind.execute(_SCHEMA_BYTES).scalar() or 0))

    def stored_bytes(self) -> int:
        """Every schema of this deployment's prefix (sessions, templates, the pool)."""
        with self.engine.connect() as conn:
            pattern = {"pattern": self.names.prefix + "\\_%"}
            return int(conn.execute(_SCHEMAS_BYTES, pattern).scalar() or 0)

    def view(self) -> PgView:
        def env_named(name: str) -> Environment:
            return self.env if name == self.env.name else load_environment(name)

        return PgView(self.engine, self.names, env_named)

    # --- steps, forks and copies (app/storage/postgres/steplog.py) -----------------------------
    def logs_steps(self, handle: SessionHandle) -> bool:
        return isinstance(handle, PgOpenSession) and handle.logs_steps

    def write_failed_step(self, handle: SessionHandle, write: Callable[[Any], None]) -> None:
        assert isinstance(handle, PgOpenSession)
        try:
            with session_connection(self.engine, handle.schema) as conn, conn.begin():
                write(conn)  # under the session's lock, as every transaction on it
        except SQLAlchemyError as exc:  # the call's answer matters more than its record
            log.warning("could not record a failed step: %s", exc)

    def fork(self, handle: SessionHandle, session_ids: list[str], at_step: int | None) -> int:
        """Each child is a schema cloned from the parent's, step log included, and rewound to
        `at_step` in the same transaction (which holds the parent's lock, so no call of it is
        half-copied)."""
        assert isinstance(handle, PgOpenSession)
        step = 0
        for session_id in session_ids:
            _, step = self.store.clone_session(handle.schema, session_id, at_step)
        return step

    def _log(self, conn: Connection, handle: SessionHandle) -> PgStepLog:
        assert isinstance(handle, PgOpenSession)
        if not handle.logs_steps:
            raise CannotRewind(f"session {handle.id} keeps no step log (seeded before it)")
        return PgStepLog(conn, handle.schema, self.env.metadata)

    def rewind(self, handle: SessionHandle, to_step: int) -> int:
        """The undo log applied backwards in one transaction on the session (its lock held)."""
        assert isinstance(handle, PgOpenSession)
        with session_connection(self.engine, handle.schema) as conn, conn.begin():
            steps = self._log(conn, handle)
            check_step(steps, to_step, list(self.env.metadata.tables))
            try:
                return steps.undo_to(to_step, sequences=True)
            except UndoUnavailable as exc:
                raise CannotRewind(
                    f"rewind to step {to_step} failed and was rolled back: {exc}"
                ) from exc

    def export_image(self, handle: SessionHandle) -> tuple[bytes, int]:
        """The schema as portable JSON (`export_schema`), read in one transaction under the
        session's lock."""
        assert isinstance(handle, PgOpenSession)
        with session_connection(self.engine, handle.schema) as conn, conn.begin():
            count = self._log(conn, handle).count()
            return export_schema(conn, handle.schema, self.env.metadata), count

    def open_image(self, image: bytes) -> tuple[bytes, dict[str, str]]:
        return reopened_export(image, self.env.metadata)

    def restore_image(self, session_id: str, image: bytes) -> None:
        self.store.restore_session(session_id, image)

    def maintain(self) -> None:
        self.vacuum.run()

    def dispose(self) -> None:
        self.vacuum.dispose()
        self.store.dispose()  # pooled schemas dropped
        self.snapshots.drop_spare()
        self.control.dispose()
        self.engine.dispose()  # the pool refills on next use


class PgView:
    """Session schemas read in READ ONLY transactions (inspection, /admin, `sessions`)."""

    capabilities = CAPABILITIES

    def __init__(
        self,
        engine: Engine,
        names: SchemaNames,
        env_loader: Callable[[str], Environment] = load_environment,
    ):
        self.engine = engine
        self.names = names
        self.env_loader = env_loader  # an archived session's models, to rebuild it
        self.archive = SessionArchive(engine, names)

    def present(self, record: SessionRecord) -> bool:
        """The session's schema is there, or its archive (app/storage/postgres/archive.py)."""
        with self.engine.connect() as conn:
            return self._has_schema(conn, record) or self.archive.holds(conn, record.id)

    def _has_schema(self, conn: Connection, record: SessionRecord) -> bool:
        row = conn.execute(
            text("SELECT 1 FROM pg_namespace WHERE nspname = :name"),
            {"name": self.names.session(record.id)},
        ).first()
        return row is not None

    def connect(self, record: SessionRecord) -> AbstractContextManager[Connection]:
        return self._transaction(record, read_only=True)

    @contextmanager
    def scratch(self, record: SessionRecord, env: Environment) -> Iterator[Connection]:
        # Not READ ONLY: step rewards may undo the log (in a savepoint); all is rolled back.
        with self._transaction(record, read_only=False) as conn:
            bind_readers(conn, step_log_reader(env.metadata))
            try:
                yield conn
            finally:
                bind_readers(conn, None)

    @contextmanager
    def _transaction(self, record: SessionRecord, *, read_only: bool) -> Iterator[Connection]:
        """A transaction on the session's schema (it takes the session's lock: db.make_engine),
        checked to be the record's environment, rolled back at the end. An archived session is
        rebuilt in it first (and so never kept)."""
        schema = self.names.session(record.id)
        with session_connection(self.engine, schema) as conn:
            with conn.begin() as transaction:
                if not self._has_schema(conn, record) and not self.archive.rebuild(
                    conn, record.id, schema, self.env_loader(record.env).metadata
                ):
                    raise NotOnDisk(
                        f"session {record.id} has no schema (removed by retention or gc?)"
                    )
                if read_only:
                    conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                meta: dict[str, Any] = dict(
                    conn.exec_driver_sql(f"SELECT key, value FROM {META_TABLE}").all()
                )
                if meta.get("env") != record.env:
                    raise SessionUnavailable(
                        f"session {record.id}'s schema belongs to environment "
                        f"{meta.get('env')!r}, not {record.env!r}"
                    )
                yield conn
                transaction.rollback()

    def meta(self, record: SessionRecord) -> dict[str, str]:
        with self.engine.connect() as conn:  # an archive holds its meta: no rebuild
            if not self._has_schema(conn, record):
                archived = self.archive.meta(conn, record.id)
                if archived is not None and archived.get("env") == record.env:
                    return archived
        with self.connect(record) as conn:
            return dict(conn.exec_driver_sql(f"SELECT key, value FROM {META_TABLE}").all())

    def image(self, record: SessionRecord) -> bytes:
        raise Unsupported(
            "a session on PostgreSQL is a schema, not a SQLite file: copy it with "
            f"`pg_dump --schema={self.names.session(record.id)}` (docs/postgres.md)"
        )

    def file(self, record: SessionRecord, scratch: Path) -> Path:
        raise Unsupported(
            f"session {record.id} is a PostgreSQL schema ({self.names.session(record.id)}), "
            "not a SQLite file"
        )

    def remove(self, record: SessionRecord, *, dry_run: bool = False) -> int:
        if not dry_run and self.present(record):
            with self.engine.begin() as conn:
                conn.exec_driver_sql(drop_schema_sql(self.names.session(record.id)))
                self.archive.delete(conn, record.id)
        return 0


_SCHEMA_BYTES = text(
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
)
_SCHEMAS_BYTES = text(
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname LIKE :pattern AND c.relkind IN ('r', 'm')"
)


def _stamp_write_and_commit(conn: Connection) -> None:
    """The `last_write` stamp and the COMMIT in one round trip (one script, literals only: the
    stamp is a float's repr); SQLAlchemy's commit after it sends nothing (the driver is idle).
    A failing COMMIT raises here as it would from the commit."""
    stamp = repr(time.time())
    float(stamp)  # a number, never anything else, goes into the literal
    conn.exec_driver_sql(
        f"INSERT INTO {META_TABLE} (key, value) VALUES ('{_LAST_WRITE}', '{stamp}') "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value;\nCOMMIT"
    )
