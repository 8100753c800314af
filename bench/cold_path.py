"""The cold path: never-seen tasks seeded and verified once each, over HTTP, one request at a time.

    PYTHONPATH=. python -m bench.cold_path [--tasks FILE.jsonl] [-n 200] [--json]

`FILE.jsonl` defaults to `$STATEGYM_BENCH_TASKS` or generates 500 retail tasks once
(`stategym tasks generate --env retail --count 500 --seed 5`) into the temp dir. A real server
(`stategym serve`, one worker, retention `delete_on_close`) on a fresh data dir; per task: seed
(cold: the task was never seen), its gold calls, verify (the first of the task), close, then a
second seed and close (warm). Reported: server-side (X-Process-Time) p50/p99 of the cold seed, the
first verify and the warm seed, and the bytes left in the data dir per distinct task once every
session is closed, split by kind (snapshots, seed files, gold, templates, control database).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.client import Client, Samples
from bench.phases import pct
from bench.rollout import verify_body
from bench.servers import ROOT, start_stategym


def _tasks(path: str | None) -> Path:
    if path:
        return Path(path)
    if os.environ.get("STATEGYM_BENCH_TASKS"):
        return Path(os.environ["STATEGYM_BENCH_TASKS"])
    out = Path(tempfile.gettempdir()) / "stategym-bench-retail-500-seed5.jsonl"
    if not out.exists():
        argv = [sys.executable, "-m", "app", "tasks", "generate", str(out)]
        argv += ["--env", "retail", "--count", "500", "--seed", "5"]
        subprocess.run(argv, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out


def _bytes_by_kind(data_dir: Path) -> dict[str, int]:
    """Allocated bytes under the data dir, by top-level kind (`.seed` files apart)."""
    kinds: dict[str, int] = {}
    for root, _dirs, files in os.walk(data_dir):
        rel = Path(root).relative_to(data_dir).parts
        for name in files:
            if name.endswith(".log"):
                continue
            kind = rel[0] if rel else name.split(".")[0]
            if ".seed" in rel:
                kind = "seed_files"
            try:
                size = os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
            kinds[kind] = kinds.get(kind, 0) + size
    return kinds


async def _run(url: str, rows: list[dict[str, Any]], rewards: list[Any]) -> dict[str, Samples]:
    kinds = {k: Samples() for k in ("cold_seed", "first_verify", "warm_seed", "tool", "close")}
    async with Client(url, limit=4) as client:
        for task in rows:
            seeded = await client.safe_post(kinds["cold_seed"], "/seed_session", task)
            if seeded is None or seeded.cookie is None:
                continue
            cookie = seeded.cookie
            for call in task.get("ground_truth") or []:
                await client.safe_post(kinds["tool"], f"/{call['name']}", call["arguments"], cookie)
            verdict = await client.safe_post(
                kinds["first_verify"], "/verify", verify_body(task), cookie
            )
            if verdict is not None and verdict.ok:
                rewards.append(verdict.body.get("reward"))
            await client.safe_post(kinds["close"], "/close_session", {}, cookie)
            again = await client.safe_post(kinds["warm_seed"], "/seed_session", task)
            if again is not None and again.cookie is not None:
                await client.safe_post(kinds["close"], "/close_session", {}, again.cookie)
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks")
    parser.add_argument("-n", type=int, default=200, help="distinct tasks (never seen before)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lines = _tasks(args.tasks).read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()][: args.n]
    data_dir = Path(tempfile.mkdtemp(prefix="stategym-cold-"))
    server = start_stategym(data_dir, extra_env={"STATEGYM_RETENTION": "delete_on_close"})
    try:
        # The template is built at start-up; one seed of a task outside the measured set warms
        # the code paths (imports, statement caches) without seeing any measured task.
        asyncio.run(_run(server.url, rows[-1:], []))
        rewards: list[Any] = []
        kinds = asyncio.run(_run(server.url, rows[:-1] if len(rows) > 1 else rows, rewards))
        rss = server.rss_mb()
    finally:
        server.stop()
    disk = _bytes_by_kind(data_dir)
    per_task = {k: round(v / 1024 / len(rows), 1) for k, v in sorted(disk.items())}
    kept = ("snapshots", "gold", "sessions")  # per task, for ever (no bound)
    n = len(rows)
    result: dict[str, Any] = {
        "tasks": n,
        "errors": sum(s.errors for s in kinds.values()),
        "first_error": next((s.first_error for s in kinds.values() if s.first_error), None),
        "reward_1": sum(1 for r in rewards if r == 1),
        "verified": len(rewards),
        "rss_mb": round(rss, 1),
        "disk_kb_per_task_by_kind": per_task,
        # What stays per distinct task with no bound (snapshot and gold files, sessions left).
        "disk_kb_kept_per_distinct_task": round(sum(disk.get(k, 0) for k in kept) / 1024 / n, 1),
        # Everything task-related, the bounded seed-file cache included (seed_file_cache_mb).
        "disk_kb_per_distinct_task_with_seed_files": round(
            sum(disk.get(k, 0) for k in (*kept, "seed_files")) / 1024 / n, 1
        ),
    }
    for name, samples in kinds.items():
        if samples.server_ms:
            result[f"{name}_server_ms"] = {
                "p50": round(pct(samples.server_ms, 50) or 0.0, 2),
                "p99": round(pct(samples.server_ms, 99) or 0.0, 2),
            }
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
