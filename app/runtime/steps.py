"""Recording each tool call as one step of the session's log (app/storage/steplog.py).

A call that succeeds writes its step inside its own transaction, just before the commit, so the
step and the rows it changed are kept or lost together. A call that fails was rolled back; its
step (no row changes) is written afterwards in a transaction of its own. What is recorded as the
output is the exact body the agent receives (Starlette's JSONResponse rendering), or, past
`OUTPUT_CAP` bytes, only its sha256 digest and size.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app import jsonio
from app.storage.images import ImageConnection
from app.storage.steplog import canonical, write_alone, write_step

OUTPUT_CAP = 16 * 1024


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
