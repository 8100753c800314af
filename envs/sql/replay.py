"""A sql database in memory, wired exactly like a session's, and tool calls replayed on it.

Uses the framework's own plumbing (`app.authoring.sqlite`: the SQLite connections and
`run_tool` of a live session), so the generator's self-check and the tests exercise the code
path a live session takes: autocommit driver connection, BEGIN IMMEDIATE per call, foreign keys on,
rollback on ToolError.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.authoring import sqlite as sqlite_db
from app.authoring.sqlite import apply_seed, parse_now, run_tool
from app.sdk.answer import ANSWER_TABLE
from app.sdk.compare_spec import FRAMEWORK_TABLES
from app.sdk.environment import ToolContext
from envs.sql import ENVIRONMENT

_BASE: list[bytes] = []


def base_image() -> bytes:
    """The serialized base database, built once per process (~0.3 s)."""
    if not _BASE:
        conn = sqlite_db.open_memory()
        engine = sqlite_db.bind_engine(conn)
        ENVIRONMENT.metadata.create_all(engine)
        with Session(bind=engine) as db, db.begin():
            ENVIRONMENT.build_base(db, random.Random(ENVIRONMENT.base_seed))
        _BASE.append(sqlite_db.image_of(conn))
        engine.dispose()
        conn.close()
    return _BASE[0]


@dataclass
class TaskDb:
    """One in-memory database: base data + a task's seed, and the clock its tools see."""

    conn: sqlite3.Connection
    engine: Engine
    ctx: ToolContext

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        """One tool call through the framework's runner: {"output": ...} or {"error": ...}."""
        tool = ENVIRONMENT.tool_named(name)
        assert tool is not None, name
        return run_tool(self.engine, tool, arguments, self.ctx)

    def sql(self, statement: str) -> dict[str, Any]:
        return self.call("run_sql", sql=statement)

    def replay(self, calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [self.call(c["name"], **c["arguments"]) for c in calls]

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, by primary key: equal dumps mean equal states. The framework's
        answer table is no part of the state (`answer` reads it)."""
        out = {}
        with Session(bind=self.engine) as db, db.begin():
            for name, table in ENVIRONMENT.metadata.tables.items():
                if name in FRAMEWORK_TABLES:
                    continue
                rows = db.execute(select(table).order_by(*table.primary_key.columns)).all()
                out[name] = [tuple(r) for r in rows]
        return out

    def answer(self) -> tuple[Any, ...] | None:
        """The submitted row (kind, value JSON, reason), or None when nothing was submitted."""
        table = ENVIRONMENT.metadata.tables[ANSWER_TABLE]
        with Session(bind=self.engine) as db, db.begin():
            row = db.execute(select(table.c.kind, table.c.value, table.c.reason)).first()
        return None if row is None else tuple(row)

    def close(self) -> None:
        self.engine.dispose()
        self.conn.close()


def open_task_db(seed: Mapping[str, Any] | None = None, session_id: str = "replay") -> TaskDb:
    conn = sqlite_db.memory_from_image(base_image())
    engine = sqlite_db.bind_engine(conn)
    with Session(bind=engine) as db, db.begin():
        apply_seed(db, ENVIRONMENT.metadata, seed)
    now: datetime = parse_now((seed or {}).get("now"), ENVIRONMENT.default_now)
    return TaskDb(conn, engine, ToolContext(now=now, session_id=session_id))
