"""The garbage collector as a long-lived server needs it.

A server at training scale holds thousands of cached states (gold, seed and snapshot dumps) on
top of what start-up built (SQLAlchemy, FastAPI, pydantic, the environment): a full collection
walked all of it every ~10 s under load, 0.1-0.25 s with the GIL held (every request waits),
and the three generations together cost ~1.4 ms of CPU a rollout. Requests make almost no
cyclic garbage, so what start-up built is frozen out of the generations and the young one is
collected after 20,000 net allocations instead of 700 (the task generator's workers do the
same, app/taskgen/driver.py). Figures: bench/history/soak.md, "The collector at training scale".
"""

from __future__ import annotations

import gc

SERVER_GC_THRESHOLDS = (20_000, 20, 20)


def settle_collector() -> None:
    """Collect once, freeze what is alive (start-up's objects: they live as long as the
    process), then collect less often. Call once per process, when start-up is done."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_GC_THRESHOLDS)
