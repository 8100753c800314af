"""Sessions opened ahead of their first call: two bursts, alternating server settings.

    PYTHONPATH=. python -m bench.open_ahead [rounds] [label:K=V,...] ...
    PYTHONPATH=. python -m bench.open_ahead 2 cap64:STATEGYM_OPEN_AHEAD_SESSIONS=64 default:

Per label and round, one StateGym server (retail, `max_open_sessions` 2,048, the label's
environment variables) runs two scenarios, each on a fresh server:
- `fresh`: 2,000 sessions seeded (c=64), then their 2,000 first calls at once (bench.targets'
  burst, `bench/rollout.py` `burst`);
- `capacity`: 10,000 sessions seeded and never called (make bench's capacity phase), RSS and open
  file descriptors, then one call on each of the last 2,000 at once, RSS after.
Prints client p99 and errors of each burst and the server's RSS; labels alternate within a round
so the machine's drift falls on all of them alike.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import phases, rollout
from bench import tasks as T
from bench.pg_ab import parse_config
from bench.rollout import env_tasks
from bench.servers import start_stategym
from bench.suite import LoadGen

SESSIONS, IN_FLIGHT = 10_000, 2_000


def _fresh(gen: LoadGen, work: Path, env: dict[str, str]) -> dict[str, Any]:
    sg = start_stategym(work / "fresh", max_open_sessions=2_048, extra_env=env)
    try:
        out = gen(rollout.burst, sg.url, "retail", IN_FLIGHT, 60)
        out["rss_mb_after"] = sg.rss_mb()
        return out
    finally:
        sg.stop()


def _capacity(gen: LoadGen, work: Path, env: dict[str, str]) -> dict[str, Any]:
    sg = start_stategym(work / "capacity", max_open_sessions=2_048, extra_env=env)
    try:
        task = next(t for t in env_tasks("retail") if T.seeded_rows(t) and t["ground_truth"])
        started = time.perf_counter()
        seeded = gen(phases.seed_many, sg.url, task, SESSIONS, 150)
        cookies = seeded.pop("cookies")
        seconds = time.perf_counter() - started
        time.sleep(3)  # the opens ahead still in flight land
        out: dict[str, Any] = {
            "seeded": len(cookies),
            "seed_s": round(seconds, 1),
            "rss_mb_seeded": sg.rss_mb(),
            "open_fds": sg.open_fds(),
        }
        out.update(gen(phases.burst, sg.url, task, cookies[-IN_FLIGHT:], IN_FLIGHT))
        out["rss_mb_after"] = sg.rss_mb()
        return out
    finally:
        sg.stop()


def _line(label: str, fresh: dict[str, Any], cap: dict[str, Any]) -> str:
    def s(ms: Any) -> str:
        return "-" if ms is None else f"{ms / 1000:.2f} s"

    return (
        f"{label:>12}  fresh: p99 {s(fresh.get('p99_ms'))}, {fresh.get('errors')} errors, "
        f"RSS {fresh.get('rss_mb_after', 0):.0f} MB | capacity: {cap.get('seeded')} seeded in "
        f"{cap.get('seed_s')} s, RSS {cap.get('rss_mb_seeded', 0):.0f} MB, "
        f"{cap.get('open_fds')} fds; burst p99 {s(cap.get('p99_ms'))}, {cap.get('errors')} "
        f"errors, RSS after {cap.get('rss_mb_after', 0):.0f} MB"
    )


def main(argv: list[str]) -> None:
    rounds = int(argv[0]) if argv and argv[0].isdigit() else 2
    labels = [parse_config(a) for a in (argv[1:] if argv and argv[0].isdigit() else argv)]
    labels = labels or [parse_config("default:")]
    gen = LoadGen()
    work = Path(tempfile.mkdtemp(prefix="stategym-ahead-"))
    try:
        for n in range(rounds):
            for label, env in labels:
                run_dir = work / f"{label}-{n}"
                line = _line(label, _fresh(gen, run_dir, env), _capacity(gen, run_dir, env))
                print(line, flush=True)
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        gen.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
