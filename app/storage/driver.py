"""What callers ask of a session's database driver: errors classified once, a time limit, and the
session's step log and changes read the backend's way.

`DbError` is the one catalogue of the database failures a tool call can end in, each with the
code, message and hint the agent is sent (written here only). Each backend classifies its own
driver's exceptions into it (`app/storage/sqlite/driver.py`, `app/storage/postgres/driver.py`),
as SQLAlchemy's dialects decide `is_disconnect`; the runner asks `classify(exc, bind)` and never
reads an error's text or names a dialect. `steplog.step_log`, `steplog.write_step` and
`tracking.tracked_changes` reach the backend's own readers the same way.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from enum import Enum
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from app.storage.meta import Changes
    from app.storage.steplog import StepLog


class DbError(Enum):
    """A database failure of a tool call: (code sent to the agent, message, hint)."""

    CONSTRAINT = (
        "constraint_violation",
        "{tool} was refused by a database constraint ({reason}); nothing was changed.",
        "Check the identifiers and quantities you passed.",
    )
    # PostgreSQL checks what SQLite lets through (VARCHAR lengths, value ranges).
    VALUE_REFUSED = (
        "constraint_violation",
        "{tool} was refused by the database ({reason}); nothing was changed.",
        "Check the lengths and formats of the values you passed.",
    )
    TIME_LIMIT = (
        "time_limit",
        "{tool} ran longer than {limit_ms} ms and was stopped; nothing was changed.",
        "Ask for less at once (narrower filters, fewer rows).",
    )
    BUSY = (
        "busy",
        "{tool} could not start: another call holds this session's database; nothing was changed.",
        "Retry the call.",
    )
    SIZE_LIMIT = (
        "size_limit",
        "{tool} would grow this session's database past its size limit of {cap_mib} MiB; "
        "nothing was changed.",
        "Write less at once, or remove what you added that is not needed.",
    )
    STORAGE_FULL = (
        "storage_full",
        "{tool} could not be saved: no space left on the server's disk; nothing was changed.",
        "Retry later; if it keeps failing, stop and explain.",
    )
    DATABASE = (
        "database_error",
        "{tool} could not complete ({reason}); nothing was changed.",
        "Retry the call; if it keeps failing, stop and explain.",
    )

    def __init__(self, code: str, message: str, hint: str) -> None:
        self.code = code
        self.template = message
        self.hint = hint

    def payload(self, tool: str, **facts: Any) -> dict[str, Any]:
        """The tool's `{"error": ...}` answer."""
        message = self.template.format(tool=tool, **facts)
        return {"error": {"code": self.code, "message": message, "hint": self.hint}}


# Codes after which the call may run again in a worker thread (an inline attempt gave up).
RETRY_IN_THREAD = frozenset({DbError.BUSY.code, DbError.TIME_LIMIT.code})
# Codes that mean there is no room to write (the step log's own row would not fit either).
NO_ROOM = frozenset({DbError.SIZE_LIMIT.code, DbError.STORAGE_FULL.code})

Bind = Engine | Connection
Classified = tuple[DbError, dict[str, Any]]


class Driver(Protocol):
    """One backend's driver knowledge (a module: app/storage/{sqlite,postgres}/driver.py)."""

    def classify(self, exc: DBAPIError, bind: Bind) -> Classified | None:
        """The failure and the facts its message names (`reason`, `cap_mib`); None when the
        exception is not one a tool call answers (the caller re-raises it)."""
        ...

    def time_limit(self, db: Session, limit_ms: int) -> AbstractContextManager[None]:
        """Stop the call's SQL once it has run `limit_ms`."""
        ...

    def is_storage_full(self, exc: BaseException) -> bool: ...

    def step_log(self, conn: Connection) -> StepLog | None:
        """The step log of the session `conn` is on; None when it keeps none."""
        ...

    def tracked_changes(self, conn: Connection, tables: Iterable[str]) -> Changes | None:
        """What the session wrote since its snapshot (app/storage/tracking.py)."""
        ...

    def write_step(self, conn: Connection, step: Mapping[str, Any]) -> None:
        """Append one step row in the caller's transaction (app/storage/steplog.py)."""
        ...


# SQLAlchemy dialect name -> the backend module that knows its driver (loaded on first use).
_DRIVERS = {"sqlite": "app.storage.sqlite.driver", "postgresql": "app.storage.postgres.driver"}


def driver_of(bind: Bind) -> Driver:
    found: Driver = import_module(_DRIVERS[bind.dialect.name])
    return found


def classify(exc: DBAPIError, bind: Bind) -> Classified | None:
    return driver_of(bind).classify(exc, bind)


def time_limit(db: Session, limit_ms: int | None) -> AbstractContextManager[None]:
    """Stop the call's SQL after `limit_ms` (None or 0: no limit of the runner's own)."""
    if not limit_ms:
        return nullcontext()
    return driver_of(db.get_bind()).time_limit(db, limit_ms)


def is_storage_full(exc: BaseException) -> bool:
    """The disk (or a file-size limit) is full, as the OS or either backend's driver says it."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return any(import_module(name).is_storage_full(exc) for name in _DRIVERS.values())
