"""How much work step rewards may cost one verify, so the agent does not set verify's price.

The reward is a pure function of the final state and costs what changed; step rewards score
every intermediate state, so their cost grows with what the agent did (300 one-row toggles of a
referenced key are 300 states). They are a training aid, not the reward: past the budget they
are left out, the reward stays exact, and the answer says why (`verification.
step_rewards_skipped`). Two limits are decided before any work, from the log alone, so the same
session always gets the same answer; the time limit is a backstop for a loaded machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


class StepBudgetExceeded(Exception):
    """Step rewards would cost more than the budget; `str(exc)` is the stated reason."""


@dataclass(frozen=True)
class StepBudget:
    """Limits on the step-reward work of one verify (settings `step_reward_*`).

    max_rows: rows the row-image path normalises over all intermediate states;
    max_states: intermediate states the undo path rebuilds (undo + dump each);
    max_ms: wall-clock time spent on step rewards (None: no time limit).
    """

    max_rows: int = 200_000
    max_states: int = 200
    max_ms: float | None = 500.0

    def meter(self) -> Meter:
        return Meter(self)


@dataclass
class Meter:
    """One verify's step-reward spending against its budget; raises StepBudgetExceeded."""

    budget: StepBudget
    started: float = field(default_factory=time.perf_counter)

    def rows(self, n: int) -> None:
        """Refuse, before doing it, work that normalises `n` logged or referencing rows."""
        if n > self.budget.max_rows:
            raise StepBudgetExceeded(
                f"scoring every intermediate state would compare {n} rows; the budget is "
                f"{self.budget.max_rows} (STATEGYM_STEP_REWARD_MAX_ROWS)"
            )

    def states(self, n: int) -> None:
        """Refuse, before doing it, rebuilding `n` intermediate states by undo."""
        if n > self.budget.max_states:
            raise StepBudgetExceeded(
                f"scoring every intermediate state would rebuild {n} states by undo; the "
                f"budget is {self.budget.max_states} (STATEGYM_STEP_REWARD_MAX_STATES)"
            )

    def tick(self) -> None:
        """Stop once the time budget is spent (checked between intermediate states)."""
        limit = self.budget.max_ms
        if limit is None:
            return
        spent = (time.perf_counter() - self.started) * 1000
        if spent > limit:
            raise StepBudgetExceeded(
                f"step rewards took longer than {limit:g} ms (STATEGYM_STEP_REWARD_BUDGET_MS)"
            )


# What a caller without settings gets (a pure verify_state call): no limit at all.
UNLIMITED = StepBudget(max_rows=2**62, max_states=2**62, max_ms=None)
