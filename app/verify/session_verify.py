"""Verify one session: final state vs gold state, expected outputs, reward with components.

`verify_result` is a pipeline of named steps, each a function of typed values: the final dump,
invariants, checks and diffs, the step log and its tamper check, the answer match, the
conversation, scoring, step potentials, masks. `verify_state` is its JSON payload.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.orm import Session

from app.core.tasks import TaskSpec
from app.sdk.compare_spec import CompareSpec
from app.sdk.environment import Environment
from app.storage.steplog import StepLog, StepRow, step_log
from app.verify.answers.confirmation import FAILURE_KIND, Conversation, check_conversation
from app.verify.answers.outputs import final_assistant_text, missing_outputs
from app.verify.answers.submitted import (
    Match,
    read_submission,
    submission_match,
    submitted_at,
    written_outside_tools,
)
from app.verify.answers.text import hedged_outputs
from app.verify.gold import GoldCache, GoldState
from app.verify.result import Evidence, VerifyResult
from app.verify.reward import Verdict, has_state_work, partial_reward, score, state_credit
from app.verify.state.checks import (
    CheckResult,
    CompiledCheck,
    checked_tables,
    compile_checks,
    run_checks,
)
from app.verify.state.diff import StateDiff, against_gold, diff_states, split_extra_log_records
from app.verify.state.dump import DbState, dump_state
from app.verify.state.outcomes import Outcomes, of_gold, outcomes
from app.verify.state.violations import refused_writes
from app.verify.steps.log_reads import ReadOnce
from app.verify.steps.step_budget import UNLIMITED, Meter, StepBudget
from app.verify.steps.step_rewards import Settlement, step_fields
from app.verify.steps.step_states import logged_changes, potentials_from_log
from app.verify.steps.tool_calls import with_plain_tool_names


def verify_state(
    *,
    env: Environment,
    gold: GoldCache,
    engine: Engine,
    task: TaskSpec,
    response: Any,
    diff_limit: int,
    with_steps: bool = True,
    step_budget: StepBudget | None = None,
    invariant_violations: list[str] | None = None,
    policy_penalty: float = 0.0,
) -> dict[str, Any]:
    """`verify_result` as the JSON object /verify answers (for callers that only read it)."""
    return verify_result(
        env=env,
        gold=gold,
        engine=engine,
        task=task,
        response=response,
        diff_limit=diff_limit,
        with_steps=with_steps,
        step_budget=step_budget,
        invariant_violations=invariant_violations,
        policy_penalty=policy_penalty,
    ).to_payload()


def verify_result(
    *,
    env: Environment,
    gold: GoldCache,
    engine: Engine,
    task: TaskSpec,
    response: Any,
    diff_limit: int,
    with_steps: bool = True,
    step_budget: StepBudget | None = None,
    invariant_violations: list[str] | None = None,
    policy_penalty: float = 0.0,
) -> VerifyResult:
    """Pure function of (final state, task): the reward, its components and the evidence.

    `policy_penalty`: what each refused attempt at a forbidden write costs the reward
    (`Settings.policy_violation_penalty`, app/verify/state/violations.py).

    `invariant_violations`: the final state's, when the caller evaluated the environment's
    invariants on a byte-identical database (the task generator's no-op, a clone of the seeded
    image its self-check evaluated them on); None: evaluated here.

    With a step log in the database (and `with_steps`), also `step_rewards`, `turn_rewards`
    and the trajectory check (app/verify/steps/step_rewards.py), within `step_budget`: past it they
    are left out and `verification.step_rewards_skipped` says why (app/verify/steps/step_budget.py).

    Raises InvalidTask (422) when the task's expected-state checks name unknown tables/columns.
    """
    # Calls made over MCP are named `mcp__<server>__<tool>`; scoring reads plain names.
    response = with_plain_tool_names(response, {t.name for t in env.tools})
    basis = _basis(env, gold, task)
    with _read_transaction(engine) as conn:
        final = dump_state(conn, basis.tables, basis.compare)
        violations = _invariants(env, conn, invariant_violations)
        compared = _compare(conn, basis, final)
        log = _step_log(conn)
        answer = _answer(conn, basis, response, log.tampered)
        refused = refused_writes(env, log.steps)
        wrote = bool(compared.seed_to_final)
        talk = check_conversation(
            task.user, conn, basis.tables, log.steps, log.counts, log.read is not None, wrote
        )
        verdict = _score(basis, compared, answer, refused, diff_limit, policy_penalty)
        result = _scored(verdict)
        if with_steps and log.read is not None:
            voided = bool(violations) or (talk is not None and talk.voids)
            settle = _settlement(basis, log, answer, refused, policy_penalty, voided, verdict)
            steps = _step_potentials(conn, basis, log, response, verdict, settle, step_budget)
            _add_steps(result, steps)
    if env.invariants:
        _components(result)["invariants_ok"] = float(not violations)
    if talk is not None:
        _conversation_verdict(result, talk)
    if violations:
        _invariant_verdict(result, violations, verdict.failure_reason, diff_limit)
    if basis.reference is not None and basis.reference.failed_calls:
        _gold_failed(result, basis.reference)
    return result


@dataclass(frozen=True)
class _Basis:
    """What every state of one verify is scored against: the task's checks and its gold."""

    env: Environment
    task: TaskSpec
    compiled: list[CompiledCheck]
    reference: GoldState | None  # None: a checks-only task
    seed_state: DbState
    checked: set[str]
    gold_outcomes: Outcomes | None

    @property
    def tables(self) -> Mapping[str, Table]:
        return self.env.metadata.tables

    @property
    def compare(self) -> CompareSpec:
        return self.env.compare

    def credit(self, seed_to_state: StateDiff, checks: Any = ()) -> float:
        """The state part of the reward of a state the seed changed by `seed_to_state`."""
        return state_credit(
            seed_to_gold=self.reference.seed_to_gold if self.reference else None,
            seed_to_final=seed_to_state,
            checks=checks,
            checked_tables=self.checked,
            found=(self.gold_outcomes, None),
        )[0]

    def potential(self, state: DbState, checks: Any) -> float:
        """The state part of the reward for `state` (step rewards' potential)."""
        return self.credit(diff_states(self.seed_state, state, self.compare, exact=True), checks)


def _basis(env: Environment, gold: GoldCache, task: TaskSpec) -> _Basis:
    compiled = compile_checks(env.metadata.tables, env.compare, task.expected_state)
    reference = None if task.checks_only else gold.get(task)
    return _Basis(
        env=env,
        task=task,
        compiled=compiled,
        reference=reference,
        seed_state=reference.seed_state if reference else gold.seed_state(task),
        checked=checked_tables(task.expected_state),
        gold_outcomes=of_gold(reference) if reference is not None else None,
    )


@dataclass(frozen=True)
class _Compared:
    """The final state against the task's checks, the seed and the gold."""

    checks: list[CheckResult]
    seed_to_final: StateDiff
    outcomes: Outcomes
    gold_vs_final: StateDiff | None


def _compare(conn: Connection, basis: _Basis, final: DbState) -> _Compared:
    results = run_checks(conn, basis.compiled, basis.compare, basis.seed_state, final)
    seed_to_final = diff_states(basis.seed_state, final, basis.compare, exact=True)
    # Counted once: the gold's with the gold state, the final state's here.
    final_outcomes = outcomes(seed_to_final)
    ref, gold_vs_final = basis.reference, None
    if ref is not None:
        # The change units against_gold lists (change_units: log rows are none).
        units = final_outcomes.change_units() or Counter()
        gold_vs_final = against_gold(
            ref.state, final, basis.compare, ref.seed_to_gold, seed_to_final, (ref.units, units)
        )
    return _Compared(list(results), seed_to_final, final_outcomes, gold_vs_final)


@dataclass(frozen=True)
class _Log:
    """The session's step log, read once (None: the database keeps none)."""

    read: ReadOnce | None
    counts: dict[int, dict[str, int]]
    steps: list[StepRow]
    # Rows written outside any tool call: a submitted answer then counts for nothing.
    tampered: bool


def _step_log(conn: Connection) -> _Log:
    found = step_log(conn)
    if found is None:
        return _Log(None, {}, [], False)
    read = ReadOnce(found)
    counts = read.change_counts()
    steps = read.steps()  # read once: step_fields reuses it
    tampered = written_outside_tools({s.idx: s.tool for s in steps}, counts)
    return _Log(read, counts, steps, bool(tampered))


@dataclass(frozen=True)
class _Answer:
    """The agent's answer: the submitted one's match, the text outputs missing and hedged."""

    match: Match | None
    missing: list[str]
    hedged: list[dict[str, Any]]


def _answer(conn: Connection, basis: _Basis, response: Any, tampered: bool) -> _Answer:
    task, text = basis.task, final_assistant_text(response)
    match = submission_match(task, read_submission(conn, basis.tables), text, tampered)
    missing = missing_outputs(task.expected_outputs, text)
    kind = task.data.get("answer_kind")
    hedged = hedged_outputs(task.expected_outputs, text, kind, basis.seed_state)
    return _Answer(match, missing, [h.as_dict() for h in hedged])


def _score(
    basis: _Basis,
    compared: _Compared,
    answer: _Answer,
    refused: list[dict[str, Any]],
    diff_limit: int,
    penalty: float,
) -> Verdict:
    task, ref, gold_vs_final = basis.task, basis.reference, compared.gold_vs_final
    # Records of writes the outcome does not hold (a retry's, a corrected mistake's).
    superseded = split_extra_log_records(gold_vs_final) if gold_vs_final else {}
    return score(
        gold_vs_final=gold_vs_final,
        seed_to_gold=ref.seed_to_gold if ref else None,
        seed_to_final=compared.seed_to_final,
        missing=answer.missing,
        has_expected_outputs=bool(task.expected_outputs),
        reward_mode=task.reward_mode or basis.env.reward_mode,
        diff_limit=diff_limit,
        checks=compared.checks,
        checked_tables=basis.checked,
        hedged=answer.hedged,
        match=answer.match,
        found=(basis.gold_outcomes, compared.outcomes),
        superseded=superseded,
        violations=refused,
        penalty=penalty,
    )


def _scored(verdict: Verdict) -> VerifyResult:
    """The result as scoring leaves it, before steps, conversation and masks."""
    result = VerifyResult(reward=verdict.reward, components=verdict.components)
    # Quotes rows the agent wrote, of the agent's chosen size: capped (app/verify/evidence).
    result.evidence = Evidence(result.cap(verdict.evidence))
    if verdict.failure_reason:
        result.set_reason(verdict.failure_reason, "scored")
    return result


def _settlement(
    basis: _Basis,
    log: _Log,
    answer: _Answer,
    refused: list[dict[str, Any]],
    penalty: float,
    voided: bool,
    verdict: Verdict,
) -> Settlement:
    """What the step rewards add up to, and how each state's potential is shaped."""
    task, ref = basis.task, basis.reference
    state_work = has_state_work(ref.seed_to_gold if ref else None, ref.units if ref else None)
    return Settlement(
        reward=0.0 if voided else verdict.reward,
        shape=reward_potential(task, answer.match, bool(task.expected_outputs), state_work),
        answered_at=submitted_at(log.counts),
        charges={v["step"]: penalty for v in refused} if penalty else {},
    )


def _step_potentials(
    conn: Connection,
    basis: _Basis,
    log: _Log,
    response: Any,
    verdict: Verdict,
    settle: Settlement,
    step_budget: StepBudget | None,
) -> dict[str, Any] | None:
    """`step_fields`: every intermediate state scored as the final one is, within the budget
    (none for direct callers and tests: every state is scored, however long it takes)."""
    assert log.read is not None
    meter = (step_budget or UNLIMITED).meter()
    final_phi = verdict.credit  # state_credit of the final state, as scored
    return step_fields(
        conn,
        response,
        list(basis.tables),
        final_phi,
        partial(_potential_now, conn, basis, meter),
        partial(_potentials_from_log, conn, basis, meter, final_phi),
        meter,
        seed=basis.potential(basis.seed_state, ()),
        settle=settle,
        read=(log.read, log.steps),
    )


def _potential_now(conn: Connection, basis: _Basis, meter: Meter) -> float:
    """The potential of the database as it is now (a state the undo went back to)."""
    meter.tick()
    state = dump_state(conn, basis.tables, basis.compare)
    checks = run_checks(conn, basis.compiled, basis.compare, basis.seed_state, state)
    return basis.potential(state, checks)


def _potentials_from_log(
    conn: Connection,
    basis: _Basis,
    meter: Meter,
    final_phi: float,
    log: StepLog,
    logged: list[StepRow],
) -> list[float] | None:
    """Every step's potential from the row images in the log; None where checks must run SQL
    on each state (undo and dump instead)."""
    if basis.compiled:
        return None
    meter.rows(logged_changes(log))  # before reading them all
    images = log.row_images()
    return potentials_from_log(
        conn, basis.tables, basis.compare, logged, images, final_phi, basis.credit, meter
    )


def _add_steps(result: VerifyResult, steps: dict[str, Any] | None) -> None:
    """The step fields, and the trajectory check under the evidence."""
    if steps is None:
        return
    evidence = _evidence(result)
    trajectory = steps["trajectory"]
    evidence.trajectory = result.cap(trajectory)
    evidence.step_rewards_skipped = steps.get("step_rewards_skipped")
    result.step_rewards = steps.get("step_rewards")
    result.turn_rewards = steps.get("turn_rewards")
    if not trajectory["ok"]:
        # The response does not tell what this session did: flagged, never silently scored.
        result.trajectory_mismatch = True


def _conversation_verdict(result: VerifyResult, talk: Conversation) -> None:
    """The conversation's part of the verify result (app/verify/answers/confirmation.py)."""
    _evidence(result).conversation = talk.evidence
    if talk.requires_confirmation:
        _components(result)["confirmed_ok"] = float(not talk.unconfirmed)
    if talk.voids:
        result.reward = 0.0
        first = talk.unconfirmed[0]
        reason = (
            f"step {first['step']} ({first['tool']}) changed the data before the user confirmed "
            "that change"
        )
        result.add_reason(reason, "verify")
    if talk.failure is not None:
        # The simulator's fault, not the agent's: masked, never scored 0.
        reason = f"the user simulator failed ({talk.failure}); sample masked"
        result.mask(FAILURE_KIND, reason, "verify")


def _invariant_verdict(
    result: VerifyResult, violations: list[str], scored_reason: str | None, diff_limit: int
) -> None:
    """A broken invariant (money created from nothing, ...) is never a success."""
    result.reward = 0.0
    _evidence(result).invariant_violations = violations[: diff_limit or 20]
    reason = f"invariants violated: {violations[0]}"
    result.set_reason("; ".join(filter(None, [scored_reason, reason])), "verify")


def _gold_failed(result: VerifyResult, reference: GoldState) -> None:
    """The reference solution itself failed, so the reward means nothing: the trainer masks
    the sample instead of learning from it (`stategym tasks check` finds such tasks)."""
    _evidence(result).gold_failed_calls = list(reference.failed_calls)
    first = reference.failed_calls[0]
    reason = (
        f"the task's reference solution failed at call {first['index']} ({first['name']}); "
        "fix the task"
    )
    result.mask("gold_failed", reason, "verify")


def _evidence(result: VerifyResult) -> Evidence:
    assert result.evidence is not None  # a scored result always has evidence
    return result.evidence


def _components(result: VerifyResult) -> dict[str, float]:
    assert result.components is not None  # a scored result always has components
    return result.components


def reward_potential(
    task: TaskSpec, match: Match | None, text_outputs: bool, state_work: bool
) -> Any:
    """(state credit, answer row written) -> the reward potential of a state: the partial
    reward the session would get if it ended there. The submitted answer's share counts from
    the step that wrote it; a text answer (legacy outputs, `answer_via: "text"`) is read from
    the final message only, so its share is settled at the last step."""
    via_text = task.expected_answer is not None and task.answer_via == "text"

    def shape(credit: float, answered: bool) -> float:
        if match is not None and match.voids:
            # A decline on a task that needed an action: no share, the reward is 0 from then.
            return (
                0.0
                if answered
                else partial_reward(credit, [0.0] if text_outputs else [], state_work)
            )
        shares = [0.0] if text_outputs else []
        if match is not None:
            shares.append(float(match.ok and answered and not via_text))
        return partial_reward(credit, shares, state_work)

    return shape


@contextmanager
def _read_transaction(bind: Engine | Connection) -> Iterator[Connection]:
    """One transaction on `bind` for every read of the verify: BEGIN ... COMMIT, as an ORM
    Session bound to it would run, without the ORM (only invariants are ORM queries). A
    Connection already in a transaction is read in it, and left to its owner."""
    if isinstance(bind, Engine):
        with bind.connect() as conn, conn.begin():
            yield conn
    elif bind.in_transaction():
        yield bind
    else:
        with bind.begin():
            yield bind


def _invariants(env: Environment, conn: Connection, given: list[str] | None) -> list[str]:
    """Every invariant's violations; one that cannot even be evaluated (a value an agent wrote
    that its column's type cannot read) is a violation too, never a 500. An ORM Session joins
    the verify's transaction for them (each in a savepoint of its own). `given`: evaluated
    already by the caller."""
    if given is not None:
        return list(given)
    violations: list[str] = []
    if not env.invariants:
        return violations
    with Session(bind=conn) as db:
        for check in env.invariants:
            try:
                with db.begin_nested():
                    violations.extend(check(db))
            except Exception as exc:  # noqa: BLE001 - any failure means the state is not sound
                name = getattr(check, "__name__", "invariant")
                violations.append(
                    f"{name} could not be evaluated: {type(exc).__name__}: {exc}"[:300]
                )
    return violations
