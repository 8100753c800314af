"""The cold path: never-seen tasks seeded and verified once each, over HTTP, one request at a time.

    PYTHONPATH=. python -m bench.cold_path [--tasks FILE.jsonl] [-n 200] [--think-ms 0]
                                           [--root CHECKOUT] [--group 8 [--epochs 2]]
                                           [--warm-n N] [--alternate R] [--against CHECKOUT]
                                           [--json]

`FILE.jsonl` defaults to `$STATEGYM_BENCH_TASKS` or generates 500 retail tasks once
(`stategym tasks generate --env retail --count 500 --seed 5`) into the temp dir. A real server
(`stategym serve` from `--root`, default this checkout; one worker, retention `delete_on_close`)
on a fresh data dir; per task: seed (cold: the task was never seen), with `--think-ms` a pause
(the agent's first turn), its gold calls, verify (the first of the task), close; a second seed
and close; a third seed (warm), its gold calls, verify (warm), close. Reported: p50/p99 of each,
server-side (X-Process-Time) and client-side (request sent to answer read; the cold seed's over
the warm seed's as the ratio), and the bytes left in the data dir per distinct task once every
session is closed, by kind (snapshots, seed files of a `--root` before 2026-12-05, gold,
templates, control database).
With `--group G`: GRPO-shaped traffic instead, each task's G rollouts at
once (two tasks' groups in flight), rollouts/s over the `-n` never-seen tasks against the 48
shipped retail tasks, warm, in the same groups; with `--epochs E` the distinct tasks are run E
times (a training run's epochs), each epoch's rollouts/s and server CPU per rollout reported.
With `--alternate R` (instead of `--epochs`) both servers are up at once and the two kinds of
traffic alternate in R rounds, so the machine's drift during the run falls on both alike.
With `--against CHECKOUT` (one request at a time) a second server runs from CHECKOUT and each
task goes to both in turn: a before/after under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.client import Client, Samples
from bench.phases import pct
from bench.rollout import verify_body
from bench.servers import ROOT, ServerProcess, _wait_healthy, free_port

KINDS = ("cold_seed", "first_verify", "second_seed", "warm_seed", "warm_verify", "tool", "close")


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


def _start(root: Path, data_dir: Path) -> ServerProcess:
    """`stategym serve` from the checkout at `root` (another worktree gives the before figure in
    the same run), one worker, retention delete_on_close."""
    port = free_port()
    argv = [sys.executable, "-m", "app", "serve", "--env", "retail", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--data-dir", str(data_dir), "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(root), "STATEGYM_LOG_LEVEL": "warning"}
    env["STATEGYM_RETENTION"] = "delete_on_close"
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "server.log"
    with open(log_path, "wb") as log:  # cwd=root: `-m app` imports the checkout at `root`
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=log)
    server = ServerProcess("stategym-cold", proc, port, data_dir, log_path)
    _wait_healthy(server, 120)
    return server


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


async def _rollout(
    client: Client,
    task: dict[str, Any],
    kinds: dict[str, Samples],
    seed_kind: str,
    verify_kind: str,
    think_ms: float,
) -> Any:
    """Seed, (think), the gold calls, verify, close; the verify's reward (None if it failed)."""
    seeded = await client.safe_post(kinds[seed_kind], "/seed_session", task)
    if seeded is None or seeded.cookie is None:
        return None
    cookie = seeded.cookie
    if think_ms:  # the agent's first turn (an LLM call) before its first tool call
        await asyncio.sleep(think_ms / 1000)
    for call in task.get("ground_truth") or []:
        await client.safe_post(kinds["tool"], f"/{call['name']}", call["arguments"], cookie)
    verdict = await client.safe_post(kinds[verify_kind], "/verify", verify_body(task), cookie)
    await client.safe_post(kinds["close"], "/close_session", {}, cookie)
    return verdict.body.get("reward") if verdict is not None and verdict.ok else None


async def _task(
    client: Client,
    task: dict[str, Any],
    kinds: dict[str, Samples],
    rewards: list[Any],
    think_ms: float = 0,
) -> None:
    """One never-seen task: its first rollout, a second seed and close, a warm rollout."""
    rewards.append(await _rollout(client, task, kinds, "cold_seed", "first_verify", think_ms))
    # The second seed of a task (before 2026-12-05 it wrote the task's seed file).
    again = await client.safe_post(kinds["second_seed"], "/seed_session", task)
    if again is not None and again.cookie is not None:
        await client.safe_post(kinds["close"], "/close_session", {}, again.cookie)
    await _rollout(client, task, kinds, "warm_seed", "warm_verify", 0)


async def _run(
    url: str, rows: list[dict[str, Any]], rewards: list[Any], think_ms: float = 0
) -> dict[str, Samples]:
    kinds = {k: Samples() for k in KINDS}
    async with Client(url, limit=4) as client:
        for task in rows:
            await _task(client, task, kinds, rewards, think_ms)
    return kinds


Side = tuple[dict[str, Samples], list[Any]]


async def _run_against(
    urls: list[str], warm_up: list[dict[str, Any]], rows: list[dict[str, Any]], think_ms: float
) -> list[Side]:
    """`_run` on several servers at once, each task on each server in turn (the order rotated
    from task to task), so the machine's load falls on every side alike; the warm-up tasks go
    through the same clients (their connections are open before the first measured seed)."""
    sides: list[Side] = [({k: Samples() for k in KINDS}, []) for _ in urls]
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, limit=4)) for url in urls]
        for client in clients:
            for task in warm_up:
                await _task(client, task, {k: Samples() for k in KINDS}, [])
        for i, task in enumerate(rows):
            order = list(range(len(urls)))
            for j in order[i % len(order) :] + order[: i % len(order)]:
                kinds, rewards = sides[j]
                await _task(clients[j], task, kinds, rewards, think_ms)
    return sides


async def _groups(url: str, rows: list[dict[str, Any]], group: int) -> tuple[int, float, int]:
    """GRPO-shaped traffic: per task, `group` whole rollouts at once, then the next task, two
    tasks' groups in flight; (rollouts, seconds, errors)."""
    kinds = {k: Samples() for k in KINDS}
    rewards: list[Any] = []
    queue = list(rows)
    started = time.perf_counter()
    async with Client(url, limit=4 * group) as client:

        async def lane() -> None:
            while queue:
                task = queue.pop(0)
                jobs = [
                    _rollout(client, task, kinds, "cold_seed", "first_verify", 0)
                    for _ in range(group)
                ]
                rewards.extend(await asyncio.gather(*jobs))

        await asyncio.gather(lane(), lane())
    seconds = time.perf_counter() - started
    return len(rewards), seconds, sum(s.errors for s in kinds.values())


def _server_cpu_s(server: ServerProcess) -> tuple[float, float]:
    """User and system CPU seconds of the server and its workers so far (/proc)."""
    user = system = 0
    for pid in server.pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, system = user + int(fields[11]), system + int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def _timed_groups(server: ServerProcess, rows: list[dict[str, Any]], group: int) -> dict[str, Any]:
    user, system = _server_cpu_s(server)
    n, seconds, errors = asyncio.run(_groups(server.url, rows, group))
    user_after, system_after = _server_cpu_s(server)
    per_rollout = 1000 / max(n, 1)
    return {
        "rollouts": n,
        "seconds": round(seconds, 2),
        "rollouts_per_s": round(n / seconds, 1),
        "server_cpu_ms_per_rollout": round(
            per_rollout * (user_after - user + system_after - system), 2
        ),
        "server_system_ms_per_rollout": round(per_rollout * (system_after - system), 2),
        "errors": errors,
    }


def grpo(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rollouts/s of never-seen tasks in groups vs. the 48 shipped tasks, warm, in groups; with
    `--epochs E`, the same distinct tasks again E-1 times on the same server (a training run's
    next epochs: each task revisited after every other one was seen)."""
    out: dict[str, Any] = {"root": args.root, "group": args.group, "tasks": len(rows)}
    shipped = [json.loads(x) for x in (ROOT / "envs" / "retail" / "tasks.jsonl").open()]
    for name, tasks, warm in (("warm_48", shipped, True), ("cold_distinct", rows, False)):
        data_dir = Path(tempfile.mkdtemp(prefix="stategym-grpo-"))
        server = _start(Path(args.root), data_dir)
        try:
            if warm:  # every snapshot and gold built first
                asyncio.run(_groups(server.url, tasks, 1))
            n = args.warm_n or len(rows)  # the warm rate needs fewer rollouts than 10,000 tasks
            picked = (tasks * (n // len(tasks) + 1))[:n] if warm else tasks
            out[name] = _timed_groups(server, picked, args.group)
            for epoch in range(2, args.epochs + 1) if not warm else ():
                out[f"epoch_{epoch}"] = _timed_groups(server, tasks, args.group)
        finally:
            server.stop()
    warm_rate = out["warm_48"]["rollouts_per_s"]
    out["cold_over_warm"] = round(out["cold_distinct"]["rollouts_per_s"] / warm_rate, 2)
    for epoch in range(2, args.epochs + 1):
        out[f"epoch_{epoch}_over_warm"] = round(
            out[f"epoch_{epoch}"]["rollouts_per_s"] / warm_rate, 2
        )
    return out


def grpo_alternated(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`grpo` with both servers up and the traffic alternated in `args.alternate` rounds (a warm
    chunk, a never-seen chunk, the order swapped each round): the machine's drift over a run
    (+-15 % between two runs minutes apart, bench/history/cold_path.md) then falls on both sides
    alike."""
    shipped = [json.loads(x) for x in (ROOT / "envs" / "retail" / "tasks.jsonl").open()]
    n_warm = args.warm_n or len(rows)
    warm_rows = (shipped * (n_warm // len(shipped) + 1))[:n_warm]
    rounds = args.alternate
    servers: dict[str, ServerProcess] = {}
    runs: dict[str, list[dict[str, Any]]] = {"warm_48": [], "cold_distinct": []}
    try:
        for name in runs:
            servers[name] = _start(Path(args.root), Path(tempfile.mkdtemp(prefix="stategym-grpo-")))
        asyncio.run(_groups(servers["warm_48"].url, shipped, 1))  # every snapshot and gold built
        for i in range(rounds):
            chunks = {
                "warm_48": warm_rows[i * n_warm // rounds : (i + 1) * n_warm // rounds],
                "cold_distinct": rows[i * len(rows) // rounds : (i + 1) * len(rows) // rounds],
            }
            for name in sorted(runs, reverse=i % 2 == 1):
                runs[name].append(_timed_groups(servers[name], chunks[name], args.group))
    finally:
        for server in servers.values():
            server.stop()
    out: dict[str, Any] = {"root": args.root, "group": args.group, "tasks": len(rows)}
    out["rounds"] = rounds
    for name, parts in runs.items():
        n = sum(p["rollouts"] for p in parts)
        out[name] = {
            "rollouts": n,
            "rollouts_per_s": round(n / sum(p["seconds"] for p in parts), 1),
            "server_cpu_ms_per_rollout": round(
                sum(p["server_cpu_ms_per_rollout"] * p["rollouts"] for p in parts) / max(n, 1), 2
            ),
            "errors": sum(p["errors"] for p in parts),
        }
    out["cold_over_warm"] = round(
        out["cold_distinct"]["rollouts_per_s"] / out["warm_48"]["rollouts_per_s"], 3
    )
    out["cold_over_warm_by_round"] = [
        round(c["rollouts_per_s"] / w["rollouts_per_s"], 2)
        for w, c in zip(runs["warm_48"], runs["cold_distinct"], strict=True)
    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks")
    parser.add_argument("-n", type=int, default=200, help="distinct tasks (never seen before)")
    parser.add_argument(
        "--think-ms", type=float, default=0, help="pause after each cold seed (the agent's turn)"
    )
    parser.add_argument("--root", default=str(ROOT), help="checkout the server runs from")
    parser.add_argument(
        "--group", type=int, default=0, help="GRPO mode: rollouts per task at once (e.g. 8)"
    )
    parser.add_argument(
        "--epochs", type=int, default=1, help="GRPO mode: passes over the same distinct tasks"
    )
    parser.add_argument(
        "--warm-n",
        type=int,
        default=0,
        help="with --group: groups of the 48 shipped tasks timed warm (default: as many as -n)",
    )
    parser.add_argument(
        "--alternate",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="with --group: both servers up, warm and never-seen chunks alternated in ROUNDS",
    )
    parser.add_argument(
        "--against",
        metavar="CHECKOUT",
        help="a second server from CHECKOUT, up at the same time: each task on both in turn",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lines = _tasks(args.tasks).read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()][: args.n]
    if args.group:
        out = grpo_alternated(args, rows) if args.alternate else grpo(args, rows)
        print(json.dumps(out, indent=None if args.json else 2))
        return
    if args.against:
        print(json.dumps(against(args, rows), indent=None if args.json else 2))
        return
    data_dir = Path(tempfile.mkdtemp(prefix="stategym-cold-"))
    server = _start(Path(args.root), data_dir)
    try:
        # The template is built at start-up; one task outside the measured set warms the code
        # paths (imports, statement caches) without seeing any measured task.
        asyncio.run(_run(server.url, rows[-1:], []))
        rewards: list[Any] = []
        measured = rows[:-1] if len(rows) > 1 else rows
        kinds = asyncio.run(_run(server.url, measured, rewards, args.think_ms))
        rss = server.rss_mb()
    finally:
        server.stop()
    disk = _bytes_by_kind(data_dir)
    n = len(rows)
    per_task = {k: round(v / 1024 / n, 1) for k, v in sorted(disk.items())}
    kept = ("snapshots", "gold", "sessions")  # per task, for ever (no bound)
    result: dict[str, Any] = {
        "root": args.root,
        "tasks": n,
        "think_ms": args.think_ms,
        "errors": sum(s.errors for s in kinds.values()),
        "first_error": next((s.first_error for s in kinds.values() if s.first_error), None),
        "reward_1": sum(1 for r in rewards if r == 1),
        "verified": sum(1 for r in rewards if r is not None),
        "rss_mb": round(rss, 1),
        "disk_kb_per_task_by_kind": per_task,
        # What stays per distinct task with no bound (snapshot and gold files, sessions left).
        "disk_kb_kept_per_distinct_task": round(sum(disk.get(k, 0) for k in kept) / 1024 / n, 1),
        # Everything task-related, with the seed files a `--root` before 2026-12-05 kept.
        "disk_kb_per_distinct_task_with_seed_files": round(
            sum(disk.get(k, 0) for k in (*kept, "seed_files")) / 1024 / n, 1
        ),
    }
    for name, samples in kinds.items():
        if samples.server_ms:
            result[f"{name}_server_ms"] = _p50_p99(samples.server_ms)
        if samples.client_ms:
            result[f"{name}_client_ms"] = _p50_p99(samples.client_ms)
    result.update(_cold_seed_client(kinds))
    print(json.dumps(result, indent=None if args.json else 2))


def against(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`--against CHECKOUT`: a server from `--root` and one from CHECKOUT up at once, every task
    run on both in turn (`_run_against`); the latency figures of each side."""
    roots = {"root": args.root, "against": args.against}
    servers: dict[str, ServerProcess] = {}
    try:
        for name, root in roots.items():
            data_dir = Path(tempfile.mkdtemp(prefix=f"stategym-cold-{name}-"))
            servers[name] = _start(Path(root), data_dir)
        measured = rows[:-1] if len(rows) > 1 else rows
        urls = [servers[name].url for name in roots]
        sides = asyncio.run(_run_against(urls, rows[-1:], measured, args.think_ms))
    finally:
        for server in servers.values():
            server.stop()
    out: dict[str, Any] = {"tasks": len(measured), "think_ms": args.think_ms}
    for (name, root), (kinds, rewards) in zip(roots.items(), sides, strict=True):
        side: dict[str, Any] = {"checkout": root}
        side["errors"] = sum(s.errors for s in kinds.values())
        side["reward_1"] = sum(1 for r in rewards if r == 1)
        for kind in ("cold_seed", "first_verify", "warm_seed"):
            side[f"{kind}_server_ms"] = _p50_p99(kinds[kind].server_ms)
            side[f"{kind}_client_ms"] = _p50_p99(kinds[kind].client_ms)
        side.update(_cold_seed_client(kinds))
        out[name] = side
    return out


def _p50_p99(values: list[float]) -> dict[str, float]:
    return {"p50": round(pct(values, 50) or 0.0, 2), "p99": round(pct(values, 99) or 0.0, 2)}


COLD_SEED_CLIENT_LIMIT_MS = 15.0  # a never-seen task's first seed, as the client waits for it


def _cold_seed_client(kinds: dict[str, Samples]) -> dict[str, Any]:
    """The never-seen task's first seed as the client sees it, against the baseline measured in
    the same run on the same server: the warm seed (the task's third), same request, same body."""
    cold, warm = kinds["cold_seed"].client_ms, kinds["warm_seed"].client_ms
    if not cold or not warm:
        return {}
    return {
        "cold_seed_client_over_warm": {
            q: round((pct(cold, p) or 0.0) / (pct(warm, p) or 1.0), 2)
            for q, p in (("p50", 50), ("p99", 99))
        },
        "cold_seed_client_max_ms": round(max(cold), 2),
        "cold_seed_client_limit_ms": COLD_SEED_CLIENT_LIMIT_MS,
        "cold_seed_client_over_limit": sum(1 for v in cold if v > COLD_SEED_CLIENT_LIMIT_MS),
    }


if __name__ == "__main__":
    main()
