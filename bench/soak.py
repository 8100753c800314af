"""A training-shaped soak: many distinct generated tasks, each seeded as a GRPO group (G rollouts
at once, then never again), gold rollouts through real HTTP against one real server.

    PYTHONPATH=. python -m bench.soak --tasks 1000 --rollouts 8000 --group 8 --concurrency 64
    PYTHONPATH=. python -m bench.soak --retention delete_on_close --database-url postgresql+psycopg://...
    PYTHONPATH=. python -m bench.soak ... --root /path/to/checkout   # its server: a before figure
    PYTHONPATH=. python -m bench.soak --rollouts 100000 --max-minutes 110 --progress-s 300

Every `--sample-s` seconds it reads the server's RSS, open files, data-dir and control-database
size; at the end it splits the rollouts into tenths by completion and reports, per tenth,
rollouts/s, the p99 of each operation and the resources at its end, then what the issue asks:
the last tenth against the first tenth past warm-up (flat within 10 %?), and the CPU seconds of
the server (and PostgreSQL's backends of its database) per rollout. Output: a table,
`bench/results/soak-<stamp>.json` (with the verify answers of rollouts that scored wrong) and
a PNG of the series.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.servers import ROOT, ServerProcess, disk_mb, start_stategym

OPS = ("seed", "tool", "verify", "close")
# What each sample reads; database_mb, catalog_mb and schemas are PostgreSQL's (0 on SQLite).
RESOURCES = ("rss_mb", "fds", "data_dir_mb", "control_mb", "database_mb", "catalog_mb", "schemas")
# The system catalog's tables a schema's create, rename and drop write (their indexes and TOAST
# included in the size): their bloat slows every name lookup of every session.
CATALOG = (
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_depend",
    "pg_namespace",
    "pg_constraint",
    "pg_index",
    "pg_trigger",
    "pg_attrdef",
    "pg_statistic",
    "pg_sequence",
)


def generate(env: str, count: int, seed: int, out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        cmd = [sys.executable, "-m", "app", "tasks", "generate", "--env", env]
        cmd += ["--count", str(count), "--seed", str(seed), str(out)]
        subprocess.run(cmd, cwd=ROOT, check=True)
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


async def rollout(
    client: httpx.AsyncClient,
    task: dict[str, Any],
    timings: list[tuple[float, str, float]],
    noop: bool = False,
    failures: list[dict[str, Any]] | None = None,
) -> str:
    """One rollout on its own cookie jar, gold or (`noop`) no tool call at all; (finish time, op,
    seconds) appended per request. Returns "ok" (gold scored 1), "noop" (no-op scored 0),
    "error" (a request failed) or "not_1" (gold scored below 1, or a no-op above 0); what such
    rollouts' requests answered goes to `failures` (the first 20)."""
    client.cookies.clear()

    async def timed(op: str, path: str, body: Any) -> httpx.Response:
        started = time.perf_counter()
        answer = await client.post(path, json=body)
        timings.append((time.monotonic(), op, time.perf_counter() - started))
        return answer

    answers = [("seed", await timed("seed", "/seed_session", task))]
    for call in [] if noop else task["ground_truth"]:
        answers.append((call["name"], await timed("tool", f"/{call['name']}", call["arguments"])))
    verified = await timed("verify", "/verify", {**task, "response": {"output": []}})
    answers += [("verify", verified), ("close", await timed("close", "/close_session", {}))]
    if any(answer.status_code != 200 for _, answer in answers):
        if failures is not None and len(failures) < 20:
            failures.append({"task_id": task.get("task_id"), "requests": _shown(answers)})
        return "error"
    reward = verified.json().get("reward")
    if noop:
        outcome = "noop" if reward == 0.0 else "not_1"
    else:
        outcome = "ok" if reward == 1.0 else "not_1"
    if outcome == "not_1" and failures is not None and len(failures) < 20:
        # Every answer: a tool error is a 200 too (its body says so), and it explains a 0.
        failures.append(
            {"task_id": task.get("task_id"), "verify": verified.json(), "requests": _shown(answers)}
        )
    return outcome


def _shown(answers: list[tuple[str, httpx.Response]]) -> list[dict[str, Any]]:
    """What each request of a failed rollout answered (status, the body's start)."""
    return [{"op": op, "status": a.status_code, "body": a.text[:600]} for op, a in answers]


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each live process in `pids` (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / tick
    return out


def backend_pids(database_url: str | None) -> list[int]:
    """The PostgreSQL server processes serving the soak's database (same machine), if any."""
    if not database_url:
        return []
    from sqlalchemy import create_engine, text

    from app.storage.backend import sync_pg_url

    engine = create_engine(sync_pg_url(database_url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                )
            )
            return [int(r[0]) for r in rows]
    finally:
        engine.dispose()


def database_size(database_url: str | None) -> tuple[float, float, int]:
    """PostgreSQL: the soak database's size (MB, its control tables included), its catalog's
    (`CATALOG`, MB) and its schema count, what grows there instead of the data dir; SQLite:
    zeros."""
    if not database_url:
        return 0.0, 0.0, 0
    from sqlalchemy import create_engine, text

    from app.storage.backend import sync_pg_url

    engine = create_engine(sync_pg_url(database_url))
    try:
        with engine.connect() as conn:
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar()
            schemas = conn.execute(text("SELECT count(*) FROM pg_namespace")).scalar()
            catalog = conn.execute(
                text(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                    "WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relname = ANY(:names)"
                ),
                {"names": list(CATALOG)},
            ).scalar()
            return int(size or 0) / 2**20, int(catalog or 0) / 2**20, int(schemas or 0)
    finally:
        engine.dispose()


def control_db_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("control*") if p.is_file())


async def drive(
    server: ServerProcess, tasks: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    timings: list[tuple[float, str, float]] = []
    finished: list[tuple[float, str]] = []
    samples: list[dict[str, float]] = []
    failures: list[dict[str, Any]] = []
    # CPU seconds per process, the largest reading (the server's and, on PostgreSQL, the
    # backends serving its database): a figure other jobs on the machine do not inflate.
    cpu: dict[int, float] = {}
    started = time.monotonic()
    progress_at = [float(args.progress_s)]
    deadline = started + args.max_minutes * 60 if args.max_minutes else float("inf")
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)

    async def sampler() -> None:
        while True:
            samples.append(
                {
                    "t": time.monotonic() - started,
                    "done": len(finished),
                    "rss_mb": server.rss_mb(),
                    "fds": server.open_fds(),
                    "data_dir_mb": disk_mb(server.data_dir),
                    "control_mb": control_db_bytes(server.data_dir) / 2**20,
                }
            )
            own = server.pids()
            pids = own + await asyncio.to_thread(backend_pids, args.database_url)
            for pid, seconds in cpu_seconds(pids).items():
                cpu[pid] = max(cpu.get(pid, 0.0), seconds)
            samples[-1]["cpu_s"] = sum(cpu.values())
            samples[-1]["server_cpu_s"] = sum(cpu.get(pid, 0.0) for pid in own)
            size, catalog, schemas = await asyncio.to_thread(database_size, args.database_url)
            samples[-1].update(database_mb=size, catalog_mb=catalog, schemas=schemas)
            if args.progress_s and samples[-1]["t"] >= progress_at[0]:
                progress_at[0] += args.progress_s
                s = samples[-1]
                print(
                    f"soak: {s['t'] / 60:.1f} min, {s['done']} rollouts, RSS {s['rss_mb']:.0f} MB, "
                    f"fds {s['fds']}, data dir {s['data_dir_mb']:.0f} MB, control "
                    f"{s['control_mb']:.1f} MB, database {s['database_mb']:.0f} MB (catalog "
                    f"{s['catalog_mb']:.1f}), {s['schemas']} schemas",
                    file=sys.stderr,
                    flush=True,
                )
            await asyncio.sleep(args.sample_s)

    # One client, one connection, per concurrency slot: httpcore's pool scans every connection
    # for every request, so one shared pool of 64 cost the load generator more CPU than the
    # server (bench/history/soak.md, "The soak's load generator").
    slots = [
        httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits)
        for _ in range(args.concurrency)
    ]
    clients: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
    for client in slots:
        clients.put_nowait(client)
    try:

        async def one(task: dict[str, Any], noop: bool) -> None:
            client = await clients.get()  # its cookies are cleared at the rollout's start
            try:
                ok = await rollout(client, task, timings, noop, failures)
            except httpx.HTTPError as exc:  # a timeout or a dropped connection
                ok = "error"
                if len(failures) < 20:
                    failures.append({"task_id": task.get("task_id"), "exception": repr(exc)})
            finally:
                clients.put_nowait(client)
            finished.append((time.monotonic(), ok))

        watcher = asyncio.create_task(sampler())
        groups = args.rollouts // args.group
        pending: set[asyncio.Task[None]] = set()
        for i in range(groups):
            if time.monotonic() > deadline:  # --max-minutes: no new group; the started ones end
                print(f"soak: --max-minutes reached after {i} groups", file=sys.stderr)
                break
            task = tasks[i % len(tasks)]
            for j in range(args.group):
                # Every `noop_every`-th rollout fails (a no-op): what `keep_failed` keeps.
                noop = bool(args.noop_every) and (i * args.group + j) % args.noop_every == 0
                pending.add(asyncio.create_task(one(task, noop)))
            # Keep about two windows of work queued: a group starts as an earlier one drains.
            while len(pending) > 2 * args.concurrency:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.gather(*pending)
        pids = server.pids() + await asyncio.to_thread(backend_pids, args.database_url)
        for pid, seconds in cpu_seconds(pids).items():
            cpu[pid] = max(cpu.get(pid, 0.0), seconds)
        watcher.cancel()
    finally:
        for client in slots:
            await client.aclose()
    return {
        "timings": timings,
        "finished": finished,
        "samples": samples,
        "started": started,
        "failures": failures,
        "cpu_s": sum(cpu.values()),
    }


def tenths(run: dict[str, Any]) -> list[dict[str, Any]]:
    finished = sorted(run["finished"])
    n = len(finished)
    out = []
    for d in range(10):
        part = finished[d * n // 10 : (d + 1) * n // 10]
        if not part:
            continue
        t0 = finished[d * n // 10 - 1][0] if d else run["started"]
        t1 = part[-1][0]
        ops = {
            op: sorted(s for t, o, s in run["timings"] if o == op and t0 < t <= t1) for op in OPS
        }
        sample = min(run["samples"], key=lambda s: abs(s["t"] - (t1 - run["started"])))
        # CPU per rollout within the tenth: between the samples nearest its ends.
        start = min(run["samples"], key=lambda s: abs(s["t"] - (t0 - run["started"])))
        spent = sample.get("cpu_s", 0.0) - start.get("cpu_s", 0.0)
        own = sample.get("server_cpu_s", 0.0) - start.get("server_cpu_s", 0.0)
        done = sample["done"] - start["done"]
        out.append(
            {
                "tenth": d + 1,
                "rollouts_per_s": len(part) / max(t1 - t0, 1e-9),
                "errors": sum(outcome == "error" for _, outcome in part),
                "not_1": sum(outcome == "not_1" for _, outcome in part),
                "noop": sum(outcome == "noop" for _, outcome in part),
                **{
                    f"{op}_p99_ms": (v[min(len(v) - 1, int(len(v) * 0.99))] * 1000 if v else 0.0)
                    for op, v in ops.items()
                },
                **{k: sample[k] for k in RESOURCES},
                "cpu_ms_per_rollout": 1000 * spent / done if done > 0 else 0.0,
                # The server's processes alone (on PostgreSQL the rest is its backends').
                "server_cpu_ms_per_rollout": 1000 * own / done if done > 0 else 0.0,
            }
        )
    return out


def verdict(rows: list[dict[str, Any]], kept_failed: bool) -> dict[str, Any]:
    """The last tenth against the second (the first holds the warm-up). Under `keep_failed` the
    data dir and control database grow with every kept (failed) rollout by design: they are
    judged per kept rollout instead (the growth of the second tenth's rate, within 10 %)."""
    first, last = rows[1], rows[-1]
    grows = ("data_dir_mb", "control_mb") if kept_failed else ()
    flat = {
        k: last[k] <= first[k] * 1.10 + (1 if k == "fds" else 0)
        for k in RESOURCES
        if k not in grows and k != "schemas"  # the schema pool's fill moves; the size is what grows
    }
    kept = {}
    if kept_failed:
        kept_between = sum(r["noop"] for r in rows[2:])
        for k in grows:
            per = (last[k] - first[k]) / max(kept_between, 1)
            kept[f"{k}_per_kept_rollout_kb"] = per * 1024
    return {
        **kept,
        "throughput_kept": last["rollouts_per_s"] / first["rollouts_per_s"],
        "throughput_ok": last["rollouts_per_s"] >= 0.9 * first["rollouts_per_s"],
        "flat": flat,
        "errors": sum(r["errors"] for r in rows),
        "rewards_not_1": sum(r["not_1"] for r in rows),
        "noop_rollouts": sum(r["noop"] for r in rows),
    }


def plot(rows: list[dict[str, Any]], samples: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6))
    t = [s["t"] for s in samples]
    for ax, key, label in zip(
        axes.flat,
        ("rss_mb", "fds", "data_dir_mb", "done"),
        ("RSS (MB)", "open files", "data dir (MB)", "rollouts done"),
        strict=True,
    ):
        ax.plot(t, [s[key] for s in samples])
        ax.set_title(label)
        ax.set_xlabel("s")
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="retail")
    parser.add_argument("--tasks", type=int, default=1000, help="distinct generated tasks")
    parser.add_argument("--task-seed", type=int, default=5)
    parser.add_argument("--rollouts", type=int, default=8000)
    parser.add_argument("--group", type=int, default=8, help="rollouts per task, seeded at once")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--retention", default="delete_on_close")
    parser.add_argument(
        "--noop-every", type=int, default=0, help="every N-th rollout is a no-op (scores 0)"
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="checkout the server runs from (a before figure)"
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any server setting, e.g. session_records_max=1000 (STATEGYM_NAME=VALUE)",
    )
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=0,
        help="start no new group after this long (0: none); the report covers what finished",
    )
    parser.add_argument(
        "--progress-s", type=float, default=0, help="print a progress line this often (0: never)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = generate(
        args.env,
        args.tasks,
        args.task_seed,
        args.out / f"soak-tasks-{args.env}-{args.tasks}-{args.task_seed}.jsonl",
    )
    extra = {"STATEGYM_RETENTION": args.retention, "STATEGYM_STATS_LOG_SECONDS": "60"}
    if args.database_url:
        extra["STATEGYM_DATABASE_URL"] = args.database_url
    for setting in args.setting:
        name, _, value = setting.partition("=")
        extra[f"STATEGYM_{name.upper()}"] = value
    with tempfile.TemporaryDirectory(prefix="stategym-soak-") as tmp:
        server = start_stategym(
            Path(tmp) / "data", env_name=args.env, extra_env=extra, root=args.root
        )
        try:
            run = asyncio.run(drive(server, tasks, args))
        finally:
            server.stop()
    rows = tenths(run)
    result = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "tenths": rows,
        "verdict": verdict(rows, args.retention == "keep_failed"),
        # Server (+ PostgreSQL backends) CPU per rollout: the load-independent cost.
        "cpu_ms_per_rollout": 1000 * run["cpu_s"] / max(len(run["finished"]), 1),
        "failures": run["failures"],
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.out / f"soak-{stamp}.json").write_text(json.dumps(result, indent=1))
    plot(rows, run["samples"], args.out / f"soak-{stamp}.png")
    header = [
        "tenth",
        "rollouts_per_s",
        "errors",
        *[f"{op}_p99_ms" for op in OPS],
        "rss_mb",
        "fds",
        "data_dir_mb",
        "control_mb",
        *(["database_mb", "catalog_mb", "schemas"] if args.database_url else []),
        "cpu_ms_per_rollout",
        "server_cpu_ms_per_rollout",
    ]
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(f"{r[h]:.1f}" if isinstance(r[h], float) else str(r[h]) for h in header))
    print(json.dumps(result["verdict"]))
    print(json.dumps({"cpu_ms_per_rollout": result["cpu_ms_per_rollout"]}))
    for failure in result["failures"]:
        print(json.dumps(failure)[:2000])
    return result


if __name__ == "__main__":
    main()
