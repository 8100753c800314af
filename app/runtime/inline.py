"""Which tool calls run on the event loop itself instead of hopping to a tool thread.

Tool calls are CPU-bound Python under one GIL: a thread buys no parallelism and costs the hop,
but it keeps one slow call from stalling the worker. So a tool runs inline only once proven
fast (`promote_after` consecutive calls in a thread under `budget_ms`, and a running average
under it), and goes back to threads when its recent average rises over the budget, or at once
after one call over `spike` times the budget (an average decides, so one garbage-collection
pass does not). A call waiting for another process's write lock never waits on the loop: it is
retried in a thread (SessionManager). Why: docs/performance.md.
"""

from __future__ import annotations

from dataclasses import dataclass

# Weight of the newest call in the running average: a tool that turns slow is sent back to
# threads after two or three calls, one outlier among fast calls is not enough.
_WEIGHT = 0.25


@dataclass
class _ToolRecord:
    average: float = 0.0  # seconds, over recent calls wherever they ran
    calls: int = 0
    fast_streak: int = 0  # consecutive calls in a thread under the budget
    inline: bool = False
    demotions: int = 0


class InlinePolicy:
    def __init__(self, budget_ms: float, promote_after: int = 8, spike: float = 10.0):
        self.budget = budget_ms / 1000
        self.promote_after = promote_after
        self.spike = spike
        self._tools: dict[str, _ToolRecord] = {}

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    def allows(self, tool_name: str) -> bool:
        record = self._tools.get(tool_name)
        return self.enabled and record is not None and record.inline

    def record(self, tool_name: str, seconds: float, *, inline: bool) -> None:
        """The CPU time a call took (its own work, not the wait for a thread or the GIL)."""
        if not self.enabled:
            return
        r = self._tools.setdefault(tool_name, _ToolRecord())
        r.average = seconds if r.calls == 0 else r.average + _WEIGHT * (seconds - r.average)
        r.calls += 1
        if inline:
            if seconds > self.budget * self.spike or r.average > self.budget:
                r.inline, r.fast_streak = False, 0
                r.demotions += 1
            return
        r.fast_streak = r.fast_streak + 1 if seconds <= self.budget else 0
        if r.fast_streak >= self.promote_after and r.average <= self.budget:
            r.inline = True

    def stats(self) -> dict[str, dict[str, int | float | bool]]:
        """Per tool: runs inline now, average ms, fast streak, times sent back to threads."""
        return {
            name: {
                "inline": r.inline,
                "average_ms": round(r.average * 1000, 3),
                "fast_streak": r.fast_streak,
                "demotions": r.demotions,
            }
            for name, r in sorted(self._tools.items())
        }
