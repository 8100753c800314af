"""Run one tool call as one transaction: validate arguments, call the tool, commit or roll back.

Used by live sessions and by gold replay alike, so the gold state is reached by the exact code
path an agent's calls take.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.sdk.environment import Tool, ToolContext, ToolError
from app.storage.driver import DbError, classify, time_limit

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
            with time_limit(db, time_limit_ms):
                answer = {"output": _jsonable(tool(db, args, ctx))}
                if on_success is not None:
                    on_success(db, answer)
        return answer
    except ToolError as exc:
        return {"error": exc.as_payload()}
    except DBAPIError as exc:
        # The backend's driver says what failed (app/storage/driver.py); the answer's words are
        # the catalogue's, the same on every backend.
        found = classify(exc, engine)
        if found is None:
            raise
        failure, facts = found
        if failure is DbError.DATABASE:
            log.warning("tool %s failed in the database: %s", tool.name, exc)
        return failure.payload(tool.name, limit_ms=time_limit_ms, **facts)
