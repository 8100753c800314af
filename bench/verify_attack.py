"""The verify toggle attack: what one agent's verify costs, and what it does to other rollouts.

    PYTHONPATH=. python -m bench.verify_attack [--toggles 300] [--rounds 5] [--root PATH]

A rollout of the `sql` environment toggles a referenced key (employees.employee_no, which
salaries, timesheets and other employees reference) `--toggles` times, A -> B then B -> A, one
call each, then verifies. Figures, on a real server (`python -m app serve --env sql`, 1 worker):

- verify alone: the attacked session's POST /verify, the task's gold already cached (a task's
  first verify anywhere replays its gold once; that is not the agent's doing);
- seed p50/p99 idle: another client seeding, calling one read-only tool and closing, in a loop;
- seed p99 under attack: the same client while two attacked sessions verify at once, `--rounds`
  times (fresh attacked sessions each round); tool and close latencies are reported beside it.

`--root` serves another checkout (e.g. `/work/main`, for the "before" figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import servers
from bench.client import Client, Reply

TASK_ID = "sql-020"
A, B = "E1001", "X1001"


def _task(root: Path) -> dict[str, Any]:
    path = root / "envs" / "sql" / "tasks.jsonl"
    if not path.exists():  # a checkout from before the tasks moved into the package
        path = root / "fixtures" / "sql" / "tasks.jsonl"
    rows = path.read_text().splitlines()
    return next(r for r in map(json.loads, rows) if r["task_id"] == TASK_ID)


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 1)


def _stats(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(samples), 1),
        "p99_ms": _p(samples, 0.99),
        "max_ms": round(max(samples), 1),
    }


async def _ok(reply: Reply) -> Reply:
    assert reply.status == 200, (reply.status, str(reply.body)[:300])
    return reply


async def _attacked(client: Client, task: dict[str, Any], toggles: int) -> tuple[str, dict]:
    """A session that toggled the key `toggles` times; (cookie, verify body)."""
    seeded = await _ok(await client.post("/seed_session", task))
    cookie = seeded.cookie
    assert cookie
    items: list[dict[str, Any]] = []
    for i in range(toggles):
        old, new = (A, B) if i % 2 == 0 else (B, A)
        args = {"sql": f"UPDATE employees SET employee_no = '{new}' WHERE employee_no = '{old}'"}
        out = await _ok(await client.post("/run_sql", args, cookie))
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": "run_sql",
                "arguments": json.dumps(args),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": f"c{i}", "output": json.dumps(out.body)}
        )
    answer = {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "Done."}]}  # fmt: skip
    return cookie, {**task, "response": {"output": [*items, answer]}}


async def _verify(client: Client, cookie: str, body: dict[str, Any]) -> tuple[float, dict]:
    started = time.perf_counter()
    reply = await _ok(await client.post("/verify", body, cookie))
    return (time.perf_counter() - started) * 1000, reply.body


async def _probe(client: Client, task: dict[str, Any], stop: asyncio.Event, out: dict) -> None:
    """Another rollout, over and over: seed, one read-only call, close."""
    while not stop.is_set():
        seeded = await _ok(await client.post("/seed_session", task))
        out["seed"].append(seeded.client_ms)
        call = await _ok(await client.post("/list_tables", {}, seeded.cookie))
        out["tool"].append(call.client_ms)
        closed = await _ok(await client.post("/close_session", {}, seeded.cookie))
        out["close"].append(closed.client_ms)


async def run(url: str, root: Path, toggles: int, rounds: int) -> dict[str, Any]:
    task = _task(root)
    async with Client(url, timeout=600) as client:
        # The task's gold, replayed once by its first verify, is cached from then on.
        cookie, body = await _attacked(client, task, 2)
        await _verify(client, cookie, body)
        idle: dict[str, list[float]] = {"seed": [], "tool": [], "close": []}
        stop = asyncio.Event()
        probe = asyncio.create_task(_probe(client, task, stop, idle))
        await asyncio.sleep(3)
        stop.set()
        await probe
        alone_ms, alone = [], None
        busy: dict[str, list[float]] = {"seed": [], "tool": [], "close": []}
        pair_ms = []
        for _ in range(rounds):
            cookie, body = await _attacked(client, task, toggles)
            ms, alone = await _verify(client, cookie, body)
            alone_ms.append(ms)
            pair = [await _attacked(client, task, toggles) for _ in range(2)]
            stop = asyncio.Event()
            probe = asyncio.create_task(_probe(client, task, stop, busy))
            await asyncio.sleep(0.05)
            started = time.perf_counter()
            await asyncio.gather(*(_verify(client, c, b) for c, b in pair))
            pair_ms.append((time.perf_counter() - started) * 1000)
            stop.set()
            await probe
    assert alone is not None
    return {
        "toggles": toggles,
        "rounds": rounds,
        "verify_alone_ms": _stats(alone_ms),
        "two_verifies_wall_ms": _stats(pair_ms),
        "step_rewards": len(alone.get("step_rewards") or []),
        "step_rewards_skipped": alone.get("verification", {}).get("step_rewards_skipped"),
        "reward": alone["reward"],
        "idle": {k: _stats(v) for k, v in idle.items()},
        "under_attack": {k: _stats(v) for k, v in busy.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toggles", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--root", type=Path, default=servers.ROOT, help="checkout to serve")
    args = parser.parse_args()
    servers.ROOT = args.root.resolve()  # what the server process imports
    data_dir = Path(tempfile.mkdtemp(prefix="verify-attack-"))
    server = servers.start_stategym(data_dir, env_name="sql")
    try:
        result = asyncio.run(run(server.url, servers.ROOT, args.toggles, args.rounds))
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
