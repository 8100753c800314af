"""The step-recording policy of a tool call on an open session, in one function: whether the
call is logged, the unlogged retry when the log has no room, and the failed call's step.

The recorder that writes a step (`StepRecorder`, in the call's own transaction) is the storage
layer's (app/storage/runner.py), so a call goes runtime -> storage and stays there: this module
decides, storage runs and records. The recorder's names are re-exported here for callers that
replay calls themselves (app/runtime/reverify.py, tests, bench/).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from app.sdk.environment import Tool
from app.storage.base import SessionBackend, SessionHandle
from app.storage.driver import NO_ROOM, RETRY_IN_THREAD
from app.storage.runner import (
    OUTPUT_CAP,
    StepRecorder,
    args_text,
    body_text,
    outcome_of,
    run_tool,
    step_values,
)

__all__ = [
    "OUTPUT_CAP",
    "StepRecorder",
    "args_text",
    "body_text",
    "call_and_record",
    "outcome_of",
    "step_values",
]


def call_and_record(
    backend: SessionBackend,
    handle: SessionHandle,
    tool: Tool,
    raw_args: Any,
    limit_ms: int,
    *,
    inline: bool,
) -> dict[str, Any]:
    """Run one tool call on `handle` and record it in the session's step log when the backend
    logs this session: a success's step in the call's own transaction; with no room for the
    step itself (disk or quota full) the call runs again unlogged, so a lookup still answers;
    a failure's step afterwards, except for an inline attempt that was busy or too slow,
    which runs again in a thread and is not a step yet."""
    ctx = handle.ctx
    unlogged = partial(run_tool, tool=tool, raw_args=raw_args, ctx=ctx, time_limit_ms=limit_ms)
    if not backend.logs_steps(handle):
        return backend.call(handle, tool, unlogged, limit_ms=limit_ms, inline=inline)
    step = StepRecorder(tool.name, raw_args)
    logged = partial(unlogged, on_success=step.on_success)
    result = backend.call(handle, tool, logged, limit_ms=limit_ms, inline=inline)
    code = result.get("error", {}).get("code")
    if code in NO_ROOM:
        return backend.call(handle, tool, unlogged, limit_ms=limit_ms, inline=inline)
    if code is not None and not (inline and code in RETRY_IN_THREAD):
        backend.write_failed_step(handle, step.failure_writer(result))
    return result
