"""`python -m bench.taskgen`: validated tasks per second per environment, and snapshot memory.

    PYTHONPATH=. python -m bench.taskgen                       # 100 tasks per env, 2 workers
    PYTHONPATH=. python -m bench.taskgen --env retail --count 10000 --jobs 2
    PYTHONPATH=. python -m bench.taskgen --env retail --count 1000   # and 10,000 projected
    PYTHONPATH=. python -m bench.taskgen --env retail --memory 600   # RSS while seeding
    PYTHONPATH=. python -m bench.taskgen --env retail --count 300 --in-process --seed 1

Generation is what `stategym tasks generate` runs (draw + full validation, output discarded),
with its CPU ms per task (this process and its workers: `jobs / CPU s per task` is the rate on
idle cores, and `10k s idle` the seconds 10,000 tasks take on `jobs` idle cores: the target is
120 s for retail); `--in-process`: one process as a worker runs, its start left out. `--memory N`
builds N distinct generated tasks' snapshots through a Store with the server's default cache
and prints the RSS as it goes: it levels off once the LRU is full, whatever N.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import tempfile
import time
from pathlib import Path

from app.core.tasks import task_from_data
from app.registry import environment_names, load_environment
from app.settings import Settings
from app.storage.sqlite.store import Store
from app.taskgen.draw import choices, draw
from app.taskgen.driver import Request, Summary, generate
from app.taskgen.registry import load_generator


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the worker pool, once shut down)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rate(env: str, count: int, jobs: int, seed: int) -> tuple[float, float, Summary]:
    """(wall seconds, CPU seconds, summary): on a shared machine the wall time depends on the
    load; CPU seconds per task do not (jobs / that is the rate on `jobs` idle cores)."""
    started, cpu = time.perf_counter(), cpu_seconds()
    summary = Summary()
    for item in generate(Request(env, count, seed), jobs):
        if isinstance(item, Summary):
            summary = item
    return time.perf_counter() - started, cpu_seconds() - cpu, summary


def in_process(env: str, count: int, seed: int) -> None:
    """CPU per task of generation in this process as a pool worker runs it (its start, its
    collector settings), the start left out: what 10,000 tasks cost per core."""
    from app.taskgen import driver

    request = Request(env, count, seed)
    driver._init(request)
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    init, driver._init = driver._init, lambda request: None  # started above, not timed
    try:
        started = time.process_time()
        summary = Summary()
        for item in driver.generate(request, 1):
            if isinstance(item, Summary):
                summary = item
        cpu = time.process_time() - started
    finally:
        driver._init = init
    print(
        f"{env}: load {os.getloadavg()[0]:.1f}, {summary.written} tasks, {summary.attempts} "
        f"attempts, {cpu * 1000 / max(summary.written, 1):.1f} CPU ms per task, "
        f"{cpu * 1000 / max(summary.attempts, 1):.1f} per attempt"
    )


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(env: str, n: int) -> None:
    cap = Settings.model_fields["snapshot_cache_size"].default
    gen = load_generator(env)
    pool = choices(gen, "train", None)
    # Drawn, not validated: what is measured is the store's memory, not the generator's.
    drawn = (draw(gen, "train", 99, i, pool).task for i in range(n))
    tasks = [t for t in drawn if t is not None]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp), load_environment(env), snapshot_cache_size=cap)
        print(
            f"{env}: snapshot cache cap {cap} (STATEGYM_SNAPSHOT_CACHE_SIZE); RSS before "
            f"{rss_mb():.0f} MB"
        )
        n = len(tasks)
        for i, task in enumerate(tasks, 1):
            store.snapshot(task_from_data(task))
            if i % max(n // 6, 1) == 0 or i == n:
                print(f"  {i:>6} snapshots built: RSS {rss_mb():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=environment_names())
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory", type=int, default=0, help="snapshots to build (RSS check)")
    parser.add_argument("--in-process", action="store_true", help="one process, start left out")
    args = parser.parse_args()
    if args.in_process:
        for env in args.env or environment_names():
            in_process(env, args.count, args.seed)
        return
    if args.memory:
        memory((args.env or ["retail"])[0], args.memory)
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"{'env':<10} {'tasks':>6} {'seconds':>8} {'tasks/s':>8} {'cpu ms/task':>11} "
        f"{'idle-core tasks/s':>17} {'10k s idle':>10} {'attempts':>8} dropped"
    )
    for env in args.env or environment_names():
        seconds, cpu, s = rate(env, args.count, args.jobs, args.seed)
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(s.dropped.items())) or "-"
        per_task = cpu / max(s.written, 1)
        print(
            f"{env:<10} {s.written:>6} {seconds:>8.1f} {s.written / seconds:>8.2f} "
            f"{per_task * 1000:>11.0f} {args.jobs / per_task:>17.1f} "
            f"{10_000 * per_task / args.jobs:>10.0f} {s.attempts:>8} "
            f"{dropped}"
        )


if __name__ == "__main__":
    main()
