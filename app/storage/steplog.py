"""The step log inside a session database: one row per tool call, and the rows each call changed.

Invariant: a row change belongs to the step being run (`max(idx) + 1`), written in the call's own
transaction, so a rolled-back call leaves none; undo never goes back before a migration's step.
Format, undo and migrations: docs/storage.md#the-step-log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from app.errors import CannotRewind
from app.storage.driver import driver_of
from app.storage.meta import META_TABLE, create_triggers, write_meta

log = logging.getLogger("stategym.steps")
STEPS_TABLE = "_stategym_steps"
STEP_ROWS_TABLE = "_stategym_step_rows"
STEP_COLS_TABLE = "_stategym_step_cols"
STEP_PREFIX = "_stategym_step_"
STEP_LOG_VERSION = "2"  # 2: no index on step_rows.step (one B-tree less per write)
_OURS = "_stategym_"
# Meta key: the step count when a migration last ran on the session (docs/migrations.md).
MIGRATED_AT_STEP = "migrated_at_step"

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {STEPS_TABLE} (idx INTEGER PRIMARY KEY, tool TEXT NOT NULL, "
    "args TEXT NOT NULL, outcome TEXT NOT NULL, output TEXT, output_digest TEXT NOT NULL, "
    "output_bytes INTEGER NOT NULL, duration_ms REAL NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {STEP_ROWS_TABLE} (seq INTEGER PRIMARY KEY, "
    "step INTEGER NOT NULL, tbl TEXT NOT NULL, op TEXT NOT NULL, old_rid INTEGER, "
    "new_rid INTEGER, old_vals TEXT, new_vals TEXT)",
    f"CREATE TABLE IF NOT EXISTS {STEP_COLS_TABLE} (tbl TEXT PRIMARY KEY, cols TEXT NOT NULL)",
)
_CURRENT_STEP = f"(SELECT coalesce(max(idx), 0) + 1 FROM {STEPS_TABLE})"


def canonical(value: Any) -> str:
    """A comparison form of a JSON value: keys sorted, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _quoted_row(alias: str, columns: Sequence[str]) -> str:
    return " || ',' || ".join(f'quote({alias}."{c}")' for c in columns) or "''"


def install_step_log(conn: sqlite3.Connection, tables: Mapping[str, Sequence[str]]) -> None:
    """Create the step log and its triggers on every table of `tables` (table -> columns).

    Tables without a rowid are left untracked: undo is then refused and callers replay instead.
    """
    for statement in _CREATE:
        conn.execute(statement)
    for table, columns in tables.items():
        cols = list(columns)
        conn.execute(
            f"INSERT OR REPLACE INTO {STEP_COLS_TABLE}(tbl, cols) VALUES (?, ?)",
            (table, ",".join(cols)),
        )
        new, old = _quoted_row("NEW", cols), _quoted_row("OLD", cols)
        insert = (
            f"INSERT INTO {STEP_ROWS_TABLE}(step, tbl, op, old_rid, new_rid, old_vals, new_vals) "
            f"VALUES ({_CURRENT_STEP}, '{table}', "
        )
        bodies = {
            "insert": ("INSERT", f"{insert}'i', NULL, NEW._rowid_, NULL, {new});"),
            "update": ("UPDATE", f"{insert}'u', OLD._rowid_, NEW._rowid_, {old}, {new});"),
            "delete": ("DELETE", f"{insert}'d', OLD._rowid_, NULL, {old}, NULL);"),
        }
        create_triggers(conn, STEP_PREFIX, table, bodies)
    write_meta(conn, {"step_log": STEP_LOG_VERSION})


def has_step_log(conn: sqlite3.Connection) -> bool:
    """Whether the SQLite database keeps a step log."""
    try:
        row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'step_log'").fetchone()
    except sqlite3.OperationalError:  # no meta table
        return False
    return row is not None and row[0] == STEP_LOG_VERSION


@dataclass(frozen=True)
class StepRow:
    idx: int
    tool: str
    args: str  # JSON text of the arguments (canonical: keys sorted, no whitespace)
    outcome: str  # "ok" or an error code
    output: str | None  # the JSON body the agent was sent; None when over the cap
    output_digest: str
    output_bytes: int
    duration_ms: float


@dataclass(frozen=True)
class RowChange:
    step: int
    table: str
    op: str  # "insert" | "update" | "delete"
    before: dict[str, Any] | None
    after: dict[str, Any] | None


_OPS = {"i": "insert", "u": "update", "d": "delete"}


STEP_COLUMNS = ("tool", "args", "outcome", "output", "output_digest", "output_bytes",
                "duration_ms")  # fmt: skip
# The step row's INSERT up to its values: each backend's driver appends its parameter style.
INSERT_STEP = f"INSERT INTO {STEPS_TABLE}(idx, {', '.join(STEP_COLUMNS)}) VALUES ({_CURRENT_STEP}, "


def write_step(conn: Any, step: Mapping[str, Any]) -> None:
    """Append one step (in the caller's transaction). `conn`: a sqlite3 connection, or a
    SQLAlchemy Connection of either backend (its namespace pinned to the session's)."""
    if not isinstance(conn, sqlite3.Connection):
        driver_of(conn).write_step(conn, step)
        return
    conn.execute(
        INSERT_STEP + ", ".join("?" * len(STEP_COLUMNS)) + ")",
        tuple(step[c] for c in STEP_COLUMNS),
    )


def write_alone(conn: sqlite3.Connection, write: Callable[[sqlite3.Connection], None]) -> None:
    """`write(conn)` in a transaction of its own (a failed call's step); never raises."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            write(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:  # busy or full: the call's answer matters more
        log.warning("could not record a failed step: %s", exc)


def read_steps(conn: sqlite3.Connection, upto: int | None = None) -> list[StepRow]:
    query = f"SELECT * FROM {STEPS_TABLE}"
    rows = conn.execute(
        query + (" WHERE idx <= ? ORDER BY idx" if upto is not None else " ORDER BY idx"),
        (upto,) if upto is not None else (),
    ).fetchall()
    return [step_row_of(*row) for row in rows]


def step_row_of(
    idx: int,
    tool: str,
    args: str,
    outcome: str,
    output: str | None,
    output_digest: str,
    output_bytes: int,
    duration_ms: float,
) -> StepRow:
    """Arguments in canonical form; the digest of a kept output computed now (the hot path
    stores it only for outputs over the cap)."""
    try:
        args = canonical(json.loads(args))
    except ValueError:
        pass
    if not output_digest and output is not None:
        output_digest = digest(output)
    return StepRow(idx, tool, args, outcome, output, output_digest, output_bytes, duration_ms)


def step_count(conn: sqlite3.Connection) -> int:
    return int(conn.execute(f"SELECT coalesce(max(idx), 0) FROM {STEPS_TABLE}").fetchone()[0])


def migrated_at(conn: sqlite3.Connection) -> int:
    """The step the log was at when a migration last ran on the database (0: none since the
    first step)."""
    row = conn.execute(
        f"SELECT value FROM {META_TABLE} WHERE key = ?", (MIGRATED_AT_STEP,)
    ).fetchone()
    return int(row[0]) if row else 0


def migrated_refusal(migrated: int) -> str:
    """Why a session migrated after step `migrated` cannot be taken back before it."""
    return (
        f"this session was migrated after step {migrated}: the step log's row images of steps "
        f"1..{migrated} are from before the migration changed its schema or data, so it cannot "
        f"be taken back before step {migrated}"
    )


def dropped_refusal(step: int, table: str) -> str:
    return (
        f"step {step} changed table {table!r}, which this session no longer has (a migration "
        "dropped it)"
    )


def _columns(conn: sqlite3.Connection) -> dict[str, list[str]]:
    return {
        t: cols.split(",") if cols else []
        for t, cols in conn.execute(f"SELECT tbl, cols FROM {STEP_COLS_TABLE}")
    }


# quote() writes an infinite real as a bare `Inf` / `-Inf`, which SQL does not read back: outside
# string and blob literals it becomes 9e999, which SQLite reads as infinity.
_LITERAL_OR_INF = re.compile(r"X'[0-9A-Fa-f]*'|'(?:[^']|'')*'|\bInf\b")


def sql_literals(literals: str) -> str:
    """quote() output made readable as SQL again (infinite reals)."""
    if "Inf" not in literals:
        return literals
    return _LITERAL_OR_INF.sub(lambda m: "9e999" if m.group() == "Inf" else m.group(), literals)


def _values(conn: sqlite3.Connection, literals: str | None, columns: list[str]) -> Any:
    if literals is None:
        return None
    # The literals are SQLite's own quote() output: reading them back is a SELECT of constants.
    values = conn.execute(f"SELECT {sql_literals(literals)}").fetchone() if columns else ()
    return dict(zip(columns, values, strict=True))


def read_changes(
    conn: sqlite3.Connection, steps: Iterable[int] | None = None
) -> dict[int, list[RowChange]]:
    """Row changes per step (all steps, or those of `steps`), in the order they were made."""
    columns = _columns(conn)
    query = f"SELECT step, tbl, op, old_vals, new_vals FROM {STEP_ROWS_TABLE}"
    wanted = None if steps is None else set(steps)
    out: dict[int, list[RowChange]] = {}
    for step, table, op, old, new in conn.execute(query + " ORDER BY seq"):
        if wanted is not None and step not in wanted:
            continue
        cols = columns.get(table, [])
        out.setdefault(step, []).append(
            RowChange(step, table, _OPS[op], _values(conn, old, cols), _values(conn, new, cols))
        )
    return out


@dataclass(frozen=True)
class RowImage:
    """One logged row change with its rowids (undo-level detail, for step rewards)."""

    step: int
    table: str
    op: str  # "i" | "u" | "d"
    old_rid: int | None  # SQLite: the rowid; PostgreSQL: the integer primary key
    new_rid: int | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def read_row_images(conn: sqlite3.Connection) -> list[RowImage]:
    """Every logged row change, in the order made, values read back from their literals."""
    columns = _columns(conn)
    out = []
    query = (
        f"SELECT step, tbl, op, old_rid, new_rid, old_vals, new_vals FROM {STEP_ROWS_TABLE} "
        "ORDER BY seq"
    )
    for step, table, op, old_rid, new_rid, old, new in conn.execute(query).fetchall():
        cols = columns.get(table, [])
        before, after = _values(conn, old, cols), _values(conn, new, cols)
        out.append(RowImage(step, table, op, old_rid, new_rid, before, after))
    return out


def change_counts(conn: sqlite3.Connection) -> dict[int, dict[str, int]]:
    """Per step, how many rows it changed per table."""
    out: dict[int, dict[str, int]] = {}
    for step, table, n in conn.execute(
        f"SELECT step, tbl, count(*) FROM {STEP_ROWS_TABLE} GROUP BY step, tbl ORDER BY step, tbl"
    ):
        out.setdefault(step, {})[table] = n
    return out


class UndoUnavailable(Exception):
    """The log cannot restore this database (a table changed shape or has no rowid)."""


def check_step(log: StepLog, to_step: int, tables: Iterable[str]) -> int:
    """The session's step count, after checking `to_step` is one of its steps (0: as seeded)
    that its log can take it back to."""
    count = log.count()
    if not 0 <= to_step <= count:
        raise CannotRewind(
            f"step {to_step} is not in this session's log (it has steps 0..{count})",
            hint="0 is the seeded state; `stategym sessions steps ID` lists the steps.",
        )
    migrated = log.migrated_at()
    if to_step < migrated:
        raise CannotRewind(
            migrated_refusal(migrated),
            hint=f"Rewind or fork as of step {migrated} (the state the migration left) or later.",
        )
    if to_step < count and not log.undo_supported(tables):
        raise CannotRewind(
            "this session's step log cannot undo its changes (a table changed shape since the "
            "snapshot, or it was seeded before step logging)"
        )
    return count


def undo_supported(conn: sqlite3.Connection, tables: Iterable[str]) -> bool:
    """Whether every one of `tables` is logged with its current columns and intact triggers
    (a migration that recreates a table drops its triggers; a table without rowid is not logged).
    """
    columns = _columns(conn)
    triggers = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?",
            (STEP_PREFIX + "%",),
        )
    }
    for table in tables:
        current = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
        if columns.get(table) != current:
            return False
        if any(f"{STEP_PREFIX}{table}_{s}" not in triggers for s in ("insert", "update", "delete")):
            return False
    return True


_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


def _env_triggers(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name NOT LIKE ? "
        "ORDER BY name",
        (_OURS + "%",),
    ).fetchall()


def undo_to(conn: sqlite3.Connection, to_step: int) -> int:
    """Put the database back to its state after step `to_step` (0: as seeded), inside the
    caller's transaction, and drop the later steps from the log. Returns the steps undone.

    The caller holds a write transaction (BEGIN IMMEDIATE) or a savepoint, and commits or rolls
    back: a failure halfway leaves nothing done once it rolls back.
    """
    migrated = migrated_at(conn)
    if to_step < migrated:
        raise UndoUnavailable(migrated_refusal(migrated))
    columns = _columns(conn)
    changes = conn.execute(
        f"SELECT step, tbl, op, old_rid, new_rid, old_vals FROM {STEP_ROWS_TABLE} WHERE step > ? "
        "ORDER BY seq DESC",
        (to_step,),
    ).fetchall()
    undone = conn.execute(f"SELECT count(*) FROM {STEPS_TABLE} WHERE idx > ?", (to_step,))
    count = int(undone.fetchone()[0])
    if changes:
        # A table a migration dropped (a session migrated before its step was recorded).
        existing = {row[0] for row in conn.execute(_TABLES)}
        for step, table, *_ in reversed(changes):
            if table not in existing:
                raise UndoUnavailable(dropped_refusal(step, table))
        triggers = _env_triggers(conn)
        conn.execute("PRAGMA defer_foreign_keys=ON")
        for name, _sql in triggers:
            conn.execute(f'DROP TRIGGER "{name}"')
        for _step, table, op, old_rid, new_rid, old_vals in changes:
            cols = columns.get(table)
            if cols is None or (op != "i" and old_vals is None):
                raise UndoUnavailable(f"no record of {table}'s columns")
            quoted = ", ".join(f'"{c}"' for c in cols)
            before = sql_literals(old_vals) if old_vals is not None else "NULL"
            if op == "i":
                conn.execute(f'DELETE FROM "{table}" WHERE _rowid_ = ?', (new_rid,))
            elif op == "d":
                conn.execute(
                    f'INSERT INTO "{table}"(_rowid_, {quoted}) VALUES (?, {before})',
                    (old_rid,),
                )
            else:
                conn.execute(
                    f'UPDATE "{table}" SET ({quoted}) = ({before}), _rowid_ = ? WHERE _rowid_ = ?',
                    (old_rid, new_rid),
                )
        for _name, sql in triggers:
            conn.execute(sql)
    # The undo's own writes were logged by the triggers as a further step: dropped with the rest.
    conn.execute(f"DELETE FROM {STEP_ROWS_TABLE} WHERE step > ?", (to_step,))
    conn.execute(f"DELETE FROM {STEPS_TABLE} WHERE idx > ?", (to_step,))
    return count


# --- the log as readers above app/storage/ see it -------------------------------------------


class StepLog(Protocol):
    """A session's step log, read (and undone) in the caller's transaction."""

    def steps(self, upto: int | None = None) -> list[StepRow]: ...
    def count(self) -> int: ...
    def migrated_at(self) -> int:
        """The step the log was at when a migration last ran on the session (0: none since
        its first step); no undo goes back before it."""
        ...

    def changed_steps(self) -> set[int]:
        """The steps that changed at least one row."""
        ...

    def row_images(self) -> list[RowImage]: ...
    def changes(self, steps: Iterable[int] | None = None) -> dict[int, list[RowChange]]: ...
    def change_counts(self) -> dict[int, dict[str, int]]: ...
    def undo_supported(self, tables: Iterable[str]) -> bool: ...
    def undo_to(self, to_step: int) -> int:
        """As `undo_to` below: the state after `to_step`, later steps dropped (in the caller's
        transaction or savepoint); raises UndoUnavailable."""
        ...

    def scratch(self) -> AbstractContextManager[None]:
        """A savepoint rolled back on exit (what is undone inside is never kept); a database
        error inside (a read-only transaction) is raised as UndoUnavailable."""
        ...


def step_log(conn: Any) -> StepLog | None:
    """The step log of the session `conn` (a SQLAlchemy Connection) is on, or None when the
    session keeps none."""
    return driver_of(conn).step_log(conn)


class SqliteStepLog:
    """The step log of a SQLite database (the functions above, on its sqlite3 connection)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def steps(self, upto: int | None = None) -> list[StepRow]:
        return read_steps(self.conn, upto)

    def count(self) -> int:
        return step_count(self.conn)

    def migrated_at(self) -> int:
        return migrated_at(self.conn)

    def changed_steps(self) -> set[int]:
        query = f"SELECT DISTINCT step FROM {STEP_ROWS_TABLE}"
        return {row[0] for row in self.conn.execute(query).fetchall()}

    def row_images(self) -> list[RowImage]:
        return read_row_images(self.conn)

    def changes(self, steps: Iterable[int] | None = None) -> dict[int, list[RowChange]]:
        return read_changes(self.conn, steps)

    def change_counts(self) -> dict[int, dict[str, int]]:
        return change_counts(self.conn)

    def undo_supported(self, tables: Iterable[str]) -> bool:
        return undo_supported(self.conn, tables)

    def undo_to(self, to_step: int) -> int:
        return undo_to(self.conn, to_step)

    @contextmanager
    def scratch(self) -> Iterator[None]:
        self.conn.execute("SAVEPOINT stategym_scratch")
        try:
            yield
        except sqlite3.OperationalError as exc:  # a read-only copy (offline inspection)
            raise UndoUnavailable(str(exc)) from exc
        finally:
            self.conn.execute("ROLLBACK TO stategym_scratch")
            self.conn.execute("RELEASE stategym_scratch")
