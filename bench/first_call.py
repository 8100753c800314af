"""A rollout's first tool call after the agent has thought, with and without the open on seed.

    PYTHONPATH=. python -m bench.first_call [think_ms]      # default 50 ms

A real agent takes tens of ms to seconds (an LLM turn) between the seed and its first call; the
latency phase of bench.targets sends it at once. Here every retail task is seeded, the client
waits `think_ms`, then sends the task's gold calls one at a time. Server-side p50
(X-Process-Time) of the first call and of the later ones, for a server with
STATEGYM_OPEN_ON_SEED=false and one with true (app/runtime/open_sessions.py), twice each,
alternating. The first pass over the tasks is the warm-up.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from bench.client import Client, Samples
from bench.rollout import env_tasks
from bench.servers import start_stategym


async def _drive(url: str, think_s: float) -> tuple[float, float]:
    tasks = [t for t in env_tasks("retail") if t["ground_truth"]]
    first, later, ignored = Samples(), Samples(), Samples()
    async with Client(url, limit=1) as client:
        for counted in (False, True, True):
            for task in tasks:
                seeded = await client.safe_post(ignored, "/seed_session", task)
                assert seeded is not None and seeded.cookie, "seed failed"
                await asyncio.sleep(think_s)
                for i, call in enumerate(task["ground_truth"]):
                    into = ignored if not counted else (first if i == 0 else later)
                    path = f"/{call['name']}"
                    await client.safe_post(into, path, call["arguments"], seeded.cookie)
                await client.safe_post(ignored, "/close_session", {}, seeded.cookie)
    assert not first.errors and not later.errors, (first.first_error, later.first_error)
    return statistics.median(first.server_ms), statistics.median(later.server_ms)


def main() -> None:
    think_ms = float(sys.argv[1]) if len(sys.argv) > 1 else 50.0
    for open_on_seed in ("false", "true", "false", "true"):
        with tempfile.TemporaryDirectory(prefix="stategym-first-call-") as data:
            server = start_stategym(Path(data), extra_env={"STATEGYM_OPEN_ON_SEED": open_on_seed})
            try:
                first, later = asyncio.run(_drive(server.url, think_ms / 1000))
            finally:
                server.stop()
        print(
            f"open_on_seed={open_on_seed:5s} think {think_ms:g} ms: first call p50 "
            f"{first:.2f} ms, later calls p50 {later:.2f} ms (server-side)"
        )


if __name__ == "__main__":
    main()
