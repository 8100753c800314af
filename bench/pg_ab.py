"""PostgreSQL rollouts/s, A/B: server settings or checkouts side by side, runs alternating.

    PYTHONPATH=. python -m bench.pg_ab 3 t2:STATEGYM_TOOL_THREADS=2 t6:STATEGYM_TOOL_THREADS=6
    PYTHONPATH=. python -m bench.pg_ab 3 before:ROOT=/tmp/base now:

Each argument after the round count is `label:KEY=VALUE,...`: environment variables for the
server, and `ROOT=<checkout>` to run another checkout's server (a `git worktree`; the load
generator is this checkout's). Per run: a fresh server (one uvicorn worker, `keep` retention, a
fresh schema prefix), every retail task once, 6 s at the timed concurrency, the schema pools
settled, then 15 s timed at 16 rollouts in flight; CPU per rollout of the server and of its
PostgreSQL backends (when they all lasted the run). `bench.pg --ratio` gives one run of each
backend; on a shared 2-core machine a single run moves by ±10 %, so compare alternating runs.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench import rollout, servers
from bench.pg import PG_URL, _backend_pids, _cpu_s, _drop_prefix, _pool_settled, start_server

TIMED_S = 15.0
CONCURRENCY = 16


def parse_config(spec: str) -> tuple[str, dict[str, str]]:
    """`label:KEY=VALUE,...` -> (label, environment variables)."""
    label, _, pairs = spec.partition(":")
    return label, dict(pair.split("=", 1) for pair in pairs.split(",") if pair)


def one_run(pool: ProcessPoolExecutor, extra: dict[str, str]) -> dict[str, Any]:
    extra = dict(extra)
    root = Path(extra.pop("ROOT", str(servers.ROOT)))
    work = Path(tempfile.mkdtemp(prefix="stategym-pgab-"))
    prefix = "a" + secrets.token_hex(4)
    app_name = f"stategym-pgab-{prefix}"
    env = {
        "STATEGYM_DATABASE_URL": PG_URL,
        "STATEGYM_PG_SCHEMA_PREFIX": prefix,
        "PGAPPNAME": app_name,
        "STATEGYM_RETENTION": "keep",
        **extra,
    }
    here, servers.ROOT = servers.ROOT, root  # the server runs from `root` (cwd and PYTHONPATH)
    try:
        server = start_server("postgres", work / "postgres", env)
    finally:
        servers.ROOT = here
    try:
        pool.submit(rollout.rollout_traffic, server.url, "retail", 4, 48, 30).result()
        pool.submit(rollout.rollout_traffic, server.url, "retail", CONCURRENCY, 10**6, 6).result()
        _pool_settled(prefix)
        pids, db = server.pids(), _backend_pids(app_name)
        before = (_cpu_s(pids), _cpu_s(db))
        out = pool.submit(
            rollout.rollout_traffic, server.url, "retail", CONCURRENCY, 10**6, TIMED_S
        ).result()
        n = max(out["rollouts"], 1)
        lasted = set(db) == set(_backend_pids(app_name))
        return {
            "rollouts_per_s": out["rollouts_per_s"],
            "errors": out["errors"],
            "mean_reward": out["mean_reward"],
            "server_cpu_ms": round((_cpu_s(pids) - before[0]) * 1000 / n, 1),
            "db_cpu_ms": round((_cpu_s(db) - before[1]) * 1000 / n, 1) if lasted else None,
            "load": round(os.getloadavg()[0], 1),
        }
    finally:
        server.stop()
        _drop_prefix(prefix)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("rounds", type=int)
    parser.add_argument("configs", nargs="+", help="label:KEY=VALUE,... (ROOT=<checkout>)")
    args = parser.parse_args()
    configs = [parse_config(spec) for spec in args.configs]
    rates: dict[str, list[float]] = {label: [] for label, _ in configs}
    with ProcessPoolExecutor(1) as pool:  # the load generator, in its own process
        for r in range(args.rounds):
            for label, extra in configs:
                res = one_run(pool, extra)
                rates[label].append(res["rollouts_per_s"])
                print(f"{label} round {r}: {res}", flush=True)
    for label, values in rates.items():
        print(f"{label}: mean {statistics.mean(values):.1f} rollouts/s, runs {sorted(values)}")


if __name__ == "__main__":
    main()
