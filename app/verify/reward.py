"""Turning a comparison into a reward with components and evidence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from app.verify.answers.submitted import Match
from app.verify.state.checks import CheckResult
from app.verify.state.diff import AGAINST_GOLD, StateDiff, change_units, describe, summarize
from app.verify.state.outcomes import Outcomes, outcomes


@dataclass(frozen=True)
class Verdict:
    reward: float
    components: dict[str, float]
    evidence: dict[str, Any]
    failure_reason: str | None
    # The state credit the components round: the final state's step-reward potential.
    credit: float = 0.0


def partial_credit(gold: Outcomes, agent: Outcomes) -> tuple[float, float, int]:
    """(credit, reproduced, collateral), counted in outcomes (app/verify/state/outcomes.py): one per
    requested change however many rows it writes.

    reproduced = the gold units the agent made, each weighing its share of its outcome;
    collateral = the agent's outcomes holding a unit the gold does not make, except units that
    write a row the gold writes too (a wrong value for a requested change is a miss,
    counted once, not also damage) and rows of log tables (a retry's record, a corrected
    mistake's: the outcome is judged by the final state);
    credit = max(0, (reproduced - collateral) / outcomes). With no gold change (a lookup or a
    refusal) it is 1 when the agent changed nothing, else 0.
    """
    shared = gold.units & agent.units
    reproduced = sum(n * gold.weight[u] for u, n in shared.items())
    extra = agent.units - gold.units
    damaged: set[int] = set()
    for u in extra:
        if agent.identity[u] not in gold.touched and u not in agent.logs:
            damaged |= agent.group[u]
    collateral = len(damaged)
    if gold.count == 0:
        return (1.0 if collateral == 0 else 0.0), 0.0, collateral
    return max(0.0, (reproduced - collateral) / gold.count), reproduced, collateral


def _collateral_outside(seed_to_final: StateDiff, checked: AbstractSet[str]) -> int:
    """Checks-only tasks: changes to tables no check talks about are collateral damage (a log
    table's records of writes are none: app/sdk/compare_spec.py `log`)."""
    return sum(d.count for table, d in seed_to_final.items() if table not in checked and not d.log)


Units = Counter[tuple[Any, ...]]


def state_credit(
    *,
    seed_to_gold: StateDiff | None,
    seed_to_final: StateDiff,
    checks: Sequence[CheckResult] = (),
    checked_tables: AbstractSet[str] = frozenset(),
    found: tuple[Outcomes | None, Outcomes | None] = (None, None),
) -> tuple[float, float, float]:
    """(credit, reproduced, collateral): the state part of the reward for a state.

    `seed_to_gold` is None for a checks-only task (no reference solution). Step rewards
    (app/verify/steps/step_rewards.py) score every intermediate state with this same function.
    `found`: `outcomes` of (seed_to_gold, seed_to_final) where the caller has them.
    """
    if seed_to_gold is None:
        outside = _collateral_outside(seed_to_final, checked_tables)
        passed = sum(r.passed for r in checks)
        credit = max(0.0, (passed - outside) / len(checks)) if checks else 0.0
        return credit, 0.0, float(outside)
    gold, agent = found
    credit, reproduced, collateral = partial_credit(
        outcomes(seed_to_gold) if gold is None else gold,
        outcomes(seed_to_final) if agent is None else agent,
    )
    if checks:
        # Both a gold solution and checks: each half of the state share.
        credit = (credit + sum(r.passed for r in checks) / len(checks)) / 2
    return credit, reproduced, collateral


def has_state_work(seed_to_gold: StateDiff | None, units: Units | None = None) -> bool:
    """Whether the task asks for a change of state (checks-only tasks are assumed to);
    `units`: `change_units(seed_to_gold)` where the caller has them."""
    if seed_to_gold is None:
        return True
    return bool(change_units(seed_to_gold) if units is None else units)


def partial_reward(credit: float, shares: Sequence[float], state_work: bool) -> float:
    """Partial mode: the state credit averaged with the answer shares (text outputs, submitted
    answer or decline). On a task whose gold changes nothing (a lookup, a refusal) the state
    credit is paid only with the right answer (credit x answer): doing nothing earns nothing."""
    if not shares:
        return credit
    answer = sum(shares) / len(shares)
    return (credit + answer) / 2 if state_work else credit * answer


# Digits kept in rewards and components: they print cleanly and sum exactly (step rewards).
DIGITS = 6


def _share(part: float, whole: float) -> float:
    return round(part / whole, DIGITS) if whole else 1.0


def score(
    *,
    gold_vs_final: StateDiff | None,
    seed_to_gold: StateDiff | None,
    seed_to_final: StateDiff,
    missing: list[str],
    has_expected_outputs: bool,
    reward_mode: str,
    diff_limit: int,
    checks: Sequence[CheckResult] = (),
    checked_tables: AbstractSet[str] = frozenset(),
    hedged: Sequence[dict[str, Any]] = (),
    match: Match | None = None,
    found: tuple[Outcomes | None, Outcomes | None] = (None, None),
    superseded: dict[str, list[dict[str, Any]]] | None = None,
    violations: Sequence[dict[str, Any]] = (),
    penalty: float = 0.0,
) -> Verdict:
    """`gold_vs_final`/`seed_to_gold` are None for a checks-only task (no reference solution);
    `hedged`: the answer's kinds with rival candidates (app/verify/answers/text.py); `match`: the
    submitted answer's or decline's verdict (app/verify/answers/submitted.py), None when not scored;
    `found`: as `state_credit`'s; `superseded`: log records the final state has and the gold
    does not (diff.split_extra_log_records), evidence only; `violations`: refused attempts at
    forbidden writes (app/verify/state/violations.py), each costing `penalty` of the reward."""
    outputs_match = not missing and not hedged
    shares = [float(outputs_match)] if has_expected_outputs else []
    if match is not None:
        shares.append(float(match.ok))
    if gold_vs_final is None or seed_to_gold is None:
        seed_to_gold = None
    if seed_to_gold is not None and found[0] is None:
        found = (outcomes(seed_to_gold), found[1])
    if found[1] is None:
        found = (found[0], outcomes(seed_to_final))
    state_work = has_state_work(seed_to_gold, found[0].units if found[0] else None)
    credit, reproduced, collateral = state_credit(
        seed_to_gold=seed_to_gold,
        seed_to_final=seed_to_final,
        checks=checks,
        checked_tables=checked_tables,
        found=found,
    )
    state_match = not gold_vs_final and all(r.passed for r in checks)
    if match is not None and match.voids:
        reward = 0.0  # declined a task that needed an action
    elif reward_mode == "partial":
        reward = round(partial_reward(credit, shares, state_work), DIGITS)
    else:
        reward = float(state_match and outputs_match and (match is None or match.ok))
    if violations and penalty:
        reward = round(max(0.0, reward - penalty * len(violations)), DIGITS)
    changes = _changes(seed_to_gold, seed_to_final, checks, found, reproduced, collateral)
    components = {
        "state_match": float(state_match),
        "outputs_match": float(outputs_match),
        "partial_credit": round(credit, DIGITS),
        **changes.components(),
        # 1 when no call tried a write the environment's rules refused.
        "policy_ok": float(not violations),
    }
    evidence: dict[str, Any] = {
        # Rows as "expected (gold) -> actual (final)": `added` rows exist only in the final
        # state (unexpected), `removed` rows only in the gold state (missing).
        "state_diff": summarize(gold_vs_final or {}, diff_limit),
        "agent_changes": {t: d.summary(0) for t, d in seed_to_final.items()},
        "changes": changes.evidence(),
        "missing_outputs": missing,
        **_listed_evidence(superseded, violations, hedged, diff_limit),
    }
    if match is not None:
        components[match.component] = float(match.ok)
        evidence[match.evidence_key] = match.evidence
    if checks:
        components["checks_passed"] = round(_checks_share(checks), DIGITS)
        evidence["checks"] = [r.as_dict() for r in checks]
    reasons = _reasons(gold_vs_final, checks, missing, hedged, match, violations)
    return Verdict(reward, components, evidence, "; ".join(reasons) or None, credit)


def _checks_share(checks: Sequence[CheckResult]) -> float:
    return sum(r.passed for r in checks) / len(checks) if checks else 1.0


@dataclass(frozen=True)
class _Changes:
    """The change counts behind the recall and precision components (`verification.changes`).
    Every component is a score in [0, 1], 1 = good, so their means are meaningful."""

    requested: int
    reproduced: float
    collateral: float
    made: int
    recall: float

    def components(self) -> dict[str, float]:
        return {
            # Share of the requested changes the agent made (1 when none was requested).
            "change_recall": self.recall,
            # Share of the agent's changes that were requested (1 when it changed nothing).
            "change_precision": _share(max(self.made - self.collateral, 0), self.made),
        }

    def evidence(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "reproduced": self.reproduced,
            "collateral": round(self.collateral, DIGITS),
            "made": self.made,
        }


def _changes(
    seed_to_gold: StateDiff | None,
    seed_to_final: StateDiff,
    checks: Sequence[CheckResult],
    found: tuple[Outcomes | None, Outcomes | None],
    reproduced: float,
    collateral: float,
) -> _Changes:
    if seed_to_gold is None:  # checks-only: the checks are what was asked
        made = sum(d.count for d in seed_to_final.values() if not d.log)
        passed = sum(r.passed for r in checks)
        return _Changes(len(checks), passed, collateral, made, _checks_share(checks))
    gold, agent = found
    requested = gold.count if gold else 0
    made = agent.count if agent else 0
    recall = _share(reproduced, requested)
    return _Changes(requested, round(reproduced, DIGITS), collateral, made, recall)


def _listed_evidence(
    superseded: dict[str, list[dict[str, Any]]] | None,
    violations: Sequence[dict[str, Any]],
    hedged: Sequence[dict[str, Any]],
    diff_limit: int,
) -> dict[str, Any]:
    """The evidence keys present only when there is something to list."""
    listed: dict[str, Any] = {}
    if superseded:
        listed["extra_log_records"] = {
            t: {"count": len(rows), "rows": rows[:diff_limit] if diff_limit else []}
            for t, rows in superseded.items()
        }
    if violations:
        listed["policy_violations"] = list(violations)
    if hedged:
        listed["hedged_outputs"] = list(hedged)
    return listed


def _reasons(
    gold_vs_final: StateDiff | None,
    checks: Sequence[CheckResult],
    missing: list[str],
    hedged: Sequence[dict[str, Any]],
    match: Match | None,
    violations: Sequence[dict[str, Any]],
) -> list[str]:
    """Why the reward is not 1, one phrase per cause, in a fixed order."""
    reasons = []
    if gold_vs_final:
        reasons.append(f"final state differs from gold ({describe(gold_vs_final, AGAINST_GOLD)})")
    failed = [r.index for r in checks if not r.passed]
    if failed:
        reasons.append(f"expected-state checks failed: {failed}")
    if missing:
        reasons.append(f"final answer lacks {missing}")
    if hedged:
        rivals = [f"{h['kind']}: {h['also_named'][:5]}" for h in hedged]
        reasons.append(f"final answer also names other candidates ({'; '.join(rivals)})")
    if match is not None and match.reason:
        reasons.append(match.reason)
    if violations:
        first = violations[0]
        reasons.append(
            f"{len(violations)} refused attempt(s) at a forbidden write "
            f"(first: {first['tool']} at step {first['step']}, {first['code']})"
        )
    return reasons
