"""Reverify by replay: score a finished rollout without its session.

Tools are deterministic under the session's frozen clock, so the state a rollout left is the
state its function calls produce on a fresh copy of the task's snapshot. `replay_result` runs the
calls of `response.output` (plain tool names, arguments as sent) through the same runner, with
the step log on, on an in-memory clone of the snapshot, then verifies that clone exactly as a
live session is verified. A call whose replayed output differs from the `function_call_output`
in the response is flagged by the trajectory check (`verification.trajectory.output_differs`):
the environment is not deterministic, or the response was edited.

Used by `/verify` for a session that is closed or gone (retention deleted it), by a cookieless
`/verify` (NeMo Gym's stateless `gym eval reverify`), and by `stategym reverify ROLLOUTS.jsonl`.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.tasks import TaskSpec
from app.sdk.environment import Environment, ToolContext
from app.storage import images
from app.storage.runner import StepRecorder, run_tool
from app.verify.gold import GoldCache, WorkBudget
from app.verify.result import VerifyResult
from app.verify.session_verify import verify_result
from app.verify.steps.step_budget import StepBudget
from app.verify.steps.step_rewards import function_calls
from app.verify.steps.tool_calls import with_plain_tool_names

# A response holding more calls than this is refused rather than replayed (a verify is cheap to
# ask for; a replay of a million calls is not). The server's own limit is `replay_max_calls`.
MAX_REPLAYED_CALLS = 2_000
REPLAY_REFUSED = "replay_refused"
REPLAY_BUDGET = "replay_budget"
REPLAY_SESSION_ID = "replay"


def replayed_calls(env: Environment, response: Any) -> list[tuple[str, Any]]:
    """(tool, arguments) of each call the server would have executed, in order: calls whose
    arguments are not JSON never reached it, nor did calls of tools it does not have (404)."""
    plain = with_plain_tool_names(response, {t.name for t in env.tools})
    calls = []
    for call in function_calls(plain):
        if call.args is None or env.tool_named(call.name) is None:
            continue
        calls.append((call.name, json.loads(call.args)))
    return calls


def replay_result(
    *,
    env: Environment,
    snapshot: Any,
    gold: GoldCache,
    task: TaskSpec,
    response: Any,
    diff_limit: int,
    time_limit_ms: int | None = None,
    session_id: str = REPLAY_SESSION_ID,
    step_budget: StepBudget | None = None,
    max_calls: int = MAX_REPLAYED_CALLS,
    budget: WorkBudget | None = None,
    policy_penalty: float = 0.0,
) -> VerifyResult:
    """Verify's answer for `response` replayed on a fresh clone of `snapshot` (the task's).
    More than `max_calls` calls, or calls that run past `budget` (wall-clock or CPU; each
    call is cut at what is left of it), answer a masked sample saying why: never a reward."""
    calls = replayed_calls(env, response)
    if len(calls) > max_calls:
        reason = f"{len(calls)} calls to replay; the limit is {max_calls}"
        return _masked(REPLAY_REFUSED, reason, 0)
    meter = budget.start() if budget is not None else None
    conn = images.memory_from_image(snapshot.image)
    bind = images.bind_connection(conn)
    try:
        ctx = ToolContext(now=snapshot.now, session_id=session_id, task_id=None)
        for done, (name, args) in enumerate(calls, 1):
            tool = env.tool_named(name)
            assert tool is not None
            step = StepRecorder(name, args)
            limit = meter.call_limit_ms(time_limit_ms) if meter is not None else time_limit_ms
            output = run_tool(bind, tool, args, ctx, limit, step.on_success)
            if "error" in output:
                step.record_failure(conn, output)
            spent = meter.over() if meter is not None else None
            if spent is not None:
                reason = f"the replay took {spent} after {done} of {len(calls)} calls"
                return _masked(REPLAY_BUDGET, reason, done)
        result = verify_result(
            env=env,
            gold=gold,
            engine=bind,  # type: ignore[arg-type]  # a Session binds either
            task=task,
            response=response,
            diff_limit=diff_limit,
            step_budget=step_budget,
            policy_penalty=policy_penalty,
        )
    finally:
        bind.close()
        conn.close()
    result.verified_by, result.replayed_calls = "replay", len(calls)
    return result


def _masked(kind: str, reason: str, replayed: int) -> VerifyResult:
    """A replay that was not finished: a masked sample, so training drops it."""
    result = VerifyResult.masked(kind, reason)
    result.verified_by, result.replayed_calls = "replay", replayed
    return result
