"""`python -m bench suite` (`make bench`): every phase against real servers over HTTP, then a table,
JSON and a PNG (figures: bench/history/suite.md)."""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import phases, report
from bench import tasks as T
from bench.servers import ServerProcess, disk_mb, start_baseline, start_lean, start_stategym

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Config:
    cold: int = 10
    warm: int = 200
    cold_large: int = 3
    warm_large: int = 50
    concurrencies: tuple[int, ...] = (1, 64, 512)
    tool_requests: int = 6_000
    tool_seconds: float = 8
    verify_cold: int = 10
    verify_cached: int = 100
    rollout_concurrency: int = 32
    rollouts: int = 3_000
    rollout_seconds: float = 15
    live_sessions: int = 10_000
    capacity_seconds: float = 150
    sample: int = 200
    in_flight: int = 2_000
    max_open_sessions: int = 2_048


QUICK = Config(
    cold=2,
    warm=5,
    cold_large=1,
    warm_large=2,
    concurrencies=(1, 4),
    tool_requests=20,
    tool_seconds=5,
    verify_cold=1,
    verify_cached=3,
    rollout_concurrency=2,
    rollouts=4,
    rollout_seconds=10,
    live_sessions=30,
    capacity_seconds=30,
    sample=5,
    in_flight=20,
    max_open_sessions=16,
)


class LoadGen:
    """The load generator lives in its own (spawned) process; phases are submitted to it."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(1, mp_context=ctx)

    def __call__(self, fn: Any, *args: Any) -> Any:
        return self.pool.submit(fn, *args).result(timeout=900)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def tool_phases(run: LoadGen, url: str, task: dict[str, Any], cfg: Config) -> list[Any]:
    out = []
    for kind in ("read", "write"):
        for c in cfg.concurrencies:
            out.append(
                run(phases.tool_load, url, task, kind, c, cfg.tool_requests, cfg.tool_seconds)
            )
            log(f"  {kind} c={c}: {out[-1].get('per_s')} req/s, p99 {out[-1].get('p99_ms')} ms")
    return out


def stategym_phases(run: LoadGen, sg: ServerProcess, cfg: Config, res: dict[str, Any]) -> None:
    task, large = T.rollout_task(), T.large_task(5_000 if cfg is not QUICK else 50)
    log("seed latency")
    res["seed"] = {
        "retail": run(phases.seed_latency, sg.url, task, cfg.cold, cfg.warm),
        "large": run(phases.seed_latency, sg.url, large, cfg.cold_large, cfg.warm_large),
    }
    log("tool calls")
    res["tools"] = {"stategym": tool_phases(run, sg.url, task, cfg)}
    log("verify")
    res["verify"] = run(phases.verify_latency, sg.url, task, cfg.verify_cold, cfg.verify_cached)
    log("rollouts, 1 worker")
    res["rollouts"] = {
        "stategym-1w": run(
            phases.rollouts,
            sg.url,
            task,
            cfg.rollout_concurrency,
            cfg.rollouts,
            cfg.rollout_seconds,
        )
    }
    log(f"capacity: seeding {cfg.live_sessions} sessions")
    seeded = run(phases.seed_many, sg.url, task, cfg.live_sessions, cfg.capacity_seconds)
    cookies = seeded.pop("cookies")
    cap: dict[str, Any] = {
        "seeding": seeded,
        "live_sessions": len(cookies),
        "max_open_sessions": cfg.max_open_sessions,
    }
    cap["sample"] = run(phases.sample_calls, sg.url, task, cookies, cfg.sample)
    cap.update(rss_mb=sg.rss_mb(), open_fds=sg.open_fds(), disk_mb=disk_mb(sg.data_dir))
    res["capacity"] = cap
    log(f"burst: {cfg.in_flight} in flight")
    res["burst"] = run(phases.burst, sg.url, task, cookies[-cfg.in_flight :], cfg.in_flight)
    res["capacity"]["rss_mb_after_burst"] = sg.rss_mb()


def in_process_verify() -> Any:
    """bench/verify_bench.py (another engineer's) when present: its run() figure, as is."""
    if importlib.util.find_spec("bench.verify_bench") is None:
        return None
    from bench import verify_bench

    try:
        return verify_bench.run()
    except Exception as exc:  # its failure must not sink the HTTP figures
        return {"error": f"{type(exc).__name__}: {exc}"}


def postgres_figures(quick: bool) -> Any:
    """bench/pg.py beside SQLite's figures: clone strategies, seed, tools, rollouts, 1 vs 2
    replicas; skipped (with the reason) when no PostgreSQL answers."""
    from bench import pg

    try:
        return pg.run(quick=quick)
    except Exception as exc:  # no server, or a failure: the SQLite figures still stand
        log(f"postgres figures skipped: {type(exc).__name__}: {exc}")
        return {"skipped": f"{type(exc).__name__}: {str(exc)[:300]}"}


def ratios(res: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    base = {(t["tool"], t["concurrency"]): t for t in res["tools"].get("baseline", [])}
    for server, label in (("stategym", ""), ("stategym-2w", " (stategym 2 workers)")):
        for t in res["tools"].get(server, []):
            b = base.get((t["tool"], t["concurrency"]))
            if b and b.get("per_s") and t.get("per_s"):
                name = f"{t['tool']} tool throughput c={t['concurrency']}{label}"
                out[name] = t["per_s"] / b["per_s"]
    roll = res["rollouts"]
    for base_name, label in (("baseline-1w", ""), ("lean-1w", " vs lean")):
        b = roll.get(base_name, {}).get("rollouts_per_s")
        for name in ("stategym-1w", "stategym-2w"):
            if b and roll.get(name, {}).get("rollouts_per_s"):
                out[f"rollouts/s {name}{label}"] = roll[name]["rollouts_per_s"] / b
    lean = {(t["tool"], t["concurrency"]): t for t in res["tools"].get("lean", [])}
    for t in res["tools"].get("stategym", []):
        b = lean.get((t["tool"], t["concurrency"]))
        if b and b.get("per_s") and t.get("per_s"):
            out[f"{t['tool']} tool throughput c={t['concurrency']} vs lean"] = (
                t["per_s"] / b["per_s"]
            )
    return out


def run_all(cfg: Config, out_dir: Path, keep: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="stategym-bench-"))
    res: dict[str, Any] = {"config": cfg.__dict__, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    run = LoadGen()
    servers: list[ServerProcess] = []
    try:
        sg = start_stategym(work / "sg1", workers=1, max_open_sessions=cfg.max_open_sessions)
        servers.append(sg)
        stategym_phases(run, sg, cfg, res)
        template = next((sg.data_dir / "templates" / "retail").glob("*.sqlite"))
        sg.stop()
        log("rollouts, 2 workers")
        sg2 = start_stategym(work / "sg2", workers=2, max_open_sessions=cfg.max_open_sessions)
        servers.append(sg2)
        task = T.rollout_task()
        res["rollouts"]["stategym-2w"] = run(
            phases.rollouts,
            sg2.url,
            task,
            cfg.rollout_concurrency,
            cfg.rollouts,
            cfg.rollout_seconds,
        )
        # State in files lets a second worker serve the same sessions; the dict baseline keeps
        # state in one process's memory and cannot use the second core this way.
        log("tool calls, 2 workers")
        res["tools"]["stategym-2w"] = tool_phases(run, sg2.url, task, cfg)
        sg2.stop()
        log("baseline")
        base = start_baseline(work / "baseline", template)
        servers.append(base)
        res["seed"]["baseline"] = run(phases.seed_latency, base.url, task, 0, cfg.warm)
        res["tools"]["baseline"] = tool_phases(run, base.url, task, cfg)
        res["rollouts"]["baseline-1w"] = run(
            phases.rollouts,
            base.url,
            task,
            cfg.rollout_concurrency,
            cfg.rollouts,
            cfg.rollout_seconds,
        )
        base.stop()
        log("lean baseline")
        lean = start_lean(work / "lean", "retail", template)
        servers.append(lean)
        res["seed"]["lean"] = run(phases.seed_latency, lean.url, task, 0, cfg.warm)
        res["tools"]["lean"] = tool_phases(run, lean.url, task, cfg)
        res["rollouts"]["lean-1w"] = run(
            phases.rollouts,
            lean.url,
            task,
            cfg.rollout_concurrency,
            cfg.rollouts,
            cfg.rollout_seconds,
        )
        lean.stop()
        res["ratios"] = ratios(res)
        verify_figure = in_process_verify()
        if verify_figure is not None:
            res["verify_in_process"] = verify_figure
        res["postgres"] = postgres_figures(quick=cfg == QUICK)
    finally:
        for server in servers:
            server.stop()
        run.close()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench suite", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few requests per phase (smoke)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for JSON and PNG")
    parser.add_argument("--keep", action="store_true", help="keep the servers' data folders")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else Config()
    started = time.perf_counter()
    res = run_all(cfg, args.out, args.keep)
    res["wall_s"] = round(time.perf_counter() - started, 1)
    json_path, png_path = report.write(res, args.out, time.strftime("%Y%m%d-%H%M%S"))
    print(report.table(res))
    print(f"\nwall {res['wall_s']} s; wrote {json_path} and {png_path}")
    return res


if __name__ == "__main__":
    main()
