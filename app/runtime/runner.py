"""Run one tool call as one transaction: validate arguments, call the tool, commit or roll back.

Used by live sessions and by gold replay alike, so the gold state is reached by the exact code
path an agent's calls take.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from app.sdk.environment import Tool, ToolContext, ToolError
from app.storage.sqlite import db as sqlite_db

log = logging.getLogger("stategym.tools")


def _validation_error(tool: Tool, exc: ValidationError) -> ToolError:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        problems.append(f"{where}: {err['msg']}")
    return ToolError(
        f"Invalid arguments for {tool.name}: " + "; ".join(problems),
        hint=_expected_args(tool),
        code="invalid_arguments",
    )


def _expected_args(tool: Tool) -> str:
    fields = tool.args_model.model_fields
    expected = ", ".join(
        f"{name} ({'required' if f.is_required() else 'optional'})" for name, f in fields.items()
    )
    return f"{tool.name} takes: {expected or 'no arguments'}."


def parse_args(tool: Tool, raw: Any) -> BaseModel:
    if not isinstance(raw, dict):
        raise ToolError(
            f"Arguments for {tool.name} must be a JSON object, got {type(raw).__name__}.",
            hint=_expected_args(tool),
            code="invalid_arguments",
        )
    try:
        return tool.args_model.model_validate(raw)
    except ValidationError as exc:
        raise _validation_error(tool, exc) from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


@contextmanager
def sql_time_limit(db: Session, limit_ms: int | None) -> Iterator[None]:
    """Interrupt the call's SQL once it has run `limit_ms` (SQLite's progress handler)."""
    raw = db.connection().connection.driver_connection
    if not limit_ms or not isinstance(raw, sqlite3.Connection):
        yield
        return
    deadline = time.monotonic() + limit_ms / 1000
    # Called every 10k VM steps; a truthy answer makes SQLite abort with "interrupted".
    raw.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
    try:
        yield
    finally:
        raw.set_progress_handler(None, 0)


def run_tool(
    engine: Engine | Connection,
    tool: Tool,
    raw_args: Any,
    ctx: ToolContext,
    time_limit_ms: int | None = None,
    on_success: Callable[[Session, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """`{"output": result}` on success, `{"error": {...}}` after a rollback otherwise.

    `engine` is an Engine or a Connection not in a transaction (a session's open handle).
    `on_success(db, answer)` runs in the call's transaction before it commits (the step log).
    """
    try:
        args = parse_args(tool, raw_args)
        with Session(bind=engine, expire_on_commit=False) as db, db.begin():
            with sql_time_limit(db, time_limit_ms):
                answer = {"output": _jsonable(tool(db, args, ctx))}
                if on_success is not None:
                    on_success(db, answer)
        return answer
    except ToolError as exc:
        return {"error": exc.as_payload()}
    except IntegrityError as exc:
        reason = str(exc.orig) if exc.orig is not None else str(exc)
        return {
            "error": {
                "code": "constraint_violation",
                "message": f"{tool.name} was refused by a database constraint ({reason}); "
                "nothing was changed.",
                "hint": "Check the identifiers and quantities you passed.",
            }
        }
    except OperationalError as exc:
        if "interrupted" in str(exc.orig):
            return {
                "error": {
                    "code": "time_limit",
                    "message": f"{tool.name} ran longer than {time_limit_ms} ms and was stopped; "
                    "nothing was changed.",
                    "hint": "Ask for less at once (narrower filters, fewer rows).",
                }
            }
        if "database is locked" in str(exc.orig):
            return {
                "error": {
                    "code": "busy",
                    "message": f"{tool.name} could not start: another call holds this session's "
                    "database; nothing was changed.",
                    "hint": "Retry the call.",
                }
            }
        cap = _size_limit(engine) if "disk is full" in str(exc.orig) else None
        if cap is not None:
            return {
                "error": {
                    "code": "size_limit",
                    "message": f"{tool.name} would grow this session's database past its size "
                    f"limit of {cap // 2**20} MiB; nothing was changed.",
                    "hint": "Write less at once, or remove what you added that is not needed.",
                }
            }
        if "disk is full" in str(exc.orig):
            return {
                "error": {
                    "code": "storage_full",
                    "message": f"{tool.name} could not be saved: no space left on the server's "
                    "disk; nothing was changed.",
                    "hint": "Retry later; if it keeps failing, stop and explain.",
                }
            }
        log.warning("tool %s failed in the database: %s", tool.name, exc)
        return {
            "error": {
                "code": "database_error",
                "message": f"{tool.name} could not complete ({exc.orig}); nothing was changed.",
                "hint": "Retry the call; if it keeps failing, stop and explain.",
            }
        }


def _size_limit(engine: Engine | Connection) -> int | None:
    """The session's size cap when a "database or disk is full" was that cap (not the disk)."""
    raw = getattr(getattr(engine, "connection", None), "driver_connection", None)
    return sqlite_db.size_limit_hit(raw) if isinstance(raw, sqlite3.Connection) else None
