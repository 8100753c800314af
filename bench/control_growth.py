"""Control-database bytes per rollout: gold rollouts (seed, calls, verify, close) over distinct
tasks in GRPO groups, in process, retention `delete_on_close`, on the SQLite control file.

    PYTHONPATH=. python -m bench.control_growth --tasks-file T.jsonl --rollouts 2000 --group 2
    PYTHONPATH=. python -m bench.control_growth ... --records-max 500   # with the bound
    PYTHONPATH=. python -m bench.control_growth --prune-cost 100000     # a pruner pass's cost

Every tenth of the rollouts it reads the control database's bytes in use (pages in use x page
size, as committed, WAL included: free pages left by deletes are not counted, a file's size
would be) and its row counts. It talks to the server's HTTP API and reads the file only, so the
same script measures a checkout from before task rows and the bound (`--records-max` needs the
bound's setting). Output: a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings

SECRET = "bench-control-growth-secret-0123456789ab"


def control_usage(path: Path) -> dict[str, Any]:
    """Bytes in use in the control database, its file sizes, and row counts per table."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pages, free, size = (
            conn.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("page_count", "freelist_count", "page_size")
        )
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()
    files = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    return {"used_bytes": (pages - free) * size, "file_bytes": files, "rows": rows}


async def rollout(client: httpx.AsyncClient, task: dict[str, Any]) -> float | None:
    """One gold rollout on its own cookie jar; its reward (None if a request failed)."""
    client.cookies.clear()
    if (await client.post("/seed_session", json=task)).status_code != 200:
        return None
    outputs: list[dict[str, Any]] = []
    for i, call in enumerate(task["ground_truth"]):
        args = call["arguments"]
        args = json.loads(args) if isinstance(args, str) else args
        answer = await client.post(f"/{call['name']}", json=args)
        outputs.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": call["name"],
                "arguments": json.dumps(args),
            }
        )
        outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": answer.text})
    text = "Done. " + " ".join(task.get("expected_outputs") or [])
    content = [{"type": "output_text", "text": text}]
    final = {"type": "message", "role": "assistant", "content": content}
    response = {"id": "r", "object": "response", "output": [*outputs, final]}
    verified = await client.post("/verify", json={**task, "response": response})
    closed = await client.post("/close_session", json={})
    if verified.status_code != 200 or closed.status_code != 200:
        return None
    return verified.json().get("reward")


async def drive(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    tasks = [json.loads(line) for line in args.tasks_file.read_text().splitlines() if line]
    extra: dict[str, Any] = {}
    if args.records_max is not None:
        extra = {"session_records_max": args.records_max, "reaper_interval_seconds": 1}
    settings = Settings(
        env=args.env, data_dir=data_dir, secret_key=SECRET, retention="delete_on_close", **extra
    )
    app = create_app(settings, load_environment(args.env))
    control = data_dir / "control.sqlite"
    samples, rewards = [], []
    gate = asyncio.Semaphore(args.concurrency)
    started = time.monotonic()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)

        async def one(task: dict[str, Any]) -> None:
            async with gate, httpx.AsyncClient(transport=transport, base_url="http://sg") as c:
                rewards.append(await rollout(c, task))

        tenth = max(1, args.rollouts // 10)
        for start in range(0, args.rollouts, tenth):
            batch = range(start, min(start + tenth, args.rollouts))
            await asyncio.gather(*(one(tasks[(i // args.group) % len(tasks)]) for i in batch))
            await asyncio.sleep(args.settle_s)  # the pruner's pass (with --records-max)
            samples.append({"rollouts": batch[-1] + 1, **control_usage(control)})
    return {"samples": samples, "rewards": rewards, "seconds": time.monotonic() - started}


def prune_cost(records: int, batch: int = 500) -> dict[str, float]:
    """Milliseconds of pruner passes over a control file holding `records` dropped records
    (written directly, two sessions per 3 KB task): the first pass of a process (one full
    count), a pass with nothing to prune, and one pruning a batch past the bound."""
    from datetime import datetime, timedelta

    from app.storage.control_schema import task_digest, task_text
    from app.storage.sqlite.control import open_sqlite_control

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="stategym-prune-") as tmp:
        path = Path(tmp) / "control.sqlite"
        open_sqlite_control(path).dispose()
        tasks = [task_text({"task_id": f"t{i}", "pad": "x" * 3000}) for i in range(records // 2)]
        digests = [task_digest("retail", t) for t in tasks]
        start = datetime(2026, 12, 1)
        conn = sqlite3.connect(path)
        with conn:
            conn.executemany(
                "INSERT INTO task_rows VALUES (?, 'retail', ?, '2026-12-01 00:00:00.000000')",
                zip(digests, tasks, strict=True),
            )
            conn.executemany(
                "INSERT INTO sessions (id, env, task_id, snapshot_key, status, created_at, "
                "closed_at, reward, file, task_digest, verify_json, dropped_at) VALUES "
                "(?, 'retail', ?, 'k', 'closed', ?, ?, 1.0, 'f', ?, ?, ?)",
                (
                    (f"{i:032x}", f"t{i // 2}", stamp, stamp, digests[i // 2], "{}", stamp)
                    for i in range(records)
                    for stamp in [(start + timedelta(seconds=i)).isoformat(" ", "microseconds")]
                ),
            )
        conn.close()
        control = open_sqlite_control(path)
        try:
            for label, keep in (
                ("first pass of a process, nothing to prune", records),
                ("nothing to prune", records),
                ("nothing to prune, again", records),
                (f"{batch} to prune", records - batch),
                ("nothing to prune after it", records - batch),
            ):
                started = time.perf_counter()
                pruned = control.prune_dropped("retail", keep, batch)
                out[f"{label} (pruned {pruned})"] = (time.perf_counter() - started) * 1000
        finally:
            control.dispose()
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="retail")
    parser.add_argument("--tasks-file", type=Path, help="JSONL task rows")
    parser.add_argument(
        "--prune-cost", type=int, default=None, help="time pruner passes over N records instead"
    )
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--group", type=int, default=2, help="rollouts per task (GRPO group)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--records-max", type=int, default=None, help="session_records_max (unset: default)"
    )
    parser.add_argument("--settle-s", type=float, default=0.0, help="pause after each tenth")
    args = parser.parse_args(argv)
    if args.prune_cost:
        costs = prune_cost(args.prune_cost)
        for label, ms in costs.items():
            print(f"{label}: {ms:.1f} ms")
        return costs
    if args.tasks_file is None:
        parser.error("--tasks-file is required")
    with tempfile.TemporaryDirectory(prefix="stategym-control-") as tmp:
        run = asyncio.run(drive(args, Path(tmp) / "data"))
    samples = run["samples"]
    print("rollouts | used KB | files KB | sessions | task_rows")
    for s in samples:
        print(
            f"{s['rollouts']} | {s['used_bytes'] / 1024:.0f} | {s['file_bytes'] / 1024:.0f} | "
            f"{s['rows'].get('sessions')} | {s['rows'].get('task_rows', '-')}"
        )
    second, last = samples[1], samples[-1]
    per_rollout = (last["used_bytes"] - second["used_bytes"]) / (
        last["rollouts"] - second["rollouts"]
    )
    result = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "rollouts_per_s": len(run["rewards"]) / run["seconds"],
        "failed": sum(r is None for r in run["rewards"]),
        "not_1": sum(r is not None and r != 1.0 for r in run["rewards"]),
        "used_bytes_per_rollout": per_rollout,
        "used_last_over_second": last["used_bytes"] / second["used_bytes"],
        "samples": samples,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))
    return result


if __name__ == "__main__":
    main()
