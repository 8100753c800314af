"""Run one tool call as one transaction: validate arguments, call the tool, commit or roll back;
and record it as one step of the session's log (app/storage/steplog.py).

Used by live sessions and by gold replay alike, so the gold state is reached by the exact code
path an agent's calls take. A call that succeeds writes its step inside its own transaction, just
before the commit, so the step and the rows it changed are kept or lost together; a failed call's
step is written afterwards in a transaction of its own. Whether a call is logged at all is the
runtime's decision (app/runtime/steps.py). The recorded output is the exact body the agent
receives (Starlette's JSONResponse rendering), or, past `OUTPUT_CAP` bytes, its sha256 and size.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app import jsonio
from app.sdk.environment import Tool, ToolContext, ToolError
from app.storage.driver import DbError, classify, time_limit
from app.storage.steplog import canonical, write_alone, write_step

if TYPE_CHECKING:
    from app.storage.images import ImageConnection

log = logging.getLogger("stategym.tools")

OUTPUT_CAP = 16 * 1024


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


def body_text(payload: Any) -> str:
    """The JSON text a tool route sends for `payload`: what JSONResponse.render produces
    (app/jsonio.dumps, byte for byte; str() for what no JSON can hold, where the route fails)."""
    try:
        return jsonio.dumps(payload).decode()
    except (TypeError, ValueError):
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def args_text(raw_args: Any) -> str:
    """As sent; compared in canonical form when read (app/storage/steplog.read_steps)."""
    try:
        return jsonio.dumps(raw_args).decode()
    except (TypeError, ValueError):
        return canonical(raw_args)


def outcome_of(payload: dict[str, Any]) -> str:
    error = payload.get("error")
    return "ok" if error is None else str((error or {}).get("code") or "error")


def step_values(tool: str, raw_args: Any, payload: dict[str, Any], seconds: float) -> dict:
    text = body_text(payload)
    data = text.encode()
    return {
        "tool": tool,
        "args": args_text(raw_args),
        "outcome": outcome_of(payload),
        "output": text if len(data) <= OUTPUT_CAP else None,
        # Past the cap only (below it the text is kept, and its digest computed when read).
        "output_digest": hashlib.sha256(data).hexdigest() if len(data) > OUTPUT_CAP else "",
        "output_bytes": len(data),
        "duration_ms": round(seconds * 1000, 3),
    }


class StepRecorder:
    """One tool call's step: `on_success` runs in the call's transaction (run_tool's hook);
    `record_failure` writes a failed call's step afterwards."""

    def __init__(self, tool: str, raw_args: Any):
        self.tool = tool
        self.raw_args = raw_args
        self.started = time.perf_counter()

    def on_success(self, db: Session, payload: dict[str, Any]) -> None:
        # The ORM writes pending changes at commit; they must reach the triggers before the
        # step row does, or they would be logged as the next step's.
        if db.new or db.dirty or db.deleted:
            db.flush()
        values = step_values(self.tool, self.raw_args, payload, time.perf_counter() - self.started)
        write_step(db.connection(), values)  # as the session's backend writes it

    def failure_writer(self, payload: dict[str, Any]) -> Callable[[Any], None]:
        """What writes a failed call's step, in a transaction of its own (the backend's)."""
        values = step_values(self.tool, self.raw_args, payload, time.perf_counter() - self.started)
        return lambda conn: write_step(conn, values)

    def record_failure(self, conn: ImageConnection, payload: dict[str, Any]) -> None:
        """A failed call's step on an image connection of our own (replays, tests)."""
        write_alone(conn, self.failure_writer(payload))
