"""What a never-seen task costs the server, part by part, in process (thread CPU, ms).

    PYTHONPATH=. python -m bench.cold_parts [--tasks FILE.jsonl] [-n 300]

Per distinct task, in the order a server meets them: the stored task parsed, the seed base's
spare clone (`Store.prepare_spare`, made after an earlier seed's answer), the snapshot built on
it (`Store.snapshot`), its seed and gold states (`GoldCache.get`, built after the first seed's
answer, both on the snapshot's own clone) and a session file written from the snapshot
(`Store.create_session_file`, every seed's). "on the seed": the parts the first seed waits
for. `FILE.jsonl` defaults to bench.cold_path's 500 generated retail tasks.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.cold_path import _tasks


def main() -> None:
    from app.core.tasks import task_from_data
    from app.registry import load_environment
    from app.storage.images import Store
    from app.verify.gold import GoldCache

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks")
    parser.add_argument("-n", type=int, default=300, help="distinct tasks measured")
    args = parser.parse_args()
    lines = _tasks(args.tasks).read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()][: args.n + 1]
    env = load_environment(rows[0].get("env", "retail"))
    store = Store(Path(tempfile.mkdtemp(prefix="stategym-cold-parts-")), env)
    gold = GoldCache(store, capacity=len(rows), max_bytes=2**31)
    first = task_from_data(rows[0])  # the template, code paths and statement caches warmed
    warm = store.create_session_file("0" * 32, store.snapshot(first))
    gold.get(first)
    parts: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        started = time.thread_time()
        out = fn()
        parts.setdefault(name, []).append(1000 * (time.thread_time() - started))
        return out

    spare = getattr(store, "prepare_spare", None)  # releases before 2026-12-07 have none
    for row in rows[1:]:
        task = timed("task parsed", functools.partial(task_from_data, row))
        if spare is not None:  # as a server does after the previous seed's answer
            timed("spare", spare)
        snapshot = timed("snapshot", functools.partial(store.snapshot, task))
        # As a server does (`gold_on_seed`): the gold built after the first seed, its seed
        # state first; a verify asks for the gold too, which holds the seed state.
        timed("seed+gold", functools.partial(gold.get, task))
        write = functools.partial(store.create_session_file, "1" * 32, snapshot)
        timed("session file", write).unlink()
    warm.unlink()
    # What the seed itself waits for: everything but the spare (made after an earlier answer)
    # and the seed and gold states (built after this one's).
    seed_path = [n for n in parts if n not in ("spare", "seed+gold")]
    parts["on the seed"] = [sum(v) for v in zip(*(parts[n] for n in seed_path), strict=True)]
    total = [
        sum(values)
        for values in zip(*(v for n, v in parts.items() if n != "on the seed"), strict=True)
    ]
    print(f"{len(rows) - 1} distinct {env.name} tasks, thread CPU per task (ms):")
    for name, values in (*parts.items(), ("total", total)):
        p50, mean = statistics.median(values), statistics.mean(values)
        print(f"  {name:12s} p50 {p50:6.2f}  mean {mean:6.2f}")


if __name__ == "__main__":
    main()
