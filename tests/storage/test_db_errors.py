"""One catalogue of database failures (app/storage/driver.py), each backend classifying its own
driver's errors into it: checked on real SQLite files."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from app.storage.driver import NO_ROOM, RETRY_IN_THREAD, DbError, classify, is_storage_full

FACTS = {"reason": "why", "limit_ms": 50, "cap_mib": 4}


@pytest.mark.parametrize("failure", list(DbError))
def test_every_answer_names_the_tool_says_nothing_changed_and_hints(failure):
    error = failure.payload("book_flight", **FACTS)["error"]
    assert error["code"] == failure.code
    assert error["message"].startswith("book_flight ")
    assert "nothing was changed" in error["message"]
    assert error["hint"]


def test_the_runtime_code_sets_are_catalogue_codes():
    codes = {f.code for f in DbError}
    assert RETRY_IN_THREAD <= codes and NO_ROOM <= codes


def _raised(bind, sql: str) -> DBAPIError:
    with pytest.raises(DBAPIError) as caught:
        bind.execute(text(sql))
    return caught.value


def test_sqlite_errors_are_classified_by_the_sqlite_driver(tmp_path):
    path = tmp_path / "s.sqlite"
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"))
    with engine.connect() as conn:
        exc = _raised(conn, "INSERT INTO t (id, n) VALUES (1, NULL)")
        assert classify(exc, conn) == (DbError.CONSTRAINT, {"reason": str(exc.orig)})
        conn.rollback()
        exc = _raised(conn, "SELECT * FROM no_such_table")
        found = classify(exc, conn)
        assert found is not None and found[0] is DbError.DATABASE
        conn.rollback()
    # Another connection holds the write lock: `busy`, at once (timeout 0).
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with engine.connect() as conn:
            exc = _raised(conn, "INSERT INTO t (id, n) VALUES (2, 2)")
            assert classify(exc, conn) == (DbError.BUSY, {})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        engine.dispose()


def test_storage_full_is_recognised_from_the_os_and_from_sqlite():
    assert is_storage_full(OSError(28, "No space left on device"))
    assert is_storage_full(sqlite3.OperationalError("database or disk is full"))
    assert not is_storage_full(sqlite3.OperationalError("no such table: t"))
    assert not is_storage_full(ValueError("disk"))
