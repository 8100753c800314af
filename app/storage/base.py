"""What a storage backend is: the one interface the runtime, inspection, /admin and the CLI use.

`make_backend` (app/storage/factory.py) builds one `SessionBackend` per process; nothing outside
app/storage/ asks which one it got: it reads `capabilities`. Every call below is one transaction
on the session (one worker-thread hop). The flow and the extension point:
docs/storage.md#the-backend-protocol.
"""

from __future__ import annotations

import asyncio
import builtins  # `list` is a method name of the control store
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from sqlalchemy import Connection

from app.errors import StateGymError
from app.sdk.environment import Environment, Tool, ToolContext
from app.settings import Settings
from app.storage.control import ResourcesClaim, SessionQuery, SessionRecord
from app.storage.lineage import Origin
from app.storage.snapshots import Snapshot

if TYPE_CHECKING:  # types only: the task model and the snapshot image store
    from app.core.tasks import TaskSpec
    from app.storage.sqlite.store import Store

T = TypeVar("T")
# What `SessionBackend.call` runs inside the session's transaction: the tool runner.
Work = Callable[[Connection], dict[str, Any]]


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers; environments and features ask for these by name, never by type."""

    name: str  # "sqlite" | "postgres": for messages and the control row's location
    # Proven-fast tools may run on the event loop with no thread hop (app/runtime/inline.py).
    inline_calls: bool
    # The session's DB-API connection is a `sqlite3.Connection` (authorizer, progress handler):
    # environments with `requires=("sqlite",)` need it.
    raw_sqlite: bool
    # A session can be copied out as a single SQLite file (`sessions export`, /admin download,
    # `stategym browse`).
    file_copy: bool
    # Every tool call is logged with its row changes (app/storage/steplog.py): step rewards,
    # rewind, forks as of an earlier step, export/restore (docs/steps.md).
    step_log: bool = False
    # Worker threads per pool when STATEGYM_TOOL_THREADS is unset (app/settings.py): few where
    # a call is CPU under the GIL (SQLite), more where a call mostly waits on round trips.
    threads: int = 2

    def provides(self) -> frozenset[str]:
        """The names an environment's `requires` may use."""
        names = {self.name}
        if self.raw_sqlite:
            names.add("sqlite")
        if self.inline_calls:
            names.add("inline_calls")
        if self.file_copy:
            names.add("file_copy")
        return frozenset(names)


class NotOnDisk(StateGymError):
    """The session's storage is gone (retention, gc) though its control row remains."""

    status_code = 404
    error_type = "not_on_disk"


class Unsupported(StateGymError, ValueError):
    """The backend cannot serve an environment (or offer a feature); the message says why."""

    status_code = 501
    error_type = "unsupported"


def worker_threads(settings: Settings, capabilities: Capabilities) -> int:
    """Threads per worker pool (tool calls; seeds, verifies and closes): the setting, else the
    backend's own number."""
    return settings.tool_threads or capabilities.threads


def verify_threads(settings: Settings, capabilities: Capabilities) -> int:
    """Threads of the verify pool, apart from the other two: the setting, else half the worker
    threads (at least one). Verifies are CPU-bound Python under the GIL, so more threads would
    only slow down the seeds and calls that share it."""
    return settings.verify_threads or max(1, worker_threads(settings, capabilities) // 2)


def check_requirements(env: Environment, capabilities: Capabilities) -> None:
    missing = [r for r in env.requires if r not in capabilities.provides()]
    if missing:
        raise Unsupported(
            f"environment {env.name!r} requires {', '.join(missing)}, which the "
            f"{capabilities.name} backend does not provide (its tools rely on SQLite itself); "
            "unset STATEGYM_DATABASE_URL to serve it on SQLite"
        )


@runtime_checkable
class SessionHandle(Protocol):
    """What a worker keeps per open session (in the manager's LRU), between calls."""

    id: str
    ctx: ToolContext  # the session's frozen clock, read once from its meta
    lock: asyncio.Lock  # calls on one session are serialised in this process

    def close(self) -> None: ...


@runtime_checkable
class ControlStore(Protocol):
    """The control database: one row per session plus the typed-seed claims (app/storage/
    control.py, with each backend's own in app/storage/{sqlite,postgres}/control.py)."""

    def add(
        self,
        *,
        session_id: str,
        env: str,
        task_id: str | None,
        snapshot_key: str,
        resources_session_id: str | None,
        file: str,
        task: dict[str, Any],
        created_at: datetime,
        episode: str | None = None,
    ) -> ResourcesClaim | None: ...
    def claim(self, env: str, resources_session_id: str) -> ResourcesClaim | None: ...
    def open_claim(self, env: str, resources_session_id: str, session_id: str) -> bool: ...
    def release_claim(self, env: str, resources_session_id: str, session_id: str) -> None: ...
    def close_claim(self, env: str, resources_session_id: str, episode: str | None) -> bool: ...
    def drop_tombstone(self, claim: ResourcesClaim) -> bool: ...
    def get(self, session_id: str) -> SessionRecord | None: ...
    def mark_verified(self, session_id: str, reward: float, result: dict[str, Any]) -> None: ...
    def mark_closed(self, session_id: str, *, dropped: bool = False) -> bool:
        """Record the session closed; `dropped`: the close deleted its database."""
        ...

    def mark_dropped(self, session_id: str) -> None: ...
    def list(self, env: str | None = None, limit: int = 1000) -> list[SessionRecord]: ...
    def query(self, q: SessionQuery) -> builtins.list[SessionRecord]: ...
    def delete(self, session_ids: builtins.list[str]) -> int: ...
    def prune_dropped(self, env: str, keep: int, limit: int) -> int:
        """Delete at most `limit` records of `env`'s sessions whose database was deleted,
        oldest first, beyond the newest `keep`; how many went."""
        ...

    def count_live(self, env: str) -> int: ...
    def live_created_before(
        self, env: str, cutoff: datetime
    ) -> builtins.list[tuple[str, datetime]]: ...
    def connect(self) -> AbstractContextManager[Connection]:
        """A connection for reads of the control tables (app/storage/control_schema.py)."""
        ...

    def verify_field(self, key: str) -> Any:
        """The stored verify result's field `key` as text, in a SQL expression."""
        ...

    def record_lineage(self, origins: builtins.list[Origin]) -> None: ...
    def lineage_tree(self, session_id: str) -> dict[str, Any]: ...
    def dispose(self) -> None: ...


@runtime_checkable
class ReadOnlyView(Protocol):
    """Sessions as inspection, /admin and `stategym sessions` see them: never written.

    `connect` yields a SQLAlchemy `Connection` in the session's namespace, read-only (a SQLite
    file opened `mode=ro`/`immutable=1`; a PostgreSQL READ ONLY transaction with the session's
    schema translate map): counts, rows and state dumps for diffs and re-verify are ordinary
    `select`s over the environment's tables on it.
    """

    capabilities: Capabilities

    def present(self, record: SessionRecord) -> bool: ...
    def connect(self, record: SessionRecord) -> AbstractContextManager[Connection]: ...
    def meta(self, record: SessionRecord) -> dict[str, str]: ...
    def scratch(
        self, record: SessionRecord, env: Environment
    ) -> AbstractContextManager[Connection]:
        """A `Connection` in a transaction on the session's current state, where
        `step_log(conn)` reads its step log and may undo it (the step rewards of a timeline):
        nothing done there is kept. SQLite: an in-memory copy of the file; PostgreSQL: a
        transaction on the session's schema, holding its lock, always rolled back."""
        ...

    def image(self, record: SessionRecord) -> bytes:
        """The session as one SQLite file (`capabilities.file_copy` only)."""
        ...

    def file(self, record: SessionRecord, scratch: Path) -> Path:
        """The session's SQLite file, for tools that open files themselves (Datasette): its own,
        or a packed one's image written into `scratch` (the caller's directory, cleared by the
        caller); `capabilities.file_copy` only."""
        ...

    def remove(self, record: SessionRecord, *, dry_run: bool = False) -> int:
        """Delete the session's storage (retention gc; not with `dry_run`); returns the bytes
        freed (or to free) where the backend knows them, else 0."""
        ...


@runtime_checkable
class SessionBackend(Protocol):
    """Where sessions live. One per process, built by `make_backend`; thread-safe."""

    # Read-only members (properties): a backend may hold a subtype (its own control store).
    @property
    def capabilities(self) -> Capabilities: ...
    @property
    def env(self) -> Environment: ...
    @property
    def control(self) -> ControlStore: ...
    @property
    def snapshots(self) -> Store:
        """Snapshot images (SQLite), built per task: the seed of every session and of gold
        replays."""
        ...

    def snapshot(self, task: TaskSpec) -> Snapshot:
        """The task's seeded state (built once, cached); SeedError when the seed does not fit."""
        ...

    def location(self, session_id: str) -> str:
        """Where the session lives, as the control row records it."""
        ...

    def create(self, session_id: str, snapshot: Snapshot) -> None:
        """Clone the snapshot into the session's own database; InvalidTask if it cannot hold it."""
        ...

    def open(self, session_id: str, *, ahead: bool = False) -> SessionHandle:
        """A handle on an existing session; SessionNotFound / SessionClosed / SessionUnavailable.
        `ahead`: opened before any request needs it (right after its seed): also do, at best,
        what the session's first write would do once (SQLite: create its WAL and sync it)."""
        ...

    def call(
        self, handle: SessionHandle, tool: Tool, work: Work, *, limit_ms: int, inline: bool
    ) -> dict[str, Any]:
        """Run one tool call as one transaction on the session: check it is not closed, run
        `work(bind)`, keep its writes only when it answered `{"output": ...}`. `inline`: the
        call is on the event loop and must not wait for another writer (answer `busy`)."""
        ...

    def read(self, handle: SessionHandle, work: Callable[[Connection], T]) -> T:
        """Run `work(bind)` on the session's current state (verify's dump), writing nothing."""
        ...

    def release(self, handle: SessionHandle | None, session_id: str, *, delete: bool) -> None:
        """Mark the session closed in its own database (seen by every worker and replica),
        close the handle, and drop its storage when `delete`."""
        ...

    def drop(self, session_id: str) -> None:
        """Remove the session's storage outright (nothing is marked)."""
        ...

    def last_activity(self, session_id: str, created_at: datetime) -> float:
        """Unix time of the session's last write, else its creation (the idle reaper's clock)."""
        ...

    def view(self) -> ReadOnlyView: ...

    def maintain(self) -> None:
        """Housekeeping a long run needs beside the reaper and the pruner, on a background
        thread every `maintenance_interval_seconds` (PostgreSQL with autovacuum off: vacuuming
        what sessions churn; nothing on SQLite)."""
        ...

    def session_bytes(self, handle: SessionHandle) -> int:
        """The session's current size in bytes (what one copy of it writes: fork budgets)."""
        ...

    def stored_bytes(self) -> int:
        """Bytes of session state this deployment holds outside the data dir (PostgreSQL
        schemas; 0 on SQLite)."""
        ...

    # --- steps, forks and copies (docs/steps.md) ---------------------------------------------
    def logs_steps(self, handle: SessionHandle) -> bool:
        """Whether the session keeps a step log (the runner then records each call's step)."""
        ...

    def write_failed_step(self, handle: SessionHandle, write: Callable[[Any], None]) -> None:
        """Record a failed call's step (its own transaction: the call's was rolled back);
        `write(conn)` inserts it. Never raises: a call's answer matters more than its record."""
        ...

    def fork(self, handle: SessionHandle, session_ids: list[str], at_step: int | None) -> int:
        """Copy the session's state (as of step `at_step`; None: its current state) into new
        sessions `session_ids`, each whole or absent; returns the step copied. The parent is
        only read. `at_step` needs `capabilities.step_log`."""
        ...

    def rewind(self, handle: SessionHandle, to_step: int) -> int:
        """Put the session back to its state after step `to_step` in one transaction (later
        steps leave the log); returns how many steps were undone. Needs `step_log`."""
        ...

    def export_image(self, handle: SessionHandle) -> tuple[bytes, int]:
        """The session as one image (step log included) and its step count: a SQLite database
        image, or a PostgreSQL schema's portable JSON (app/storage/postgres/steplog.py)."""
        ...

    def open_image(self, image: bytes) -> tuple[bytes, dict[str, str]]:
        """An exported image made restorable (status open) and its meta; ValueError when it is
        not an image this backend makes."""
        ...

    def restore_image(self, session_id: str, image: bytes) -> None:
        """A new session `session_id` holding `image` (from `open_image`)."""
        ...

    def dispose(self) -> None:
        """Lifespan shutdown: return pooled connections (the backend stays usable)."""
        ...
