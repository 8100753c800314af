"""A session's timeline: each step's call, outcome, output, row changes and step reward.

Read on the read-only view's `scratch` connection (never the live state): the step rewards may
undo the log in a savepoint, which needs a writable database (SQLite: an in-memory copy of the
file; PostgreSQL: a transaction on the session's schema that is rolled back). Shared by
`stategym sessions steps` and the explorer's rollout page (app/explorer/), both backends.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection

from app.core.tasks import TaskSpec
from app.runtime.inspection import jsonable
from app.sdk.environment import Environment
from app.storage.steplog import RowChange, StepRow, step_log
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


def _plain(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A logged row as JSON values (PostgreSQL's log reads datetimes and decimals back typed;
    SQLite's gives the stored values as they are)."""
    return None if row is None else {k: jsonable(v) for k, v in row.items()}


def step_entries(
    steps: list[StepRow],
    rewards: list[Any],
    counts: dict[int, dict[str, int]],
    changes: dict[int, list[RowChange]] | None,
) -> list[dict[str, Any]]:
    """Each step as the timeline shows it, with its row changes unless `changes` is None."""
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
        if changes is not None:
            entry["changes"] = [
                {"table": c.table, "op": c.op, "before": _plain(c.before), "after": _plain(c.after)}
                for c in changes.get(step.idx, [])
            ]
        out.append(entry)
    return out


def timeline(
    env: Environment, gold: GoldCache, task: TaskSpec, conn: Connection, *, rows: bool = True
) -> dict[str, Any]:
    """The steps of the session `conn` is on (a view's `scratch`), its reward and its state
    credit Φ(s_n)."""
    log = step_log(conn)
    if log is None:
        return {"steps": [], "step_log": False}
    steps = log.steps()
    counts = log.change_counts()
    changes = log.changes() if rows else {}
    verified = verify_state(
        env=env,
        gold=gold,
        engine=conn,  # type: ignore[arg-type]  # a Session binds either
        task=task,
        response=response_of_steps(steps),
        diff_limit=0,
    )
    rewards = verified.get("step_rewards") or [None] * len(steps)
    out = step_entries(steps, rewards, counts, changes if rows else None)
    return {
        "steps": out,
        "step_log": True,
        "reward": verified["reward"],
        "state_credit": verified["reward_components"]["partial_credit"],
    }
