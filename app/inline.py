"""Which tool calls run on the event loop itself instead of hopping to a tool thread.

Tool calls are CPU-bound Python under one GIL, so a thread buys no parallelism; what it costs is
the hop and the GIL hand-offs between the loop and the thread. Under load that is 40 % of a
worker's throughput (bench/README.md: 880 -> 1,430 reads/s and 810 -> 1,320 writes/s at c=64 with
one worker). What a thread does buy is that a slow call cannot stall every other request of the
worker. So a tool runs inline only once it has proven fast: `promote_after` consecutive calls in
a thread each under `budget_ms`; one inline call over the budget sends the tool back to threads
until it proves fast again. A call waiting for another process's write lock never waits on the
loop: it is retried in a thread (SessionManager).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _ToolRecord:
    fast_streak: int = 0
    demotions: int = 0


class InlinePolicy:
    def __init__(self, budget_ms: float, promote_after: int = 8):
        self.budget = budget_ms / 1000
        self.promote_after = promote_after
        self._tools: dict[str, _ToolRecord] = {}

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    def allows(self, tool_name: str) -> bool:
        record = self._tools.get(tool_name)
        return self.enabled and record is not None and record.fast_streak >= self.promote_after

    def record(self, tool_name: str, seconds: float, *, inline: bool) -> None:
        """How long a call held (or, in a thread, would have held) the event loop."""
        if not self.enabled:
            return
        record = self._tools.setdefault(tool_name, _ToolRecord())
        if seconds <= self.budget:
            record.fast_streak += 1
            return
        if inline:
            record.demotions += 1
        record.fast_streak = 0

    def stats(self) -> dict[str, dict[str, int | bool]]:
        """Per tool: runs inline now, consecutive fast calls, times sent back to threads."""
        return {
            name: {
                "inline": self.allows(name),
                "fast_streak": r.fast_streak,
                "demotions": r.demotions,
            }
            for name, r in sorted(self._tools.items())
        }
