"""Step rewards and the trajectory check, from the session's step log (docs/steps.md).

Potential-based: Φ(s) is the reward the session would get if it ended in s (state credit plus
the answer's or decline's share once its step has run: `Settlement.shape`); step k earns
Φ(s_k) − Φ(s_{k−1}), Φ(s_0) the seed state's, so a read-only step earns no state credit, and
the last writing step takes the remainder: `sum(step_rewards) == reward` exactly, strict mode
included. Intermediate states are the session's own, never written.
Each function call of `response.output` is matched in order to the step that ran it (same tool,
same arguments): a call no step matches, a call whose output differs from the session's body,
and a step no call matches are all flagged; unmatched steps still count, their reward going to
the next matched call (or the last one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.storage.steplog import StepLog, StepRow, UndoUnavailable, canonical, digest, step_log
from app.verify.steps.step_budget import Meter, StepBudgetExceeded

log = logging.getLogger("stategym.verify")


@dataclass(frozen=True)
class Settlement:
    """How state potentials become reward potentials, and the reward the steps add up to."""

    # The reward verify answers: the step rewards add up to it exactly.
    reward: float
    # (state potential, answer row written by then) -> the reward potential Φ of that state.
    shape: Callable[[float, bool], float]
    # The step that wrote the answer row (its share is paid there); None: none did.
    answered_at: int | None = None
    # Step -> what it costs besides its potential (a refused attempt at a forbidden write:
    # the deployment's penalty, charged to the call that made it).
    charges: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Call:
    """One function call of `response.output`."""

    position: int  # index in response.output
    call_id: str | None
    name: str
    args: str | None  # canonical JSON of the arguments; None when they are not JSON
    output: str | None  # the matching function_call_output's text, when present
    turn: int  # the assistant turn it belongs to


def function_calls(response: Any) -> list[Call]:
    """The function calls of a Responses object, with their outputs and assistant turns.

    A turn is what one model response produced: it ends where a tool's output is handed back,
    so the next model item (call, message or reasoning) after a `function_call_output` opens the
    next turn.
    """
    items = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(items, list):
        return []
    outputs: dict[str, str] = {}
    for item in items:
        if isinstance(item, Mapping) and item.get("type") == "function_call_output":
            out = item.get("output")
            if isinstance(item.get("call_id"), str):
                outputs[item["call_id"]] = out if isinstance(out, str) else json.dumps(out)
    calls: list[Call] = []
    turn, after_output = 0, False
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call_output":
            after_output = True
            continue
        if after_output:
            turn, after_output = turn + 1, False
        if kind != "function_call" or not isinstance(item.get("name"), str):
            continue
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        calls.append(
            Call(
                position,
                call_id,
                item["name"],
                _canonical_args(item.get("arguments")),
                outputs.get(call_id) if call_id is not None else None,
                turn,
            )
        )
    return calls


def turn_count(response: Any) -> int:
    """How many assistant turns `response.output` holds."""
    items = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(items, list):
        return 0
    turns, after_output, seen = 0, False, False
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "function_call_output":
            after_output = True
            continue
        if after_output or not seen:
            turns, after_output, seen = turns + 1, False, True
    return turns


def _canonical_args(raw: Any) -> str | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return canonical(raw)


@dataclass(frozen=True)
class Alignment:
    step_of: dict[int, int]  # call number (in `calls`) -> step index
    not_executed: list[int]  # call numbers no step matches
    altered: list[int]  # call numbers whose output differs from the step's
    unlisted: list[int]  # step indexes no call matches


def align(calls: Sequence[Call], steps: Sequence[StepRow]) -> Alignment:
    step_of: dict[int, int] = {}
    not_executed, altered = [], []
    used: set[int] = set()
    cursor = 0
    for n, call in enumerate(calls):
        match = None
        for j in range(cursor, len(steps)):
            if steps[j].tool == call.name and steps[j].args == call.args:
                match = j
                break
        if match is None:
            not_executed.append(n)
            continue
        step = steps[match]
        step_of[n], cursor = step.idx, match + 1
        used.add(step.idx)
        if call.output is not None and not _same_output(call.output, step):
            altered.append(n)
    unlisted = [s.idx for s in steps if s.idx not in used]
    return Alignment(step_of, not_executed, altered, unlisted)


def _same_output(text: str, step: StepRow) -> bool:
    """The body the session sent, verbatim, or (below the size cap) the same JSON re-serialised."""
    if text == step.output or digest(text) == step.output_digest:
        return True
    if step.output is None:
        return False
    try:
        return canonical(json.loads(text)) == canonical(json.loads(step.output))
    except ValueError:
        return False


def trajectory_report(calls: Sequence[Call], steps: Sequence[StepRow], a: Alignment) -> dict:
    def described(n: int) -> dict[str, Any]:
        call = calls[n]
        return {"position": call.position, "call_id": call.call_id, "name": call.name}

    return {
        "calls": len(calls),
        "steps": len(steps),
        "ok": not (a.not_executed or a.altered or a.unlisted),
        "not_executed": [described(n) for n in a.not_executed],
        "output_differs": [{**described(n), "step": a.step_of[n]} for n in a.altered],
        "unlisted_steps": [
            {"step": s.idx, "tool": s.tool} for s in steps if s.idx in set(a.unlisted)
        ],
    }


def potentials(
    log_: StepLog,
    steps: Sequence[StepRow],
    tables: Sequence[str],
    changed_steps: set[int],
    final: float,
    potential_now: Callable[[], float],
) -> tuple[float | None, list[float]] | None:
    """(Φ(s_0), [Φ(s_1), ..., Φ(s_n)]) by undoing the log backwards in a savepoint that is
    rolled back; Φ(s_0) is None when the log cannot go back to the seed (a migration since).
    None when the log cannot undo (a table changed shape since)."""
    if not steps:
        return None, []
    if not log_.undo_supported(tables):
        return None
    values: dict[int, float] = {}
    last = steps[-1].idx
    current = final
    seed: float | None = None
    try:
        with log_.scratch():
            for step in reversed(steps):
                values[step.idx] = current
                if step.idx in changed_steps and step.idx > 1:
                    log_.undo_to(step.idx - 1)
                    current = potential_now()
            if steps[0].idx not in changed_steps:
                seed = current
            elif steps[0].idx - 1 >= log_.migrated_at():
                log_.undo_to(steps[0].idx - 1)
                seed = potential_now()
    except UndoUnavailable as exc:  # a read-only copy (offline inspection)
        log.info("no step rewards: the log cannot be undone here (%s)", exc)
        return None
    assert last in values
    return seed, [values[s.idx] for s in steps]


def distribute(
    calls: Sequence[Call],
    steps: Sequence[StepRow],
    a: Alignment,
    phi: Sequence[float],
    turns: int,
    start: float = 0.0,
) -> tuple[list[float], list[float]]:
    """(step_rewards per call, turn_rewards per assistant turn); they sum to Φ(s_n) − `start`
    (Φ(s_0))."""
    rewards = [0.0] * len(calls)
    turn_rewards = [0.0] * max(turns, 1 + max((c.turn for c in calls), default=-1))
    if not steps:
        return rewards, turn_rewards
    phi_of = {s.idx: p for s, p in zip(steps, phi, strict=True)}
    previous = start
    matched = sorted(a.step_of.items(), key=lambda kv: kv[1])
    for n, step in matched:
        rewards[n] = phi_of[step] - previous
        previous = phi_of[step]
    tail = phi_of[steps[-1].idx] - previous
    if tail:
        # Steps after the last matched call (or no call matched at all).
        target = matched[-1][0] if matched else (len(calls) - 1 if calls else None)
        if target is not None:
            rewards[target] += tail
    for n, call in enumerate(calls):
        turn_rewards[call.turn] += rewards[n]
    if not calls and tail:
        # Steps but no call in the response: the state's credit goes to its last turn.
        turn_rewards = turn_rewards or [0.0]
        turn_rewards[-1] += tail
    return rewards, turn_rewards


def step_fields(
    conn: Any,
    response: Any,
    tables: Sequence[str],
    final: float,
    potential_now: Callable[[], float],
    from_log: Callable[[StepLog, list[StepRow]], list[float] | None] | None = None,
    meter: Meter | None = None,
    *,
    seed: float = 0.0,
    settle: Settlement | None = None,
    read: tuple[StepLog, list[StepRow]] | None = None,
) -> dict[str, Any] | None:
    """`step_rewards`, `turn_rewards` and the trajectory check for a session that keeps a step
    log, read in the caller's transaction on `conn` (a SQLAlchemy Connection); None without.
    Past `meter`'s budget the rewards are left out and `step_rewards_skipped` says why.

    `seed` is the seed state's potential where the undo cannot reach it; with `settle` the
    potentials are shaped into reward potentials and the rewards add up to `settle.reward`.
    `read`: the log and its steps when the caller has read them in this transaction."""
    if read is not None:
        log_, steps = read
    else:
        found = step_log(conn)
        if found is None:
            return None
        log_, steps = found, found.steps()
    changed = log_.changed_steps()
    calls = function_calls(response)
    a = align(calls, steps)
    # The row images in the log first (app/verify/steps/step_states.py); undo + dump where they
    # cannot tell (the task has expected-state checks, SQL on each state), or
    # cannot be trusted: those of steps before a migration predate what it changed, and only
    # the undo knows how far back it may go (`migrated_at`).
    fast = from_log is not None and steps and not log_.migrated_at()
    out: dict[str, Any] = {"trajectory": trajectory_report(calls, steps, a)}
    try:
        phi = from_log(log_, steps) if fast and from_log is not None else None
        if phi is None:
            if meter is not None:
                meter.states(len(changed - {steps[-1].idx if steps else 0}))
            undone = potentials(log_, steps, tables, changed, final, potential_now)
            if undone is not None:
                seed, phi = (seed if undone[0] is None else undone[0]), undone[1]
    except StepBudgetExceeded as exc:  # the reward stays exact; the answer says why
        phi, out["step_rewards_skipped"] = None, str(exc)
    if phi is None:
        return out
    if settle is not None:
        answered = settle.answered_at
        phi = [
            settle.shape(p, answered is not None and s.idx >= answered)
            for s, p in zip(steps, phi, strict=True)
        ]
        seed = settle.shape(seed, False)
    rewards, turns = distribute(calls, steps, a, phi, turn_count(response), start=seed)
    if settle is not None and settle.charges:
        for n, step_idx in a.step_of.items():
            cost = settle.charges.get(step_idx, 0.0)
            rewards[n] -= cost
            turns[calls[n].turn] -= cost
    out["step_rewards"] = [round(r, 6) for r in rewards]
    out["turn_rewards"] = [round(r, 6) for r in turns]
    if settle is not None:
        _settle(out["step_rewards"], out["turn_rewards"], calls, a, changed, settle.reward)
    return out


def _settle(
    rewards: list[float],
    turn_rewards: list[float],
    calls: Sequence[Call],
    a: Alignment,
    changed: set[int],
    reward: float,
) -> None:
    """Make both lists add up to `reward` exactly: the remainder (rounding, Φ(s_0), and in
    strict mode the difference between the last potential and the success bit) goes to the
    last call whose step wrote something, else the last call (else the last turn)."""
    writing = [n for n, step in a.step_of.items() if step in changed]
    target = max(writing) if writing else (len(calls) - 1 if calls else None)
    if target is not None:
        rewards[target] = _rest(reward, rewards, target)
        turn = calls[target].turn
    elif turn_rewards:
        turn = len(turn_rewards) - 1
    else:
        return
    turn_rewards[turn] = _rest(reward, turn_rewards, turn)


def _rest(reward: float, values: list[float], at: int) -> float:
    """What `values[at]` must be for the list to add up to `reward`, computed in decimal on the
    printed values: every value is then a short decimal (0.285715, not 0.28571499999999994)
    and their decimal sum is the reward exactly (their float sum to within 1e-15)."""
    others = sum((Decimal(repr(v)) for i, v in enumerate(values) if i != at), Decimal(0))
    return float(Decimal(repr(reward)) - others)
