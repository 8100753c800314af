"""The step log of a SQLite database a migration changed, made whole again in its transaction.

Invariant: after a migration the triggers and column records are as a snapshot of the models
has them, the migration's own writes are no step, and no undo goes back before it.
Details: docs/storage.md#the-step-log-after-a-migration-sqlite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from sqlalchemy import MetaData

from app.storage.meta import write_meta
from app.storage.steplog import (
    MIGRATED_AT_STEP,
    STEP_COLS_TABLE,
    STEP_PREFIX,
    STEP_ROWS_TABLE,
    install_step_log,
    step_count,
)

_EVENTS = ("insert", "update", "delete")  # install_step_log's trigger per event


def step_logged_tables(metadata: MetaData) -> dict[str, list[str]]:
    """Every table with a rowid, and its columns in order (what a snapshot's step log covers;
    a WITHOUT ROWID table has no identity the log can record: undo is refused for it)."""
    return {
        t.name: [c.name for c in t.columns]
        for t in metadata.sorted_tables
        if t.dialect_options["sqlite"].get("with_rowid", True) is not False
    }


def last_logged_change(conn: sqlite3.Connection) -> int:
    return int(conn.execute(f"SELECT coalesce(max(seq), 0) FROM {STEP_ROWS_TABLE}").fetchone()[0])


def forget_changes_after(conn: sqlite3.Connection, seq: int) -> None:
    """The log's row changes after `seq` (a migration's own writes) deleted."""
    conn.execute(f"DELETE FROM {STEP_ROWS_TABLE} WHERE seq > ?", (seq,))


def mark_migrated(conn: sqlite3.Connection) -> None:
    """Record that a migration ran after the log's last step (none yet: nothing to record)."""
    steps = step_count(conn)
    if steps:
        write_meta(conn, {MIGRATED_AT_STEP: str(steps)})


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def _rowid_is_key(conn: sqlite3.Connection, table: str) -> bool:
    """Whether the table's rowid is its INTEGER PRIMARY KEY (kept by a copy of its rows)."""
    keys = [row for row in conn.execute(f'PRAGMA table_info("{table}")') if row[5]]
    return len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER"


def remake_step_triggers(conn: sqlite3.Connection, metadata: MetaData) -> None:
    """In `conn`'s transaction: the step log's triggers and column records as a snapshot of
    `metadata` has them, but for tables whose logged changes they would misread (see above)."""
    tables = [t for t in step_logged_tables(metadata) if _columns(conn, t)]
    changed = {row[0] for row in conn.execute(f"SELECT DISTINCT tbl FROM {STEP_ROWS_TABLE}")}
    recorded = dict(conn.execute(f"SELECT tbl, cols FROM {STEP_COLS_TABLE}").fetchall())
    triggers = conn.execute(
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' "
        "AND substr(name, 1, ?) = ?",
        (len(STEP_PREFIX), STEP_PREFIX),
    ).fetchall()
    install: dict[str, Sequence[str]] = {}
    for table in tables:
        columns = _columns(conn, table)
        if table not in changed:
            install[table] = columns
        elif recorded.get(table) == ",".join(columns) and _rowid_is_key(conn, table):
            install[table] = columns  # creates only the triggers it lacks
    for name, table in triggers:
        own = name in {f"{STEP_PREFIX}{table}_{event}" for event in _EVENTS}
        if not own or (table in install and table not in changed):
            conn.execute(f'DROP TRIGGER "{name}"')  # a renamed table's, or re-made below
    gone = [t for t in recorded if t not in tables and t not in changed]
    conn.executemany(f"DELETE FROM {STEP_COLS_TABLE} WHERE tbl = ?", [(t,) for t in gone])
    install_step_log(conn, install)
