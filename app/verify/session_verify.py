"""Verify one session: final state vs gold state, expected outputs, reward with components."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from app.core.tasks import TaskSpec
from app.sdk.environment import Environment
from app.storage.steplog import StepLog, step_log
from app.verify.answers import hedged_outputs
from app.verify.checks import checked_tables, compile_checks, run_checks
from app.verify.confirmation import FAILURE_KIND, Conversation, check_conversation
from app.verify.diff import against_gold, diff_states, split_extra_log_records
from app.verify.evidence import Known, cap_evidence
from app.verify.gold import GoldCache
from app.verify.log_reads import ReadOnce
from app.verify.outcomes import of_gold, outcomes
from app.verify.outputs import final_assistant_text, missing_outputs
from app.verify.reward import has_state_work, partial_reward, score, state_credit
from app.verify.state import dump_state
from app.verify.step_budget import UNLIMITED, StepBudget
from app.verify.step_rewards import Settlement, step_fields
from app.verify.step_states import logged_changes, potentials_from_log
from app.verify.submitted import (
    Match,
    read_submission,
    submission_match,
    submitted_at,
    written_outside_tools,
)
from app.verify.tool_calls import with_plain_tool_names
from app.verify.violations import refused_writes


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
    known: Known | None = None,
    policy_penalty: float = 0.0,
) -> dict[str, Any]:
    """Pure function of (final state, task): the reward, its components and the evidence.

    `policy_penalty`: what each refused attempt at a forbidden write costs the reward
    (`Settings.policy_violation_penalty`, app/verify/violations.py).

    `invariant_violations`: the final state's, when the caller evaluated the environment's
    invariants on a byte-identical database (the task generator's no-op, a clone of the seeded
    image its self-check evaluated them on); None: evaluated here.

    With a step log in the database (and `with_steps`), also `step_rewards`, `turn_rewards`
    and the trajectory check (app/verify/step_rewards.py), within `step_budget`: past it they
    are left out and `verification.step_rewards_skipped` says why (app/verify/step_budget.py).

    `known`: filled with the parts of the evidence capped with nothing cut, so that capping
    the result again (what the control database stores) does not walk them again.

    Raises InvalidTask (422) when the task's expected-state checks name unknown tables/columns.
    """
    tables, compare = env.metadata.tables, env.compare
    # Calls made over MCP are named `mcp__<server>__<tool>`; scoring reads plain names.
    response = with_plain_tool_names(response, {t.name for t in env.tools})
    compiled = compile_checks(tables, compare, task.expected_state)
    reference = None if task.checks_only else gold.get(task)
    seed_state = reference.seed_state if reference else gold.seed_state(task)
    steps: dict[str, Any] | None = None
    seed_to_gold = reference.seed_to_gold if reference else None
    gold_units = reference.units if reference else None
    gold_outcomes = of_gold(reference) if reference is not None else None
    checked = checked_tables(task.expected_state)

    def potential(state: Any, checks: Any) -> float:
        """The state part of the reward for `state` (step rewards' potential)."""
        seed_to_state = diff_states(seed_state, state, compare, exact=True)
        return state_credit(
            seed_to_gold=seed_to_gold,
            seed_to_final=seed_to_state,
            checks=checks,
            checked_tables=checked,
            found=(gold_outcomes, None),
        )[0]

    with _read_transaction(engine) as conn:
        final = dump_state(conn, tables, compare)
        violations = (
            _invariant_violations(env, conn)
            if invariant_violations is None
            else list(invariant_violations)
        )
        results = run_checks(conn, compiled, compare, seed_state, final)
        seed_to_final = diff_states(seed_state, final, compare, exact=True)
        # Counted once: the gold's with the gold state, the final state's here.
        final_outcomes = outcomes(seed_to_final)
        # The change units against_gold lists (change_units: log rows are none).
        final_units = final_outcomes.change_units() if reference else None
        found_log = step_log(conn)
        log_ = ReadOnce(found_log) if found_log is not None else None
        counts = log_.change_counts() if log_ is not None else {}
        log_steps = log_.steps() if log_ is not None else []  # read once: step_fields reuses it
        tampered = log_ is not None and written_outside_tools(
            {s.idx: s.tool for s in log_steps}, counts
        )
        answer = final_assistant_text(response)
        match = submission_match(task, read_submission(conn, tables), answer, tampered)
        missing = missing_outputs(task.expected_outputs, answer)
        hedged = hedged_outputs(
            task.expected_outputs, answer, task.data.get("answer_kind"), seed_state
        )
        gold_vs_final = (
            against_gold(
                reference.state,
                final,
                compare,
                reference.seed_to_gold,
                seed_to_final,
                (reference.units, final_units or Counter()),
            )
            if reference
            else None
        )
        refused = refused_writes(env, log_steps)
        talk = check_conversation(
            task.user, conn, tables, log_steps, counts, log_ is not None, bool(seed_to_final)
        )
        # Records of writes the outcome does not hold (a retry's, a corrected mistake's).
        superseded = split_extra_log_records(gold_vs_final) if gold_vs_final else {}
        verdict = score(
            gold_vs_final=gold_vs_final,
            seed_to_gold=reference.seed_to_gold if reference else None,
            seed_to_final=seed_to_final,
            missing=missing,
            has_expected_outputs=bool(task.expected_outputs),
            reward_mode=task.reward_mode or env.reward_mode,
            diff_limit=diff_limit,
            checks=results,
            checked_tables=checked,
            hedged=[h.as_dict() for h in hedged],
            match=match,
            found=(gold_outcomes, final_outcomes),
            superseded=superseded,
            violations=refused,
            penalty=policy_penalty,
        )
        reward = 0.0 if violations or (talk is not None and talk.voids) else verdict.reward
        if with_steps and log_ is not None:
            # No budget (direct callers, tests): every state is scored, however long it takes.
            meter = (step_budget or UNLIMITED).meter()
            final_phi = verdict.credit  # state_credit of the final state, as scored

            # Every intermediate state scored as the final one is (app/verify/step_rewards.py).
            def potential_now() -> float:
                meter.tick()
                state = dump_state(conn, tables, compare)
                return potential(state, run_checks(conn, compiled, compare, seed_state, state))

            def from_log(log: StepLog, logged: list[Any]) -> list[float] | None:
                if compiled:  # checks run SQL on each state: undo and dump instead
                    return None
                meter.rows(logged_changes(log))  # before reading them all
                return potentials_from_log(
                    conn,
                    tables,
                    compare,
                    logged,
                    log.row_images(),
                    final_phi,
                    lambda diff: state_credit(
                        seed_to_gold=seed_to_gold,
                        seed_to_final=diff,
                        checks=(),
                        checked_tables=checked,
                        found=(gold_outcomes, None),
                    )[0],
                    meter,
                )

            settle = Settlement(
                reward=reward,
                shape=reward_potential(
                    task,
                    match,
                    bool(task.expected_outputs),
                    has_state_work(seed_to_gold, gold_units),
                ),
                answered_at=submitted_at(counts),
                charges={v["step"]: policy_penalty for v in refused} if policy_penalty else {},
            )
            steps = step_fields(
                conn,
                response,
                list(tables),
                final_phi,
                potential_now,
                from_log,
                meter,
                seed=potential(seed_state, ()),
                settle=settle,
                read=(log_, log_steps),
            )
    result: dict[str, Any] = {
        "reward": verdict.reward,
        "reward_components": verdict.components,
        # Quotes rows the agent wrote, of the agent's chosen size: capped (app/verify/evidence).
        "verification": cap_evidence(verdict.evidence, known=known),
    }
    if verdict.failure_reason:
        result["failure_reason"] = verdict.failure_reason
    if with_steps and steps is not None:
        trajectory = steps.pop("trajectory")
        skipped = steps.pop("step_rewards_skipped", None)
        result.update(steps)
        result["verification"]["trajectory"] = cap_evidence(trajectory, known=known)
        if skipped is not None:
            result["verification"]["step_rewards_skipped"] = skipped
        if not trajectory["ok"]:
            # The response does not tell what this session did: flagged, never silently scored.
            result["trajectory_mismatch"] = True
    if env.invariants:
        result["reward_components"]["invariants_ok"] = float(not violations)
    if talk is not None:
        _conversation_verdict(result, talk)
    if violations:
        # A broken invariant (money created from nothing, ...) is never a success.
        result["reward"] = 0.0
        result["verification"]["invariant_violations"] = violations[: diff_limit or 20]
        reason = f"invariants violated: {violations[0]}"
        result["failure_reason"] = "; ".join(filter(None, [verdict.failure_reason, reason]))
    if reference is not None and reference.failed_calls:
        # The reference solution itself failed, so the reward means nothing: the trainer masks
        # the sample instead of learning from it (`stategym tasks check` finds such tasks).
        result["verification"]["gold_failed_calls"] = list(reference.failed_calls)
        result["mask_sample"] = True
        result["failure_kind"] = "gold_failed"
        first = reference.failed_calls[0]
        result["failure_reason"] = (
            f"the task's reference solution failed at call {first['index']} ({first['name']}); "
            "fix the task"
        )
    return result


def _conversation_verdict(result: dict[str, Any], talk: Conversation) -> None:
    """The conversation's part of the verify result (app/verify/confirmation.py)."""
    result["verification"]["conversation"] = talk.evidence
    if talk.requires_confirmation:
        result["reward_components"]["confirmed_ok"] = float(not talk.unconfirmed)
    if talk.voids:
        result["reward"] = 0.0
        first = talk.unconfirmed[0]
        reason = (
            f"step {first['step']} ({first['tool']}) changed the data before the user confirmed "
            "that change"
        )
        result["failure_reason"] = "; ".join(filter(None, [result.get("failure_reason"), reason]))
    if talk.failure is not None:
        # The simulator's fault, not the agent's: masked, never scored 0.
        result["mask_sample"] = True
        result["failure_kind"] = FAILURE_KIND
        result["failure_reason"] = f"the user simulator failed ({talk.failure}); sample masked"


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


def _invariant_violations(env: Environment, conn: Connection) -> list[str]:
    """Every invariant's violations; one that cannot even be evaluated (a value an agent wrote
    that its column's type cannot read) is a violation too, never a 500. An ORM Session joins
    the verify's transaction for them (each in a savepoint of its own)."""
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
