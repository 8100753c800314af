"""Issue 20's load phases (run in the load-generator process; every one bounded in count and time).

- `rollout_traffic`: every task of an environment, warm (one whole rollout per task first, so
  snapshots and golds are built on both servers), then `concurrency` loops each running
  seed → the task's gold calls → verify → close over the tasks round-robin; requests/s.
- `latency`: the same rollouts one request at a time; server-side (X-Process-Time) times of
  seed, tool call, verify and close; the first pass over the tasks is the warm-up, not counted.
  `first_tool`: the first call of each rollout alone (also counted in `tool`), the one that
  found its session not open yet before sessions were opened after their seed.
- `burst`: `n` sessions seeded, then `n` tool calls sent at once on `n` connections from
  127.0.0.1; p99 and errors.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from bench import tasks as T
from bench.client import Client, Samples, bounded
from bench.phases import _run, pct

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("seed", "tool", "verify", "close")


def env_tasks(env_name: str, limit: int | None = None) -> list[dict[str, Any]]:
    path = ROOT / "envs" / env_name / "tasks.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


async def _rollout(
    client: Client, task: dict[str, Any], by_kind: dict[str, Samples], rewards: list[Any]
) -> int:
    """One rollout; returns the number of requests sent."""
    reply = await client.safe_post(by_kind["seed"], "/seed_session", task)
    if reply is None or not reply.ok or reply.cookie is None:
        return 1
    cookie, sent = reply.cookie, 1
    for call in task.get("ground_truth") or []:
        await client.safe_post(by_kind["tool"], f"/{call['name']}", call["arguments"], cookie)
        if sent == 1 and "first_tool" in by_kind and by_kind["tool"].server_ms:
            by_kind["first_tool"].server_ms.append(by_kind["tool"].server_ms[-1])
        sent += 1
    verdict = await client.safe_post(by_kind["verify"], "/verify", verify_body(task), cookie)
    await client.safe_post(by_kind["close"], "/close_session", {}, cookie)
    if verdict is not None and verdict.ok:
        rewards.append(verdict.body.get("reward"))
    return sent + 2


def verify_body(task: dict[str, Any]) -> dict[str, Any]:
    """The verify request of a rollout whose final answer states every expected output."""
    body = T.verify_body(task)
    text = "Done. " + " ".join(str(x) for x in task.get("expected_outputs") or [])
    body["response"]["output"][0]["content"][0]["text"] = text
    return body


def _fresh() -> dict[str, Samples]:
    return {k: Samples() for k in KINDS}


def _errors(by_kind: dict[str, Samples]) -> tuple[int, str | None]:
    first = next((s.first_error for s in by_kind.values() if s.first_error), None)
    return sum(s.errors for s in by_kind.values()), first


def rollout_traffic(
    url: str,
    env_name: str,
    concurrency: int,
    max_rollouts: int,
    max_seconds: float,
    limit: int | None = None,
) -> dict[str, Any]:
    tasks = env_tasks(env_name, limit)

    async def main() -> dict[str, Any]:
        async with Client(url, limit=concurrency) as client:
            # every task once, one at a time: not timed
            warm: dict[str, Samples] = _fresh()
            warm_rewards: list[Any] = []
            for task in tasks:
                await _rollout(client, task, warm, warm_rewards)
            by_kind: dict[str, Samples] = _fresh()
            rewards: list[Any] = []
            requests = [0]
            order = itertools.cycle(tasks)

            async def one(_i: int) -> None:
                sent = await _rollout(client, next(order), by_kind, rewards)
                requests[0] += sent  # not `+= await`: that reads the counter before awaiting

            elapsed = await bounded(concurrency, max_rollouts, max_seconds, one)
        errors, first = _errors(by_kind)
        return {
            "env": env_name,
            "tasks": len(tasks),
            "concurrency": concurrency,
            "rollouts": len(rewards),
            "requests": requests[0],
            "requests_per_s": round(requests[0] / elapsed, 1),
            "rollouts_per_s": round(len(rewards) / elapsed, 2),
            "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
            "warm_mean_reward": (
                round(sum(warm_rewards) / len(warm_rewards), 4) if warm_rewards else None
            ),
            "errors": errors + _errors(warm)[0],
            "first_error": first or _errors(warm)[1],
            "elapsed_s": round(elapsed, 2),
        }

    return _run(main())


def latency(url: str, env_name: str, passes: int, limit: int | None = None) -> dict[str, Any]:
    """Server-side ms per kind of request over every task, one at a time; pass 1 is warm-up."""
    tasks = env_tasks(env_name, limit)

    async def main() -> dict[str, Any]:
        by_kind: dict[str, Samples] = {**_fresh(), "first_tool": Samples()}
        rewards: list[Any] = []
        async with Client(url, limit=1) as client:
            for task in tasks:
                await _rollout(client, task, _fresh(), [])
            for _ in range(max(1, passes - 1)):
                for task in tasks:
                    await _rollout(client, task, by_kind, rewards)
        out: dict[str, Any] = {"env": env_name, "tasks": len(tasks), "passes": passes}
        for kind, samples in by_kind.items():
            ms = samples.server_ms
            out[kind] = {
                "n": len(ms),
                "errors": samples.errors,
                **{f"p{q}_ms": pct(ms, q) for q in (50, 90, 99)},
            }
        out["mean_reward"] = round(sum(rewards) / len(rewards), 4) if rewards else None
        return out

    return _run(main())


def burst(url: str, env_name: str, n: int, timeout: float) -> dict[str, Any]:
    """n sessions (seeded at c=64, bounded), then n reads in flight at once on n connections."""

    def read_of(t: dict[str, Any]) -> dict[str, Any] | None:
        return next((c for c in t["ground_truth"] if c["name"].startswith(("get_", "find_"))), None)

    task = next(t for t in env_tasks(env_name) if T.seeded_rows(t) and read_of(t) is not None)
    call = read_of(task)
    assert call is not None

    async def main() -> dict[str, Any]:
        seeding, cookies = Samples(), []
        async with Client(url, limit=64) as client:

            async def seed(_i: int) -> None:
                reply = await client.safe_post(seeding, "/seed_session", task)
                if reply is not None and reply.cookie:
                    cookies.append(reply.cookie)

            await bounded(64, n, max(60.0, timeout), seed)
        samples = Samples()
        async with Client(url, limit=0, timeout=timeout, loopback=True) as client:
            started = asyncio.get_running_loop().time()
            await asyncio.gather(
                *(
                    client.safe_post(samples, f"/{call['name']}", call["arguments"], c)
                    for c in cookies
                )
            )
            elapsed = asyncio.get_running_loop().time() - started
            closing = Samples()
            await bounded(
                64,
                len(cookies),
                timeout,
                lambda i: client.safe_post(closing, "/close_session", {}, cookies[i]),
            )
        return {
            "in_flight": len(cookies),
            "seed_errors": seeding.errors,
            "n": len(samples.client_ms),
            "errors": samples.errors + (n - len(cookies)),
            "first_error": samples.first_error or seeding.first_error,
            "p50_ms": pct(samples.client_ms, 50),
            "p99_ms": pct(samples.client_ms, 99),
            "server_p99_ms": pct(samples.server_ms, 99),
            "elapsed_s": round(elapsed, 2),
        }

    return _run(main())
