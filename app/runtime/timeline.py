"""A session's timeline: each step's call, outcome, output, row changes and step reward.

Read from a copy of the session database (never the live file): the step rewards undo the log
in a savepoint, which needs a writable database. Shared by `stategym sessions steps` and the
browser view's timeline page.
"""

from __future__ import annotations

import json
from typing import Any

from app.runtime.tasks import TaskSpec
from app.sdk.environment import Environment
from app.storage.sqlite import db as sqlite_db
from app.storage.steplog import StepRow, change_counts, has_step_log, read_changes, read_steps
from app.verify.gold import GoldCache
from app.verify.session_verify import verify_state


def response_of_steps(steps: list[StepRow]) -> dict[str, Any]:
    """A Responses object whose calls are exactly the logged steps (one turn per step)."""
    output: list[dict[str, Any]] = []
    for step in steps:
        call_id = f"step-{step.idx}"
        output.append(
            {"type": "function_call", "call_id": call_id, "name": step.tool, "arguments": step.args}
        )
        if step.output is not None:
            output.append(
                {"type": "function_call_output", "call_id": call_id, "output": step.output}
            )
    return {"output": output}


def timeline(
    env: Environment, gold: GoldCache, task: TaskSpec, image: bytes, *, rows: bool = True
) -> dict[str, Any]:
    """The steps of a session image, its reward and its state credit Φ(s_n)."""
    conn = sqlite_db.memory_from_image(image)
    bind = sqlite_db.bind_connection(conn)
    try:
        if not has_step_log(conn):
            return {"steps": [], "step_log": False}
        steps = read_steps(conn)
        counts = change_counts(conn)
        changes = read_changes(conn) if rows else {}
        response = response_of_steps(steps)
        verified = verify_state(
            env=env,
            gold=gold,
            engine=bind,  # type: ignore[arg-type]  # a Session binds either
            task=task,
            response=response,
            diff_limit=0,
        )
    finally:
        bind.close()
        conn.close()
    rewards = verified.get("step_rewards") or [None] * len(steps)
    out = []
    for step, reward in zip(steps, rewards, strict=True):
        entry: dict[str, Any] = {
            "step": step.idx,
            "tool": step.tool,
            "arguments": json.loads(step.args),
            "outcome": step.outcome,
            "output": json.loads(step.output) if step.output is not None else None,
            "output_digest": step.output_digest,
            "output_bytes": step.output_bytes,
            "duration_ms": step.duration_ms,
            "rows_changed": counts.get(step.idx, {}),
            "step_reward": reward,
        }
        if rows:
            entry["changes"] = [
                {"table": c.table, "op": c.op, "before": c.before, "after": c.after}
                for c in changes.get(step.idx, [])
            ]
        out.append(entry)
    return {
        "steps": out,
        "step_log": True,
        "reward": verified["reward"],
        "state_credit": verified["reward_components"]["partial_credit"],
    }
