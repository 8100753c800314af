"""PostgreSQL's driver (psycopg) as app/storage/driver.py asks for it: errors and the time limit.

The time limit is the session engine's `statement_timeout` (app/storage/postgres/db.py); a
cancelled statement is classified as SQLite's interrupted one, so both answer `time_limit`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from app.storage.driver import Bind, Classified, DbError

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
