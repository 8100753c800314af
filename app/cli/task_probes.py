"""The submissions `tasks check` tries on every task besides the gold: each must earn reward 0.

- answer tasks: the gold's calls with the answer replaced by a hedge (the expected value plus a
  rival, as a list and as "A or B");
- every task that is not a refusal: the gold's calls without their submission, then a decline;
- refusal tasks: the gold's calls, the decline naming another code;
- conversational tasks whose user requires confirmation: the gold's calls without its messages
  to the user (acting without asking).
A decline is scored only as "the expected code or not", so by default each task tries ONE code,
picked by its id so a file spreads over every code (`all_codes`, `--all-codes`: each on each).
Each runs through the same runner as a session's calls, on a fresh clone of the task's snapshot,
and is verified as a rollout is. A failure is one readable line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.core.tasks import TaskSpec, ToolCall
from app.sdk.answer import DECLINE_REQUEST, RESERVED_TOOL_NAMES, SUBMIT_ANSWER
from app.sdk.environment import Environment
from app.sdk.user import MESSAGE_USER
from app.verify.answers.hedges import hedges
from app.verify.gold import GoldCache, replay
from app.verify.session_verify import verify_state

if TYPE_CHECKING:
    from app.storage.images import Store  # the caller's (app/cli/tasks.py)


@dataclasses.dataclass(frozen=True)
class Probe:
    label: str  # what was tried, as the failure line says it
    calls: tuple[ToolCall, ...]


def _codes(codes: list[str], task: TaskSpec, all_codes: bool) -> list[str]:
    if all_codes or not codes:
        return codes
    spread = int(hashlib.sha256((task.task_id or "").encode()).hexdigest()[:8], 16)
    return [codes[spread % len(codes)]]


def _acts(env: Environment, calls: tuple[ToolCall, ...]) -> bool:
    """Whether any of `calls` writes the environment's data (a tool not read-only)."""
    tools = [env.tool_named(c.name) for c in calls]
    return any(t is None or not (t.read_only or t.framework) for t in tools)


def probes(env: Environment, task: TaskSpec, all_codes: bool = False) -> Iterator[Probe]:
    """The adversarial submissions for `task` (none for a task with no reference solution)."""
    gold = task.ground_truth
    if not gold:
        return
    plain = tuple(c for c in gold if c.name not in RESERVED_TOOL_NAMES)
    # Acting without asking: only where the gold acts (a gold that declines writes nothing).
    # sql's run_sql is no read-only tool, so a gold that queries and declines also "acts" here.
    acts = task.expected_decline is None and _acts(env, plain)
    if task.user is not None and task.user.requires_confirmation and acts:
        silent = tuple(c for c in gold if c.name != MESSAGE_USER)
        if len(silent) < len(gold):
            yield Probe("the gold's calls without asking the user", silent)
    expected = task.expected_answer
    if expected is not None and task.answer_via == "tool":
        for hedge in hedges(expected.kind, expected.value):
            call = ToolCall(SUBMIT_ANSWER, {"answer": hedge})
            yield Probe(f"a hedged answer {json.dumps(hedge)}", (*plain, call))
    if task.expected_decline is None:
        for code in _codes(list(env.decline_codes), task, all_codes):
            call = ToolCall(DECLINE_REQUEST, {"reason": code, "message": "I cannot do that."})
            yield Probe(f"declining ({code}) after the gold's calls", (*plain, call))
        return
    wrong = [code for code in env.decline_codes if code != task.expected_decline]
    for code in _codes(wrong, task, all_codes):
        call = ToolCall(DECLINE_REQUEST, {"reason": code, "message": "I cannot do that."})
        yield Probe(f"declining with the wrong code {code}", (*plain, call))


def probe_problems(
    env: Environment,
    store: Store,
    gold: GoldCache,
    task: TaskSpec,
    response: Any,
    all_codes: bool = False,
) -> tuple[int, list[str]]:
    """(probes tried, one line per probe that earned more than 0)."""
    snapshot = store.snapshot(task)
    problems, tried = [], 0
    for probe in probes(env, task, all_codes):
        tried += 1
        conn, engine, failed = replay(
            env, snapshot, dataclasses.replace(task, ground_truth=probe.calls), session_id="probe"
        )
        try:
            result = verify_state(
                env=env, gold=gold, engine=engine, task=task, response=response, diff_limit=0
            )
        finally:
            engine.dispose()
            conn.close()
        if failed and probe.calls[-1].name in RESERVED_TOOL_NAMES:
            last = failed[-1]
            if last["index"] == len(probe.calls) - 1:
                problems.append(f"{probe.label} was refused by the tool: {last['error']}")
                continue
        if result["reward"] != 0.0:
            problems.append(f"{probe.label} earns reward {result['reward']:g}")
    return tried, problems
