"""The sql environment's lean baseline: an in-memory sqlite3 database per session, not dicts.

Why not dicts: the agent's tool is `run_sql`, arbitrary SQLite. Over dicts a lean server would
have to implement a SQL engine, or accept only the statements the gold happens to use; neither is
what a NeMo Gym user writes first. What they write is `sqlite3.connect(":memory:")` per session:
the environment's schema and base rows (read once per process from the StateGym template file,
as the other lean servers read theirs; its CHECK constraints, foreign keys and business-rule
triggers come with it) deserialized into a fresh connection (a memcpy of ~0.5 MB), then the
task's own seed rows upserted. A statement runs on the session's connection in its own
transaction, rolled back if it fails.

Kept from StateGym's sandbox (envs/sql/sandbox.py): one statement per call, an authorizer that
refuses schema changes, ATTACH / DETACH, transaction control, setting PRAGMAs and random(), a
1-second deadline (progress handler), at most 200 result rows. Left out: the frozen clock ('now'
and CURRENT_* read the machine's clock here; no shipped gold uses them; only `date('now')`, which
the rules' triggers read, gives the session's day), the bounded string
functions and SQLite limits (value size, LIKE pattern length, ...), the 64 KiB result cap, the
per-call error classification and hints, change tracking, describe_table's CHECK and trigger
texts (it shows PRAGMA table_info / foreign_key_list). The lean verify compares every row of the
compared tables by primary key (`same_state`: a byte-identical database is equal at once,
otherwise one `SELECT *` per table of the agent's database, ~4,000 rows, against the gold's dump
cached per task), not StateGym's natural keys: an agent whose
INSERTs get other ids than the gold's scores 0 here where StateGym may score 1.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from bench.lean_db import Row, ToolFailed

# Foreign-key order: seed rows are upserted table by table in this order.
TABLES = (
    "departments customers employees salaries projects invoices timesheets timesheet_archive"
).split()
COMPARED = tuple(TABLES)
MAX_ROWS = 200
TIME_LIMIT_S = 1.0
READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list",
                "foreign_key_check", "table_list"}  # fmt: skip
DENIED_FUNCTIONS = ("random", "randomblob", "load_extension")
_DENIED = {
    getattr(sqlite3, name)
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_"))
} | {
    sqlite3.SQLITE_ALTER_TABLE,
    sqlite3.SQLITE_REINDEX,
    sqlite3.SQLITE_ANALYZE,
    sqlite3.SQLITE_ATTACH,
    sqlite3.SQLITE_DETACH,
    sqlite3.SQLITE_TRANSACTION,
    sqlite3.SQLITE_SAVEPOINT,
}


def _authorize(action: int, arg1: str | None, arg2: str | None, dbname: str | None, _s: Any) -> int:
    if action in _DENIED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in READ_PRAGMAS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE) and (
        (arg1 or "").lower().startswith(("sqlite_", "_stategym"))
    ):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class Base:
    """The template database's image, read once per process."""

    def __init__(self, template_path: str, tables: list[str]):
        conn = sqlite3.connect(f"file:{template_path}?mode=ro", uri=True)
        self.image = conn.serialize()
        conn.close()


class Db:
    """One session: its own in-memory database (base image + the task's seed rows)."""

    def __init__(self, base: Base, seed_rows: dict[str, list[Row]] | None):
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.deserialize(base.image)
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._dump: dict[str, list[tuple[Any, ...]]] | None = None
        rows_by_table = seed_rows or {}
        unknown = set(rows_by_table) - set(TABLES)
        if unknown:
            raise ValueError(f"seed.rows: unknown table(s) {sorted(unknown)}")
        self.conn.execute("BEGIN")  # one transaction; an upsert per row, as StateGym's seeding does
        try:
            for table in TABLES:
                for row in rows_by_table.get(table) or ():
                    cols = list(row)
                    names = ", ".join(f'"{c}"' for c in cols)
                    updates = ", ".join(f'"{c}" = excluded."{c}"' for c in cols if c != "id")
                    self.conn.execute(
                        f'INSERT INTO "{table}" ({names}) '
                        f"VALUES ({', '.join('?' * len(cols))}) ON CONFLICT(id) "
                        + (f"DO UPDATE SET {updates}" if updates else "DO NOTHING"),
                        [row[c] for c in cols],
                    )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def run(self, sql: str) -> dict[str, Any]:
        """One statement in its own transaction, fenced by the authorizer and a deadline."""
        if not sql.strip() or len(sql) > 20_000:
            raise ToolFailed("The statement is empty or longer than 20,000 characters.")
        deadline = time.monotonic() + TIME_LIMIT_S
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.set_authorizer(_authorize)
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1_000)
        try:
            cursor = conn.execute(sql)
            if cursor.description is not None:
                rows = [list(r) for r in cursor.fetchmany(MAX_ROWS + 1)]
                out: dict[str, Any] = {
                    "columns": [d[0] for d in cursor.description],
                    "rows": rows[:MAX_ROWS],
                    "row_count": min(len(rows), MAX_ROWS),
                }
                if len(rows) > MAX_ROWS:
                    out["truncated"] = True
            else:
                out = {"statement": sql.split()[0].upper(), "rows_affected": cursor.rowcount}
            cursor.close()
        except (sqlite3.Error, sqlite3.Warning) as exc:
            conn.set_authorizer(None)
            conn.set_progress_handler(None, 0)
            conn.execute("ROLLBACK")
            raise ToolFailed(f"SQL error: {exc}. Nothing was changed.") from None
        conn.set_authorizer(None)
        conn.set_progress_handler(None, 0)
        if conn.in_transaction:
            conn.execute("COMMIT")
        if out.get("rows_affected"):
            self._dump = None
        return out

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        if self._dump is None:
            self._dump = {
                t: self.conn.execute(f'SELECT * FROM "{t}" ORDER BY id').fetchall()
                for t in COMPARED
            }
        return self._dump

    def close(self) -> None:
        self.conn.close()


def same_state(a: Db, b: Db, tables: tuple[str, ...]) -> bool:
    """Byte-identical databases hold the same rows (the gold rollout, replaying the gold's
    statements on the same image, gives one: ~0.1 ms); otherwise every row is compared (~4 ms)."""
    return a.conn.serialize() == b.conn.serialize() or a.dump() == b.dump()


def list_tables(db: Db, a: dict[str, Any], now: str) -> Any:
    return {
        "tables": [
            {"table": t, "rows": db.conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]}
            for t in TABLES
        ]
    }


def describe_table(db: Db, a: dict[str, Any], now: str) -> Any:
    name = str(a["table"]).lower()
    if name not in TABLES:
        raise ToolFailed(f"There is no table {a['table']!r}. Tables: {', '.join(TABLES)}.")
    fks = {r[3]: f"{r[2]}.{r[4]}" for r in db.conn.execute(f'PRAGMA foreign_key_list("{name}")')}
    columns = [
        {
            "name": r[1],
            "type": r[2],
            "nullable": not r[3],
            "primary_key": bool(r[5]),
            "references": fks.get(r[1]),
        }
        for r in db.conn.execute(f'PRAGMA table_info("{name}")')
    ]
    return {"table": name, "columns": columns}


_PLAIN = sqlite3.connect(":memory:", check_same_thread=False)  # SQLite's own date()


def run_sql(db: Db, a: dict[str, Any], now: str) -> Any:
    # The rules with exceptions (a salary row not yet in effect, a hire not yet started) compare
    # with date('now'): the session's day, as StateGym's frozen clock gives it.
    def day(*args: Any) -> Any:
        if args == ("now",):
            return now[:10]
        return _PLAIN.execute(f"SELECT date({', '.join('?' * len(args))})", args).fetchone()[0]

    db.conn.create_function("date", -1, day)
    return db.run(a["sql"])


TOOLS = {f.__name__: f for f in (list_tables, describe_table, run_sql)}
