"""PostgreSQL's driver (psycopg) as app/storage/driver.py asks for it: errors and the time limit.

The time limit is the session engine's `statement_timeout` (app/storage/postgres/db.py); a
cancelled statement is classified as SQLite's interrupted one, so both answer `time_limit`. The
step log and change readers need the environment's tables: the backend binds them to each
connection it hands out (`bind_readers`), and they are read back here only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from app.storage.driver import Bind, Classified, DbError
from app.storage.meta import Changes
from app.storage.steplog import INSERT_STEP, STEP_COLUMNS, StepLog

QUERY_CANCELED = "57014"  # statement_timeout
DISK_FULL = "53100"


def classify(exc: DBAPIError, bind: Bind) -> Classified | None:
    reason = str(exc.orig) if exc.orig is not None else str(exc)
    if isinstance(exc, IntegrityError):
        return DbError.CONSTRAINT, {"reason": reason}
    if isinstance(exc, DataError):  # e.g. a string longer than its VARCHAR(n)
        return DbError.VALUE_REFUSED, {"reason": reason.splitlines()[0]}
    if not isinstance(exc, OperationalError):
        return None
    if _sqlstate(exc.orig) == QUERY_CANCELED or "statement timeout" in reason:
        return DbError.TIME_LIMIT, {}
    return DbError.DATABASE, {"reason": reason}


@contextmanager
def time_limit(db: Session, limit_ms: int) -> Iterator[None]:
    yield  # statement_timeout is set on the session's connections already


def is_storage_full(exc: BaseException) -> bool:
    return _sqlstate(getattr(exc, "orig", None) or exc) == DISK_FULL


def _sqlstate(exc: object) -> str | None:
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


# Connection.info keys, set by `bind_readers` and read below only.
_LOG_READER = "stategym.step_log"  # (Connection) -> StepLog | None
_CHANGE_READER = "stategym.change_reader"  # (Connection, table names) -> Changes | None
_INSERT_STEP = INSERT_STEP + ", ".join(f"%({c})s" for c in STEP_COLUMNS) + ")"


def bind_readers(
    conn: Connection,
    log_reader: Callable[[Connection], StepLog | None] | None,
    change_reader: Callable[[Connection, Iterable[str]], Changes | None] | None = None,
) -> None:
    """Make `step_log` and `tracked_changes` answer on `conn` (None: unbind)."""
    for key, reader in ((_LOG_READER, log_reader), (_CHANGE_READER, change_reader)):
        if reader is None:
            conn.info.pop(key, None)
        else:
            conn.info[key] = reader


def step_log(conn: Connection) -> StepLog | None:
    reader = conn.info.get(_LOG_READER)
    found: StepLog | None = reader(conn) if reader is not None else None
    return found


def tracked_changes(conn: Connection, tables: Iterable[str]) -> Changes | None:
    reader = conn.info.get(_CHANGE_READER)
    found: Changes | None = reader(conn, tables) if reader is not None else None
    return found


def write_step(conn: Connection, step: Mapping[str, Any]) -> None:
    conn.exec_driver_sql(_INSERT_STEP, {c: step[c] for c in STEP_COLUMNS})
