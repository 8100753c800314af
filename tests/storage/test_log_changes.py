"""Change tracking read from the step log on SQLite (app/storage/log_changes.py).

A session cloned from a snapshot with a step log carries no change-tracking triggers of its own;
`tracked_changes` reads what it wrote from its log. Each test runs real writes on a real retail
snapshot image and compares: what the reader says with what was written, and verify's patched
dump with a whole read (the cheap path must never see less than the truth).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.core.tasks import task_from_data
from app.registry import load_environment
from app.storage.log_changes import literals
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Store
from app.storage.steplog import undo_to, write_step
from app.storage.tracking import tracked_changes
from app.verify.state.dump import dump_state
from bench.tasks import rollout_task

ENV = load_environment("retail")
TABLES = ENV.metadata.tables


@pytest.fixture
def clones(tmp_path: Path) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """(a pristine clone, a session clone) of one retail snapshot, in memory."""
    snapshot = Store(tmp_path / "data", ENV).snapshot(task_from_data(rollout_task()))
    return (
        sqlite_db.memory_from_image(snapshot.image),
        sqlite_db.memory_from_image(snapshot.image),
    )


def _dump(conn: sqlite3.Connection, *, reuse: bool = True) -> Any:
    bind = sqlite_db.bind_connection(conn, begin="BEGIN")
    try:
        with bind.begin():
            return dump_state(bind, TABLES, ENV.compare, reuse=reuse)
    finally:
        bind.close()


def _step(conn: sqlite3.Connection, *statements: str) -> None:
    """One logged step: its statements and its step row in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    for statement in statements:
        conn.execute(statement)
    write_step(
        conn,
        {
            "tool": "t",
            "args": "{}",
            "outcome": "ok",
            "output": "{}",
            "output_digest": "",
            "output_bytes": 2,
            "duration_ms": 1.0,
        },
    )
    conn.execute("COMMIT")


def _one(conn: sqlite3.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchone()[0]


def test_a_session_keeps_no_tracking_triggers_and_reads_its_changes_from_the_log(clones) -> None:
    _pristine, session = clones
    triggers = [
        r[0] for r in session.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    ]
    assert triggers and all(name.startswith("_stategym_step_") for name in triggers)
    assert _one(session, "SELECT value FROM _stategym_meta WHERE key = 'change_tracking'") == "log1"
    assert tracked_changes(session, TABLES).tables == set()

    customer = _one(session, "SELECT min(id) FROM customers")
    order = _one(session, "SELECT min(id) FROM orders")
    _step(
        session,
        f"UPDATE orders SET status = 'processed' WHERE id = {order}",  # not a key of orders
        f"UPDATE customers SET email = 'renamed@example.org' WHERE id = {customer}",  # natural key
        "INSERT INTO audit_log(ts, actor, action, entity, entity_id, detail) "
        "VALUES ('2024-01-01T00:00:00', 'agent', 'note', 'order', '1', 'x')",
    )
    changes = tracked_changes(session, TABLES)
    assert changes is not None
    # audit_log: every reference to it is a foreign key, so a new row marks no "#key".
    assert changes.tables == {"orders", "customers", "customers#key", "audit_log"}
    assert changes.rows["orders"] == {order} and changes.rows["customers"] == {customer}


def test_a_rolled_back_write_and_an_undone_step_leave_nothing(clones) -> None:
    _pristine, session = clones
    session.execute("BEGIN")
    session.execute("UPDATE products SET name = name || '!'")
    session.execute("ROLLBACK")
    assert tracked_changes(session, TABLES).tables == set()
    _step(
        session, "UPDATE products SET description = 'x' WHERE id = (SELECT min(id) FROM products)"
    )
    assert tracked_changes(session, TABLES).tables == {"products"}
    session.execute("BEGIN IMMEDIATE")
    undo_to(session, 0)
    session.execute("COMMIT")
    assert tracked_changes(session, TABLES).tables == set()


def test_the_log_is_not_trusted_when_a_trigger_is_gone_or_the_database_migrated(clones) -> None:
    _pristine, session = clones
    session.execute("DROP TRIGGER _stategym_step_products_update")
    assert tracked_changes(session, TABLES) is None
    _pristine, other = clones
    other.execute("INSERT INTO _stategym_meta(key, value) VALUES ('migrated', 'x')")
    assert tracked_changes(other, TABLES) is None
    other.execute("ALTER TABLE exchanges RENAME TO exchanges_old")
    assert tracked_changes(other, ["exchanges_old"]) is None


def test_patched_dumps_equal_whole_reads_after_every_kind_of_write(clones) -> None:
    pristine, session = clones
    _dump(pristine)  # a pristine clone: its dump is kept, the session's are patched from it
    customer = _one(session, "SELECT min(id) FROM customers")
    last = _one(session, "SELECT max(id) FROM customers")
    _step(session, f"UPDATE customers SET email = 'x@example.org' WHERE id = {customer}")
    _step(
        session,
        "INSERT INTO addresses(customer_id, line1, city, state, zip, country, is_default) "
        f"VALUES ({customer}, '1 Main St', 'Springfield', 'IL', '62701', 'US', 0)",
        "INSERT INTO audit_log(ts, actor, action, entity, entity_id, detail) "
        "VALUES ('2024-01-01T00:00:00', 'agent', 'note', 'order', '1', 'x')",
    )
    _step(session, "DELETE FROM addresses WHERE id = (SELECT max(id) FROM addresses)")
    _step(
        session,  # REPLACE deletes the row it conflicts with (its DELETE trigger fires too)
        "INSERT OR REPLACE INTO customers SELECT id, email, first_name, last_name, "
        f"'555-0100', membership, created_at FROM customers WHERE id = {last}",
        "UPDATE products SET description = 'x' WHERE id = (SELECT max(id) FROM products)",
    )
    changes = tracked_changes(session, TABLES)
    assert changes is not None and {"addresses", "audit_log", "products"} <= changes.tables
    assert _dump(session) == _dump(session, reuse=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("'a,b',1,NULL,X'00'", ["'a,b'", "1", "NULL", "X'00'"]),
        ("'it''s',-1.5e+10,Inf,-Inf", ["'it''s'", "-1.5e+10", "Inf", "-Inf"]),
        ("''", ["''"]),
        ("", []),
        ("'a'b", None),
    ],
)
def test_quote_lists_split_into_their_literals(text: str, expected: list[str] | None) -> None:
    assert literals(text) == expected


def test_literals_split_what_sqlite_quote_writes() -> None:
    conn = sqlite3.connect(":memory:")
    values = ["a,b", "it's", None, -1.5e10, 7, b"\x00,\x01", "", float("inf")]
    joined = " || ',' || ".join("quote(?)" for _ in values)
    quoted = conn.execute(f"SELECT {joined}", values).fetchone()[0]
    split = literals(quoted)
    assert split is not None and len(split) == len(values)
    assert conn.execute(f"SELECT {', '.join(split[:-1])}").fetchone() == tuple(values[:-1])
