"""The console's sandbox on real SQLite: what it refuses, what it caps, and that it cleans up."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.storage.meta import write_meta
from app.storage.sqlite import db as sqlite_db
from envs.sql import sandbox
from envs.sql.replay import TaskDb, base_image, open_task_db


@pytest.fixture()
def db() -> Iterator[TaskDb]:
    task_db = open_task_db()
    yield task_db
    task_db.close()


@pytest.fixture()
def session_db(tmp_path: Path) -> Iterator[TaskDb]:
    """A database on a real file, with the framework's meta table, opened like a session's."""
    path = tmp_path / "sessions" / "sql" / ("a" * 32 + ".sqlite")
    sqlite_db.write_image(path, base_image(), wal=True)
    conn = sqlite_db.open_file(path)
    write_meta(conn, {"env": "sql", "now": "2026-03-16T09:00:00"})
    # Like the framework's change tracking: a platform trigger that records written tables.
    conn.execute("CREATE TABLE _stategym_changes (name TEXT PRIMARY KEY)")
    conn.execute(
        "CREATE TRIGGER _stategym_track_employees_update AFTER UPDATE ON employees BEGIN "
        "INSERT OR IGNORE INTO _stategym_changes(name) VALUES ('employees'); END"
    )
    task_db = open_task_db()
    task_db.close()
    task_db.conn, task_db.engine = conn, sqlite_db.bind_engine(conn)
    yield task_db
    task_db.close()


def refused(db: TaskDb, statement: str, code: str) -> str:
    """Run a statement that must fail; the state must be exactly as before. Returns the message."""
    before = db.dump()
    result = db.sql(statement)
    assert "error" in result, (statement, result)
    assert result["error"]["code"] == code, result
    assert db.dump() == before, "a refused statement must change nothing"
    return result["error"]["message"]


def test_attach_of_other_files_is_refused_and_creates_nothing(
    session_db: TaskDb, tmp_path: Path
) -> None:
    other = tmp_path / "sessions" / "sql" / ("b" * 32 + ".sqlite")
    sqlite_db.write_image(other, base_image(), wal=True)
    control = tmp_path / "control.sqlite"
    control.write_bytes(b"")
    for target in (other, control, tmp_path / "new.sqlite", ":memory:"):
        msg = refused(session_db, f"ATTACH DATABASE '{target}' AS x", "not_allowed")
        assert "ATTACH" in msg
    assert not (tmp_path / "new.sqlite").exists()
    refused(session_db, "DETACH DATABASE main", "not_allowed")


def test_vacuum_into_writes_no_file(session_db: TaskDb, tmp_path: Path) -> None:
    out = tmp_path / "copy.sqlite"
    refused(session_db, f"VACUUM INTO '{out}'", "not_allowed")
    refused(session_db, f"/* hidden */ vacuum main into '{out}'", "not_allowed")
    refused(session_db, "VACUUM", "not_allowed")
    assert not out.exists()


def test_framework_meta_table_is_out_of_reach(session_db: TaskDb) -> None:
    for statement in (
        "SELECT * FROM _stategym_meta",
        "UPDATE _stategym_meta SET value = 'open' WHERE key = 'status'",
        "DELETE FROM _stategym_meta",
        "INSERT INTO _stategym_meta VALUES ('status', 'closed')",
        "PRAGMA table_info(_stategym_meta)",
        "SELECT (SELECT value FROM main._stategym_meta LIMIT 1)",
    ):
        assert "_stategym_meta" in refused(session_db, statement, "not_allowed"), statement


def test_platform_change_tracking_works_but_is_out_of_reach(session_db: TaskDb) -> None:
    for statement in (
        "SELECT * FROM _stategym_changes",
        "DELETE FROM _stategym_changes",
        "INSERT INTO _stategym_changes VALUES ('x')",
    ):
        assert "_stategym_changes" in refused(session_db, statement, "not_allowed"), statement
    # The agent's write fires the platform trigger, which may write its own table.
    out = session_db.sql("UPDATE employees SET title = 'Lead' WHERE employee_no = 'E1010'")
    assert out["output"] == {"statement": "UPDATE", "rows_affected": 1}
    tracked = session_db.conn.execute("SELECT name FROM _stategym_changes").fetchall()
    assert tracked == [("employees",)]


@pytest.mark.parametrize(
    "statement",
    [
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "SAVEPOINT s1",
        "RELEASE s1",
        "END",
        "PRAGMA foreign_keys = OFF",
        "PRAGMA writable_schema = 1",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA user_version = 3",
        "PRAGMA query_only = 1",
        "CREATE TABLE t (a)",
        "CREATE TEMP TABLE t (a)",
        "DROP TABLE timesheet_archive",
        "ALTER TABLE employees ADD COLUMN x",
        "CREATE INDEX ix ON employees (title)",
        "CREATE VIEW v AS SELECT 1",
        "DROP TRIGGER salaries_append_only_update",
        "REINDEX",
        "ANALYZE",
        "CREATE TRIGGER t AFTER INSERT ON invoices BEGIN SELECT 1; END",
        "SELECT load_extension('/tmp/evil')",
        "SELECT random()",
        "SELECT hex(randomblob(8))",
        "SELECT * FROM pragma_table_info('employees')",
    ],
)
def test_dangerous_statements_are_refused(db: TaskDb, statement: str) -> None:
    refused(db, statement, "not_allowed")


def test_sqlite_master_cannot_be_written(db: TaskDb) -> None:
    # SQLite itself refuses this one before asking the authorizer.
    for statement in ("UPDATE sqlite_master SET sql = ''", "DELETE FROM sqlite_schema"):
        assert "may not be modified" in refused(db, statement, "sql_error")


def test_wall_clock_reads_the_sessions_frozen_clock(db: TaskDb) -> None:
    """'now' however it is built, and the CURRENT_* keywords, are the
    session's clock (2026-03-16 09:00 here), never the machine's."""
    cases = {
        "SELECT date('now')": "2026-03-16",
        "SELECT datetime('no' || 'w')": "2026-03-16 09:00:00",  # bypassed the old text check
        "SELECT datetime( 'NOW' , '-1 day')": "2026-03-15 09:00:00",
        "SELECT julianday('now')": 2461115.875,
        "SELECT strftime('%s', 'now')": "1773651600",
        "SELECT strftime('%Y-%m')": "2026-03",
        "SELECT unixepoch()": 1773651600,
        "SELECT date()": "2026-03-16",
        "SELECT time('now', 'localtime')": "09:00:00",  # the session clock is UTC
        "SELECT CURRENT_TIMESTAMP": "2026-03-16 09:00:00",
        "SELECT CURRENT_DATE": "2026-03-16",
        "SELECT current_time": "09:00:00",
        "SELECT date(x) FROM (SELECT lower('NOW') AS x)": "2026-03-16",
        "SELECT date('2026-01-31', '+1 month')": "2026-03-03",  # the rest is SQLite's own
    }
    for statement, expected in cases.items():
        assert db.sql(statement)["output"]["rows"] == [[expected]], statement
    target = "(SELECT min(id) FROM invoices WHERE status = 'sent')"
    wrote = db.sql(f"UPDATE invoices SET due_date = current_date WHERE id = {target}")
    assert wrote["output"]["rows_affected"] == 1, wrote
    due = db.sql(f"SELECT due_date FROM invoices WHERE id = {target}")["output"]["rows"]
    assert due == [["2026-03-16"]]
    ok = db.sql("SELECT 'now and then' AS \"now\"")
    assert ok["output"]["rows"] == [["now and then"]]


def test_clock_follows_the_seeded_now() -> None:
    seeded = open_task_db({"now": "2025-01-02T03:04:05"})
    try:
        out = seeded.sql("SELECT datetime('now'), CURRENT_DATE, date('now', 'start of month')")
        assert out["output"]["rows"] == [["2025-01-02 03:04:05", "2025-01-02", "2025-01-01"]]
    finally:
        seeded.close()


def test_read_only_pragmas_are_allowed(db: TaskDb) -> None:
    out = db.sql("PRAGMA table_info(invoices)")["output"]
    assert "number" in [r[1] for r in out["rows"]]
    assert db.sql("PRAGMA foreign_key_check")["output"]["rows"] == []


def test_only_one_statement_per_call(db: TaskDb) -> None:
    refused(
        db, "UPDATE employees SET title = 'X' WHERE id = 9; DELETE FROM timesheets", "one_statement"
    )
    refused(db, "SELECT 1; SELECT 2", "one_statement")
    assert db.sql("SELECT 1; -- a trailing comment is fine")["output"]["rows"] == [[1]]
    refused(db, "  ", "invalid_arguments")
    refused(db, "-- nothing but a comment", "invalid_arguments")


def test_runaway_query_is_interrupted_and_changes_nothing(db: TaskDb) -> None:
    msg = refused(
        db,
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n",
        "timeout",
    )
    assert "took too long" in msg
    # A runaway write is rolled back as a whole.
    refused(
        db,
        "UPDATE employees SET title = title || 'x' WHERE id IN (WITH RECURSIVE n(x) AS "
        "(SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n)",
        "timeout",
    )


def test_time_spent_waiting_is_not_the_statements_time(db: TaskDb) -> None:
    """The deadline is on the thread's CPU time: a statement that waits (for the GIL, for a core
    on a loaded machine; here a sleeping function) longer than the limit, but works little, is
    not cut. On wall-clock time a cheap gold statement timed out under CI's load and masked its
    task."""

    def pause(ms: int) -> int:
        time.sleep(ms / 1000)
        return 0

    db.conn.create_function("pause", 1, pause)
    waited = time.monotonic()
    result = db.sql(
        f"WITH RECURSIVE n(x) AS (SELECT pause({int(sandbox.TIME_LIMIT_S * 1000) + 300}) "
        "UNION ALL SELECT x + 1 FROM n LIMIT 50000) SELECT count(*) FROM n"
    )
    assert time.monotonic() - waited > sandbox.TIME_LIMIT_S
    assert result.get("output", {}).get("rows") == [[50000]], result


def test_huge_results_are_capped_in_rows_and_bytes(db: TaskDb) -> None:
    out = db.sql("SELECT * FROM timesheets ORDER BY id")["output"]
    assert out["row_count"] == sandbox.MAX_ROWS == len(out["rows"])
    assert out["truncated"] is True and "200 rows" in out["note"]
    wide = db.sql("SELECT id, printf('%.1500c', 'x') AS pad FROM timesheets ORDER BY id")["output"]
    assert wide["truncated"] is True and "bytes" in wide["note"]
    assert 0 < wide["row_count"] < sandbox.MAX_ROWS
    assert sum(len(str(r)) for r in wide["rows"]) <= sandbox.MAX_BYTES
    cell = db.sql("SELECT printf('%.5000c', 'y'), zeroblob(10)")["output"]["rows"][0]
    assert cell[0].endswith("[3000 more characters]") and cell[1] == "<blob of 10 bytes>"
    refused(db, "SELECT length(zeroblob(50000000))", "too_large")  # 64 KiB value limit


def _handlers_gone(raw: sqlite3.Connection) -> None:
    """What the sandbox refused works again on the raw connection, limits are back."""
    assert raw.getlimit(sqlite3.SQLITE_LIMIT_ATTACHED) >= 1
    assert raw.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) >= 1_000_000_000
    assert raw.execute("SELECT count(*) FROM _stategym_meta").fetchone()[0] >= 1
    assert raw.execute("SELECT typeof(random())").fetchone() == ("integer",)
    raw.execute("PRAGMA user_version = 5")
    assert raw.execute("PRAGMA user_version").fetchone() == (5,)
    # The bounded functions stay on the connection but refuse nothing out of a call (verify's
    # checks may LIKE over whatever the agent wrote); the clock stays the session's.
    big = "printf('%.*c', 100000, 'x') LIKE '%' || printf('%.*c', 300, 'x') || '%'"
    assert raw.execute(f"SELECT {big}").fetchone() == (1,)
    assert raw.execute("SELECT date('now')").fetchone() == ("2026-03-16",)


def test_authorizer_and_progress_handler_are_removed_after_every_call(
    session_db: TaskDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "output" in session_db.sql("SELECT count(*) FROM employees")
    _handlers_gone(session_db.conn)
    assert "error" in session_db.sql("SELECT * FROM _stategym_meta")
    _handlers_gone(session_db.conn)
    assert "error" in session_db.sql("DELETE FROM employees WHERE id = 3")
    _handlers_gone(session_db.conn)
    # With a tiny step budget every real query is stopped; afterwards the same query runs fine.
    monkeypatch.setattr(sandbox, "STEP_BUDGET", 1)
    query = "SELECT sum(hours) FROM timesheets t JOIN employees e ON e.id = t.employee_id"
    assert session_db.sql(query)["error"]["code"] == "timeout"
    assert session_db.conn.execute(query).fetchone()[0] > 0
    _handlers_gone(session_db.conn)
