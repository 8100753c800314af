"""The verify stall: one client's heavy replays against another client's rollouts.

    PYTHONPATH=. python -m bench.verify_stall [--hog 20] [--calls 10] [--seconds 20] [--root PATH]

A real server (`python -m app serve --env sql`, 1 worker) on 127.0.0.1. The *hog* (its sockets
bound to 127.0.0.2, so it is another peer) keeps `--hog` cookieless `/verify` requests in flight,
each replaying `--calls` heavy `run_sql` calls (a recursive CTE the console stops after ~1 s):
the red team's stall. Meanwhile the *other* client (127.0.0.1) runs rollouts back to back on
the same task: seed, three cheap `run_sql` calls, verify of its live session, close. Figures,
all from the same run: the other client's verify and tool-call p50/p99/max while the hog runs,
and the same alone before the hog starts (the ratio says what the hog costs); the hog's
finished replays and 429s. Targets: verify p99 <= 100 ms, tool-call p99 <= 50 ms on 2 cores.

`--root` serves another checkout (e.g. `/work/main`, for the "before" figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench import servers
from bench.client import Client

TASK_ID = "sql-001"
HEAVY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
CHEAP = "SELECT count(*) FROM employees"
HOG_ADDRESS = "127.0.0.2"


def _task(root: Path) -> dict[str, Any]:
    rows = (root / "envs" / "sql" / "tasks.jsonl").read_text().splitlines()
    return next(r for r in map(json.loads, rows) if r["task_id"] == TASK_ID)


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 1)


def _stats(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50_ms": _p(samples, 0.5),
        "p99_ms": _p(samples, 0.99),
        "max_ms": round(max(samples), 1),
    }


def _heavy_body(task: dict[str, Any], calls: int) -> dict[str, Any]:
    output = [
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": "run_sql",
            "arguments": json.dumps({"sql": HEAVY}),
        }
        for i in range(calls)
    ]
    return {**task, "response": {"output": output}}


async def _rollouts(client: Client, task: dict[str, Any], stop: asyncio.Event, out: dict) -> None:
    """The other client: whole rollouts back to back until `stop`."""
    while not stop.is_set():
        seeded = await client.post("/seed_session", task)
        assert seeded.status == 200 and seeded.cookie, (seeded.status, str(seeded.body)[:300])
        for _ in range(3):
            call = await client.post("/run_sql", {"sql": CHEAP}, seeded.cookie)
            assert call.status == 200, call.body
            out["tool"].append(call.client_ms)
        body = {**task, "response": {"output": []}}
        verified = await client.post("/verify", body, seeded.cookie)
        assert verified.status == 200, verified.body
        out["verify"].append(verified.client_ms)
        await client.post("/close_session", {}, seeded.cookie)


async def _hog(url: str, body: dict[str, Any], n: int, stop: asyncio.Event, out: dict) -> None:
    """`n` heavy replays in flight from another peer address until `stop`; a 429 is retried
    after its Retry-After, as a client that honours it would."""
    connector = aiohttp.TCPConnector(limit=n + 4, local_addr=(HOG_ADDRESS, 0))
    timeout = aiohttp.ClientTimeout(total=3600)
    data = json.dumps(body)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as http:

        async def one() -> None:
            while not stop.is_set():
                async with http.post("/verify", data=data, headers=headers) as resp:
                    answer = await resp.json(content_type=None)
                    if resp.status == 429:
                        out["429"] += 1
                        await asyncio.sleep(float(resp.headers.get("Retry-After", "1")))
                        continue
                    out["done"] += 1
                    kind = answer.get("failure_kind") if isinstance(answer, dict) else None
                    out["kinds"][str(kind)] = out["kinds"].get(str(kind), 0) + 1

        workers = [asyncio.create_task(one()) for _ in range(n)]
        await stop.wait()
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def run(url: str, root: Path, hog: int, calls: int, seconds: float) -> dict[str, Any]:
    task = _task(root)
    body = _heavy_body(task, calls)
    async with Client(url, timeout=600) as client:
        idle: dict[str, list[float]] = {"tool": [], "verify": []}
        warm = asyncio.Event()
        warm_run = asyncio.create_task(_rollouts(client, task, warm, {"tool": [], "verify": []}))
        await asyncio.sleep(2)  # the task's snapshot and gold cached, as in steady training
        warm.set()
        await warm_run
        stop = asyncio.Event()
        alone = asyncio.create_task(_rollouts(client, task, stop, idle))
        await asyncio.sleep(seconds / 2)
        stop.set()
        await alone
        busy: dict[str, list[float]] = {"tool": [], "verify": []}
        hogged: dict[str, Any] = {"done": 0, "429": 0, "kinds": {}}
        stop = asyncio.Event()
        hogging = asyncio.create_task(_hog(url, body, hog, stop, hogged))
        await asyncio.sleep(1)  # the hog's replays are running and queued
        measured = asyncio.create_task(_rollouts(client, task, stop, busy))
        await asyncio.sleep(seconds)
        stop.set()
        await measured
        await hogging
    under, before = _stats(busy["verify"]), _stats(idle["verify"])
    tools_under, tools_before = _stats(busy["tool"]), _stats(idle["tool"])
    return {
        "hog": {"in_flight": hog, "heavy_calls_each": calls, "body_bytes": len(json.dumps(body))},
        "seconds": seconds,
        "other_client_alone": {"verify": before, "tool": tools_before},
        "other_client_under_hog": {"verify": under, "tool": tools_under},
        "p99_ratio_under_vs_alone": {
            "verify": round(under.get("p99_ms", 0) / max(before.get("p99_ms", 1), 0.1), 1),
            "tool": round(
                tools_under.get("p99_ms", 0) / max(tools_before.get("p99_ms", 1), 0.1), 1
            ),
        },
        "targets_met": {
            "verify_p99_le_100ms": under.get("p99_ms", 1e9) <= 100,
            "tool_p99_le_50ms": tools_under.get("p99_ms", 1e9) <= 50,
        },
        "hog_replays": hogged,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hog", type=int, default=20, help="heavy replays kept in flight")
    parser.add_argument("--calls", type=int, default=10, help="heavy run_sql calls per replay")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window")
    parser.add_argument("--root", type=Path, default=servers.ROOT, help="checkout to serve")
    args = parser.parse_args()
    servers.ROOT = args.root.resolve()  # what the server process imports
    data_dir = Path(tempfile.mkdtemp(prefix="verify-stall-"))
    server = servers.start_stategym(data_dir, env_name="sql", root=servers.ROOT)
    started = time.time()
    try:
        result = asyncio.run(run(server.url, servers.ROOT, args.hog, args.calls, args.seconds))
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    result["root"] = str(servers.ROOT)
    result["wall_s"] = round(time.time() - started, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
