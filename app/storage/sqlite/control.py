"""The control database as one SQLite file in WAL mode, shared by every worker of a server.

`SqliteControlDB` runs `ControlDB`'s queries, except the four hot ones (add without a resources
id, get, mark_verified, mark_closed): those run prebuilt SQL on a per-thread sqlite3 connection,
sparing SQLAlchemy's per-call statement building and compiling. Each stores exactly what
`ControlDB`'s version stores (tests/verify/test_fast_paths_equal.py). Foreign keys are enforced on
every connection (a session names its task row).
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import IntegrityError

from app import jsonio
from app.clock import naive_utcnow
from app.storage.control import (
    ControlDB,
    SessionRecord,
    session_record,
    sessions_table,
    task_rows_table,
)
from app.storage.migrations import prepare_control_database

# Each is one autocommitted statement, as the SQLAlchemy versions are one transaction; values
# are stored as SQLAlchemy stores them.
_COLUMNS = [c.name for c in sessions_table.columns]
_INSERT_COLUMNS = (
    "id", "env", "task_id", "snapshot_key", "resources_session_id", "status", "created_at",
    "file", "task_digest",
)  # fmt: skip
_INSERT = (
    f"INSERT INTO sessions ({', '.join(_INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_INSERT_COLUMNS))})"
)
_TASK_COLUMNS = [c.name for c in task_rows_table.columns]
_INSERT_TASK = (
    f"INSERT INTO task_rows ({', '.join(_TASK_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_TASK_COLUMNS))}) ON CONFLICT DO NOTHING"
)
_GET = (
    f"SELECT {', '.join('s.' + c for c in _COLUMNS)}, t.task_json FROM sessions s "
    "LEFT JOIN task_rows t ON t.digest = s.task_digest WHERE s.id = ?"
)
_VERIFIED = (
    "UPDATE sessions SET status = CASE WHEN status = 'closed' THEN status ELSE 'verified' END, "
    "verified_at = ?, reward = ?, verify_json = ? WHERE id = ?"
)
_CLOSED = (
    "UPDATE sessions SET status = 'closed', closed_at = ?, dropped_at = ? "
    "WHERE id = ? AND status != 'closed'"
)


class SqliteControlDB(ControlDB):
    def __init__(self, engine: Engine):
        super().__init__(engine)
        self._path = engine.url.database
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            assert self._path, "the control database is a file"
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            _pragmas(conn, None)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _insert_unclaimed(self, row: dict[str, Any], task_row: dict[str, Any] | None) -> None:
        values = [row[c] for c in _INSERT_COLUMNS]
        values[_INSERT_COLUMNS.index("created_at")] = _sqlite_datetime(row["created_at"])
        conn = self._conn()
        try:
            if task_row is None:
                conn.execute(_INSERT, values)
                return
            task_values = [task_row[c] for c in _TASK_COLUMNS]
            stamp = _sqlite_datetime(task_row["created_at"])
            task_values[_TASK_COLUMNS.index("created_at")] = stamp
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(_INSERT_TASK, task_values)
                conn.execute(_INSERT, values)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.IntegrityError as exc:  # as SQLAlchemy raises it (ControlDB retries)
            raise IntegrityError(_INSERT, values, exc) from exc

    def get(self, session_id: str) -> SessionRecord | None:
        found = self._conn().execute(_GET, (session_id,)).fetchone()
        return _raw_record(found) if found else None

    def mark_verified(self, session_id: str, reward: float, result: dict[str, Any]) -> None:
        values = (_sqlite_datetime(naive_utcnow()), reward, jsonio.dumps_text(result), session_id)
        self._conn().execute(_VERIFIED, values)

    def mark_closed(self, session_id: str, *, dropped: bool = False) -> bool:
        now = _sqlite_datetime(naive_utcnow())
        closed = self._conn().execute(_CLOSED, (now, now if dropped else None, session_id))
        return closed.rowcount > 0

    def dispose(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()
        super().dispose()


def open_sqlite_control(path: Path) -> SqliteControlDB:
    """The SQLite control database at `path`, created at head or upgraded in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", _pragmas)
    prepare_control_database(engine, path)
    return SqliteControlDB(engine)


def _sqlite_datetime(value: datetime) -> str:
    """A datetime as SQLAlchemy's SQLite DateTime stores it (always with microseconds)."""
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def _raw_record(row: tuple[Any, ...]) -> SessionRecord:
    r = dict(zip([*_COLUMNS, "task_json"], row, strict=True))
    for name in ("created_at", "verified_at", "closed_at", "dropped_at"):
        r[name] = None if r[name] is None else datetime.fromisoformat(r[name])
    return session_record(SimpleNamespace(**r))


def _pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
