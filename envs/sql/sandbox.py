"""The SQL console's sandbox: one agent statement on the session's own connection, fenced in.

For the duration of one call the session's raw sqlite3 connection gets an authorizer (no ATTACH /
DETACH / VACUUM INTO, no schema changes, no setting PRAGMAs, no transaction control, no
load_extension, none of the framework's `_stategym_*` tables, nor its answer table, written only by
submit_answer / decline_request), a progress handler (a VM-step budget and a deadline on this
thread's CPU time, so waiting for the GIL or a core does not count and a cheap statement, a gold
replay's too, is never cut under load), and lowered limits (no attached databases, values and
rows of at most 64 KiB, short LIKE patterns, bounded statement size; CALL_LIMITS). Everything is
removed again before the call returns, whatever happened. The framework owns the transaction: a
failing statement raises ToolError and the whole call is rolled back.

A progress handler runs between VM steps, never inside one: functions whose cost grows with
their arguments (printf widths, instr / replace / trim / LIKE / GLOB on long strings) are
replaced by bounded versions that also check the deadline (app/storage/sqlite/sql_functions.py),
and the clock functions read the session's frozen clock. The limits and what they cost are in
docs/durability.md ("Agent SQL: time, memory and disk").
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.authoring import sqlite as sqlite_db
from app.authoring.sqlite import install_bounded_functions, install_frozen_clock
from app.sdk.answer import ANSWER_TABLE
from app.sdk.compare_spec import CONVERSATION_TABLE, USER_TABLE
from app.sdk.environment import ToolError
from envs.sql.models import rule_code

MAX_SQL_CHARS = 20_000
MAX_ROWS = 200
MAX_BYTES = 64 * 1024
MAX_CELL_CHARS = 2_000
MAX_ROW_CHARS = 16_000  # a row's cells share this; never below MIN_CELL_CHARS each
MIN_CELL_CHARS = 100
MAX_NAME_CHARS = 200
# The progress handler runs every PROGRESS_EVERY VM instructions; after STEP_BUDGET of them
# (~50 M instructions) or TIME_LIMIT_S seconds of the calling thread's CPU time, whichever comes
# first, the statement is stopped.
PROGRESS_EVERY = 1_000
STEP_BUDGET = 50_000
TIME_LIMIT_S = 1.0
# A wall-clock backstop besides: however the machine is loaded, no statement runs longer.
WALL_LIMIT_S = 5 * TIME_LIMIT_S
# A value (string, blob) or a row of a table is at most this long during a call; a result row
# holds at most MAX_COLUMNS of them, so one row costs at most ~6.5 MB of Python objects.
MAX_VALUE_BYTES = 65_536
MAX_COLUMNS = 100
MAX_LIKE_PATTERN = 200
# instr / replace / trim / LIKE / GLOB: at most this product of their two arguments' lengths
# (about 45 ms for the slowest, trim, on this machine).
MAX_FUNCTION_WORK = 10_000_000
CALL_LIMITS = {
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,  # no attached databases at all
    sqlite3.SQLITE_LIMIT_LENGTH: MAX_VALUE_BYTES,  # zeroblob(1e9), printf padding, big rows
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,  # MAX_SQL_CHARS of any UTF-8
    sqlite3.SQLITE_LIMIT_COLUMN: MAX_COLUMNS,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 250,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 100,
    sqlite3.SQLITE_LIMIT_VDBE_OP: 250_000,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 64,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: MAX_LIKE_PATTERN,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 50,
}

# `_stategym_meta`, `_stategym_changes`, ...: the framework's tables and triggers.
PLATFORM_PREFIX = "_stategym"
SCHEMA_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"}
READ_PRAGMAS = {
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
    "foreign_key_check", "table_list",
}  # fmt: skip
# Functions that reach outside the database or make results unrepeatable.
DENIED_FUNCTIONS = {"load_extension", "fts3_tokenizer", "random", "randomblob"}
_DDL_ACTIONS = {
    sqlite3.SQLITE_CREATE_INDEX, sqlite3.SQLITE_CREATE_TABLE, sqlite3.SQLITE_CREATE_TEMP_INDEX,
    sqlite3.SQLITE_CREATE_TEMP_TABLE, sqlite3.SQLITE_CREATE_TEMP_TRIGGER,
    sqlite3.SQLITE_CREATE_TEMP_VIEW, sqlite3.SQLITE_CREATE_TRIGGER, sqlite3.SQLITE_CREATE_VIEW,
    sqlite3.SQLITE_DROP_INDEX, sqlite3.SQLITE_DROP_TABLE, sqlite3.SQLITE_DROP_TEMP_INDEX,
    sqlite3.SQLITE_DROP_TEMP_TABLE, sqlite3.SQLITE_DROP_TEMP_TRIGGER,
    sqlite3.SQLITE_DROP_TEMP_VIEW, sqlite3.SQLITE_DROP_TRIGGER, sqlite3.SQLITE_DROP_VIEW,
    sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_REINDEX, sqlite3.SQLITE_ANALYZE,
    sqlite3.SQLITE_CREATE_VTABLE, sqlite3.SQLITE_DROP_VTABLE,
}  # fmt: skip
_WRITES = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
_TOKEN = re.compile(
    r"""(?P<space>\s+)|(?P<comment>--[^\n]*|/\*.*?(?:\*/|$))|(?P<string>'(?:[^']|'')*'?)
    |(?P<ident>"(?:[^"]|"")*"?|`[^`]*`?|\[[^\]]*\]?)|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    |(?P<other>.)""",
    re.DOTALL | re.VERBOSE,
)
_DML_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _tokens(sql: str) -> Iterator[tuple[str, str]]:
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup or "other"
        if kind not in ("space", "comment"):
            yield kind, m.group()


def precheck(sql: str) -> None:
    """Refusals that need the statement's text: emptiness, size, VACUUM. (The clock needs no
    refusal: 'now' and CURRENT_* read the session's frozen clock, whatever builds them.)"""
    if not sql.strip():
        raise ToolError(
            "The SQL statement is empty.",
            hint="Pass one SQL statement in `sql`.",
            code="invalid_arguments",
        )
    if len(sql) > MAX_SQL_CHARS:
        raise ToolError(
            f"The statement is {len(sql)} characters long; the limit is {MAX_SQL_CHARS}.",
            hint="Split the work into smaller statements.",
            code="invalid_arguments",
        )
    tokens = list(_tokens(sql))
    words = [v.lower() for k, v in tokens if k == "word"]
    if not words:
        raise ToolError(
            "The text holds no SQL statement (only comments or punctuation).",
            code="invalid_arguments",
        )
    lead = [w for w in words[:4] if w not in ("explain", "query", "plan")]
    if lead and lead[0] == "vacuum":
        raise ToolError(
            "VACUUM is not allowed in this console (nor VACUUM INTO a file).",
            hint="The database is maintained by the platform.",
            code="not_allowed",
        )


@dataclass
class Guard:
    """Authorizer + progress handler of one call; remembers why it refused something."""

    reasons: list[str] = field(default_factory=list)
    steps: int = 0
    deadline: float = 0.0  # on time.thread_time()
    wall_deadline: float = float("inf")  # on time.monotonic()
    timed_out: bool = False
    limits: list[str] = field(default_factory=list)  # size limits a function refused
    failures: list[str] = field(default_factory=list)  # errors of SQLite's own functions
    active: bool = True  # the bounded functions stay on the connection; the deadline does not

    def expired(self) -> bool:
        if not self.active:
            return False
        if time.thread_time() > self.deadline or time.monotonic() > self.wall_deadline:
            self.timed_out = True
        return self.timed_out

    def refuse(self, why: str) -> None:
        self.limits.append(why)

    def fail(self, why: str) -> None:
        self.failures.append(why)

    def _deny(self, reason: str) -> int:
        self.reasons.append(reason)
        return sqlite3.SQLITE_DENY

    def authorize(
        self, action: int, arg1: str | None, arg2: str | None, dbname: str | None, _src: Any
    ) -> int:
        names = [(arg1 or "").lower(), (arg2 or "").lower()]
        platform = next((n for n in names if n.startswith(PLATFORM_PREFIX)), None)
        # The platform's own triggers (change tracking) may write its tables; the agent may not.
        if platform and not (_src or "").lower().startswith(PLATFORM_PREFIX):
            return self._deny(f"the table {platform} belongs to the platform")
        if ANSWER_TABLE in names and not (_src or "").lower().startswith(PLATFORM_PREFIX):
            # Only submit_answer / decline_request write the answer; the console never sees it.
            return self._deny(
                f"the table {ANSWER_TABLE} holds the submitted answer: use the "
                "submit_answer or decline_request tool"
            )
        talk = next((n for n in names if n in (USER_TABLE, CONVERSATION_TABLE)), None)
        if talk and not (_src or "").lower().startswith(PLATFORM_PREFIX):
            # The user's script and the conversation: message_user's alone (the script would
            # tell the user's later wishes).
            return self._deny(f"the table {talk} belongs to the user: use the message_user tool")
        if "sqlite_dbpage" in names:  # raw page access, where SQLite is built with it
            return self._deny("raw database pages (sqlite_dbpage) are out of reach")
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return self._deny(
                "ATTACH / DETACH (and VACUUM INTO) are not allowed: only this "
                "session's database is reachable"
            )
        if action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT):
            return self._deny(
                "transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE) "
                "is not allowed: every call is already one transaction, rolled "
                "back if it fails"
            )
        if action in _DDL_ACTIONS:
            return self._deny(
                "schema changes (CREATE, DROP, ALTER, REINDEX, ANALYZE) are not "
                "allowed: this console changes data only"
            )
        if action in _WRITES and (arg1 or "").lower() in SCHEMA_TABLES:
            return self._deny(
                "schema changes (CREATE, DROP, ALTER, writes to sqlite_master) are "
                "not allowed: this console changes data only; table-valued pragma "
                "functions such as pragma_table_info() are unavailable too, use "
                "PRAGMA table_info(name) or describe_table"
            )
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in READ_PRAGMAS:
            return self._deny(
                f"PRAGMA {arg1} is not allowed; allowed are the read-only "
                f"{', '.join(sorted(READ_PRAGMAS))}"
            )
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
            return self._deny(
                f"the function {arg2}() is not allowed (results must be "
                "repeatable and stay inside this database)"
            )
        if dbname not in (None, "main"):
            return self._deny(f"only the main database is reachable, not {dbname!r}")
        return sqlite3.SQLITE_OK

    def progress(self) -> int:
        self.steps += 1
        if self.steps > STEP_BUDGET or self.expired():
            self.timed_out = True
            return 1
        return 0


def _cell(value: Any, limit: int = MAX_CELL_CHARS) -> Any:
    if isinstance(value, bytes):
        return f"<blob of {len(value)} bytes>"
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"... [{len(value) - limit} more characters]"
    return value


def _collect(cursor: sqlite3.Cursor) -> dict[str, Any]:
    # A column's name is its expression's text, up to the statement's length: shortened too.
    columns = [_cell(d[0], MAX_NAME_CHARS) for d in cursor.description]
    # Per row: wide rows get shorter cells, so one row never fills the whole answer.
    limit = max(MIN_CELL_CHARS, min(MAX_CELL_CHARS, MAX_ROW_CHARS // max(1, len(columns))))
    rows: list[list[Any]] = []
    size, truncated = 2, None
    for raw in cursor:
        if len(rows) == MAX_ROWS:
            truncated = f"only the first {MAX_ROWS} rows are shown"
            break
        row = [_cell(v, limit) for v in raw]
        size += len(json.dumps(row, default=str)) + 1
        if size > MAX_BYTES:
            truncated = (
                f"only the first {len(rows)} rows are shown (output limit {MAX_BYTES} bytes)"
            )
            break
        rows.append(row)
    out: dict[str, Any] = {"columns": columns, "rows": rows, "row_count": len(rows)}
    if truncated:
        out["truncated"] = True
        out["note"] = f"Result truncated: {truncated}. Add WHERE / LIMIT or aggregate."
    return out


def _error(guard: Guard, exc: sqlite3.Error, raw: sqlite3.Connection) -> ToolError:
    text = str(exc)
    if guard.timed_out:
        return ToolError(
            f"The statement took too long and was stopped (limit {TIME_LIMIT_S:g} s or "
            f"{STEP_BUDGET * PROGRESS_EVERY:,} steps); nothing was changed.",
            hint="Add a WHERE clause, use indexed columns, or bound recursive queries.",
            code="timeout",
        )
    if guard.reasons:
        return ToolError(
            f"Not allowed: {guard.reasons[0]}. Nothing was changed.",
            hint="Use plain SELECT, INSERT, UPDATE or DELETE statements.",
            code="not_allowed",
        )
    if guard.limits:
        return ToolError(
            f"Refused: {guard.limits[0]}. Nothing was changed.",
            hint="Ask for shorter values (substr, LIMIT) or split the work.",
            code="too_large",
        )
    if guard.failures:
        return ToolError(
            f"SQL error: {guard.failures[0]}. Nothing was changed.",
            hint="Check the function's arguments.",
            code="sql_error",
        )
    if "string or blob too big" in text or "pattern too complex" in text:
        return ToolError(
            f"A value, row or LIKE pattern is over the console's limits ({MAX_VALUE_BYTES:,} "
            f"bytes per value or row, {MAX_LIKE_PATTERN} characters per pattern); nothing was "
            "changed.",
            hint="Work with shorter values (substr, length) or split the work.",
            code="too_large",
        )
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        cap = sqlite_db.size_limit_hit(raw)
        if cap is not None:
            return ToolError(
                f"This session's database would grow past its size limit of {cap // 2**20} MiB; "
                "nothing was changed.",
                hint="Write fewer or shorter rows (or delete rows you added).",
                code="size_limit",
            )
    if "one statement at a time" in text:
        return ToolError(
            "Only one SQL statement per call; nothing was run.",
            hint="Send each statement in its own run_sql call.",
            code="one_statement",
        )
    if "number of bindings" in text:
        return ToolError(
            "The statement has ? or :name parameters; this console takes no parameters.",
            hint="Write the values as SQL literals ('text', 42, '2026-03-16').",
            code="sql_error",
        )
    if isinstance(exc, sqlite3.IntegrityError) and (code := rule_code(text)) is not None:
        return ToolError(
            f"A company rule refused the statement: {text}. Nothing was changed.",
            hint="The policy names this rule; decline the request with this code if it "
            "breaks the rule.",
            code=code,
        )
    if isinstance(exc, sqlite3.IntegrityError):
        return ToolError(
            f"A database rule refused the statement: {text}. Nothing was changed.",
            hint="Check the constraints with describe_table.",
            code="constraint_violation",
        )
    return ToolError(
        f"SQL error: {text}. Nothing was changed.",
        hint="Check table and column names with list_tables / describe_table.",
        code="sql_error",
    )


def run_statement(db: Session, sql: str, now: datetime) -> dict[str, Any]:
    """Run one agent statement inside the call's transaction; results capped, sandbox removed.
    `now` is the session's frozen clock, what 'now' and CURRENT_* mean in the statement."""
    raw = db.connection().connection.driver_connection  # the transaction is begun here
    assert isinstance(raw, sqlite3.Connection)
    guard = Guard(
        deadline=time.thread_time() + TIME_LIMIT_S, wall_deadline=time.monotonic() + WALL_LIMIT_S
    )
    old_limits = {k: raw.setlimit(k, v) for k, v in CALL_LIMITS.items()}
    raw.set_authorizer(guard.authorize)
    raw.set_progress_handler(guard.progress, PROGRESS_EVERY)
    install_frozen_clock(raw, now)
    install_bounded_functions(
        raw,
        guard,
        max_chars=MAX_VALUE_BYTES,
        max_work=MAX_FUNCTION_WORK,
        max_pattern=MAX_LIKE_PATTERN,
    )
    cursor = raw.cursor()
    failure: sqlite3.Error
    try:
        cursor.execute(sql)
        if cursor.description is not None:
            return _collect(cursor)
        words = [v.upper() for k, v in _tokens(sql) if k == "word"]
        verb = next((w for w in words if w in _DML_VERBS), words[0])
        # changes(): rows of the statement itself, not those written by (platform) triggers.
        changed = raw.execute("SELECT changes()").fetchone()[0] if verb in _DML_VERBS else 0
        return {"statement": verb, "rows_affected": changed}
    except sqlite3.Error as exc:
        failure = exc
    finally:
        cursor.close()
        guard.active = False
        raw.set_progress_handler(None, 0)
        raw.set_authorizer(None)
        for k, v in old_limits.items():
            raw.setlimit(k, v)
    raise _error(guard, failure, raw) from None
