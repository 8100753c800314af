"""`python -m bench.targets` (`make bench-targets`): the HTTP targets of issues 20 and 36, a table.

Issue 36 restates issue 20's burst (client p99 <= 2x the lean server's in the same run, not
<= 1 s) and PostgreSQL ratio (>= 0.6, not 0.5); its server CPU per rollout (<= 12 ms) is
`bench/cpu_split.py`'s figure, and the rollout-traffic ratio below stays issue 20's.

Real servers on 127.0.0.1, one uvicorn worker each, started one at a time (2 shared cores):
StateGym per environment, the lean baseline (bench/lean_server.py) for every environment, and
StateGym on PostgreSQL for retail when one answers at $STATEGYM_BENCH_PG_URL. The load generator
(aiohttp) runs in its own process. Ratios compare figures of the same run.

    python -m bench.targets                 # full (≈ 6-10 min on 2 cores)
    python -m bench.targets --quick         # a few rollouts per phase (the smoke test)
    python -m bench.targets --only rollout  # one group: rollout, latency, burst, postgres
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import rollout
from bench.servers import ServerProcess, start_lean, start_stategym, template_of
from bench.suite import LoadGen, log

RESULTS = Path(__file__).resolve().parent / "results"
ALL_ENVS = ("retail", "airline", "ledger", "sql", "workplace")
LEAN_ENVS = ("retail", "airline", "ledger", "sql", "workplace")
GROUPS = ("rollout", "latency", "burst", "postgres")


@dataclass(frozen=True)
class Config:
    envs: tuple[str, ...] = ALL_ENVS
    concurrency: int = 32
    rollouts: int = 4_000
    rollout_seconds: float = 20
    latency_passes: int = 4
    latency_tasks: int | None = None  # None: every task (rollout traffic too)
    burst: int = 2_000
    burst_timeout: float = 60
    pg_rollout_seconds: float = 20


QUICK = Config(
    envs=("retail", "airline"),
    concurrency=4,
    rollouts=12,
    rollout_seconds=10,
    latency_passes=2,
    latency_tasks=4,
    burst=20,
    burst_timeout=30,
    pg_rollout_seconds=8,
)


def _settle() -> None:
    """Write back dirty pages before a timed phase. StateGym's rollout traffic leaves 1-2 GB of
    session files in the page cache, which would otherwise be written back while the next phase
    (either server's) is timed. Every phase starts from a written-back cache."""
    os.sync()


def _with(server: ServerProcess, fn: Any) -> Any:
    try:
        return fn(server)
    finally:
        server.stop()


def run(cfg: Config, groups: tuple[str, ...], work: Path) -> dict[str, Any]:
    res: dict[str, Any] = {"config": asdict(cfg), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    res["load_average"] = os.getloadavg()
    gen = LoadGen()
    try:
        if "rollout" in groups or "latency" in groups:
            res["rollout"], res["latency"] = {}, {}
            for env in cfg.envs:
                sg = start_stategym(work / f"sg-{env}", env_name=env, max_open_sessions=2_048)
                template = template_of(sg, env)
                entry: dict[str, Any] = {}

                def stategym(
                    s: ServerProcess, env: str = env, entry: dict[str, Any] = entry
                ) -> None:
                    if "rollout" in groups:
                        log(f"rollout traffic {env}: stategym")
                        _settle()
                        entry["stategym"] = gen(
                            rollout.rollout_traffic,
                            s.url,
                            env,
                            cfg.concurrency,
                            cfg.rollouts,
                            cfg.rollout_seconds,
                            cfg.latency_tasks,
                        )
                    if "latency" in groups and env == "retail":
                        log("latency retail: stategym")
                        _settle()
                        res["latency"]["stategym"] = gen(
                            rollout.latency, s.url, env, cfg.latency_passes, cfg.latency_tasks
                        )

                _with(sg, stategym)
                if env in LEAN_ENVS:
                    lean = start_lean(work / f"lean-{env}", env, template)

                    def lean_run(
                        s: ServerProcess, env: str = env, entry: dict[str, Any] = entry
                    ) -> None:
                        if "rollout" in groups:
                            log(f"rollout traffic {env}: lean")
                            _settle()
                            entry["lean"] = gen(
                                rollout.rollout_traffic,
                                s.url,
                                env,
                                cfg.concurrency,
                                cfg.rollouts,
                                cfg.rollout_seconds,
                                cfg.latency_tasks,
                            )
                        if "latency" in groups and env == "retail":
                            log("latency retail: lean")
                            _settle()
                            res["latency"]["lean"] = gen(
                                rollout.latency, s.url, env, cfg.latency_passes, cfg.latency_tasks
                            )

                    _with(lean, lean_run)
                if entry:
                    sgr, lr = entry.get("stategym", {}), entry.get("lean", {})
                    if sgr.get("requests_per_s") and lr.get("requests_per_s"):
                        entry["ratio"] = round(sgr["requests_per_s"] / lr["requests_per_s"], 3)
                    res["rollout"][env] = entry
        if "burst" in groups:
            log(f"burst: {cfg.burst} sessions, {cfg.burst} requests in flight")
            _settle()
            sg = start_stategym(work / "sg-burst", max_open_sessions=2_048)
            template = template_of(sg, "retail")
            res["burst"] = _with(
                sg, lambda s: gen(rollout.burst, s.url, "retail", cfg.burst, cfg.burst_timeout)
            )
            # The same burst on the lean server: how far this harness (one client process, one
            # uvicorn worker, 2,000 connections at once on the same cores) gets at all.
            log("burst: lean")
            _settle()
            lean = start_lean(work / "lean-burst", "retail", template)
            res["burst"]["lean"] = _with(
                lean, lambda s: gen(rollout.burst, s.url, "retail", cfg.burst, cfg.burst_timeout)
            )
        if "postgres" in groups:
            res["postgres"] = postgres(gen, cfg, work)
    finally:
        gen.close()
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return res


def postgres(gen: LoadGen, cfg: Config, work: Path) -> dict[str, Any]:
    """Retail on PostgreSQL beside SQLite, same run: warm seed p50 and rollout traffic."""
    from bench import pg

    prefix = "b" + secrets.token_hex(4)
    extra = {"STATEGYM_DATABASE_URL": pg.PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": prefix}
    out: dict[str, Any] = {"pg_url": pg.PG_URL.split("@")[-1]}
    try:
        for backend, env_vars in (("sqlite", {}), ("postgres", extra)):
            log(f"postgres group: {backend}")
            _settle()
            try:
                server = pg.start_server(backend, work / f"pg-{backend}", env_vars)
            except RuntimeError as exc:
                return {**out, "skipped": str(exc)[-300:]}

            def both(s: ServerProcess, backend: str) -> dict[str, Any]:
                latency = gen(rollout.latency, s.url, "retail", 2, cfg.latency_tasks)
                concurrency = 16 if cfg.concurrency > 16 else cfg.concurrency
                # Steady state: every task's schema pool at its high-water mark (untimed
                # traffic at the timed concurrency, then the pools quiet; a run pays it once).
                gen(
                    rollout.rollout_traffic,
                    s.url,
                    "retail",
                    concurrency,
                    cfg.rollouts,
                    min(pg.WARM_S, cfg.pg_rollout_seconds),
                    cfg.latency_tasks,
                )
                settled = pg._pool_settled(prefix) if backend == "postgres" else None
                return {
                    "latency": latency,
                    "pool_settle": settled,
                    "rollout": gen(
                        rollout.rollout_traffic,
                        s.url,
                        "retail",
                        concurrency,
                        cfg.rollouts,
                        cfg.pg_rollout_seconds,
                        cfg.latency_tasks,
                    ),
                }

            out[backend] = _with(server, functools.partial(both, backend=backend))
    finally:
        try:
            pg._drop_prefix(prefix)
        except Exception as exc:  # no server: nothing was created
            out.setdefault("cleanup", f"{type(exc).__name__}: {str(exc)[:200]}")
    return out


# --- the table -----------------------------------------------------------------------------------
def _f(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.2f}{unit}" if isinstance(value, float) else f"{value}{unit}"


def rows(res: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, value, target, pass/fail/info) rows."""
    out: list[tuple[str, str, str, str]] = []

    def check(name: str, value: Any, target: str, ok: bool | None) -> None:
        verdict = "info" if ok is None else ("PASS" if ok else "FAIL")
        out.append((name, value if isinstance(value, str) else _f(value), target, verdict))

    for env, entry in (res.get("rollout") or {}).items():
        sgr, lr = entry.get("stategym", {}), entry.get("lean", {})
        detail = (
            f"{_f(sgr.get('requests_per_s'))} vs lean {_f(lr.get('requests_per_s'))} req/s"
            if lr
            else f"{_f(sgr.get('requests_per_s'))} req/s (no lean server)"
        )
        ratio = entry.get("ratio")
        check(
            f"rollout traffic {env}, c={res['config']['concurrency']}: StateGym/lean",
            f"{_f(ratio)} ({detail})" if ratio is not None else detail,
            ">= 0.25" if env in LEAN_ENVS else "-",
            (ratio >= 0.25) if ratio is not None else None,
        )
        for who, r in (("StateGym", sgr), ("lean", lr)):
            if r and (r.get("errors") or r.get("mean_reward") != 1.0):
                check(
                    f"  {env} {who}: errors / mean reward",
                    f"{r.get('errors')} / {r.get('mean_reward')}",
                    "0 / 1.0",
                    False,
                )
    targets = {"seed": 1.5, "tool": 1.0, "verify": 3.0, "close": 1.0}
    lat = (res.get("latency") or {}).get("stategym")
    lean_lat = (res.get("latency") or {}).get("lean") or {}
    if lat:
        for kind, limit in targets.items():
            k = lat[kind]
            p50, p90, p99 = k["p50_ms"], k["p90_ms"], k["p99_ms"]
            lean_p50 = (lean_lat.get(kind) or {}).get("p50_ms")
            check(
                f"{kind} server p50 (retail, warm, n={k['n']}; p90 {_f(p90)}; "
                f"lean p50 {_f(lean_p50)})",
                p50,
                f"<= {limit} ms",
                p50 is not None and p50 <= limit,
            )
            check(
                f"{kind} server p99 / p50",
                p99 / p50 if p50 and p99 else None,
                "<= 4",
                bool(p50 and p99 and p99 <= 4 * p50),
            )
    first = (lat or {}).get("first_tool")
    if first and first.get("p50_ms") is not None:
        check(
            f"  first tool call of a rollout, server p50 / p90 (n={first['n']})",
            f"{_f(first['p50_ms'])} / {_f(first['p90_ms'])} ms",
            "-",
            None,
        )
    b = res.get("burst")
    if b:
        lean_burst = b.get("lean") or {}
        lean_p99 = lean_burst.get("p99_ms")
        ratio = b["p99_ms"] / lean_p99 if lean_p99 and b.get("p99_ms") is not None else None
        check(
            f"burst: {b['in_flight']} in flight on {b['in_flight']} sessions, client p99 "
            f"{_f(b['p99_ms'] / 1000 if b.get('p99_ms') is not None else None)} s / lean's "
            f"{_f(lean_p99 / 1000 if lean_p99 else None)} s ({lean_burst.get('errors')} errors)",
            round(ratio, 2) if ratio is not None else "no lean run",
            "<= 2x lean",
            ratio <= 2 if ratio is not None else None,
        )
        check("burst: errors", b["errors"], "0", b["errors"] == 0)
    pg = res.get("postgres")
    if pg and "skipped" in pg:
        check("postgres", "skipped: " + pg["skipped"][:60], "-", None)
    elif pg and "postgres" in pg:
        seed = pg["postgres"]["latency"]["seed"]["p50_ms"]
        lite = pg["sqlite"]["latency"]["seed"]["p50_ms"]
        check(
            f"PostgreSQL warm seed server p50 (SQLite {_f(lite)})",
            seed,
            "<= 10 ms",
            seed is not None and seed <= 10,
        )
        a, b2 = (
            pg["postgres"]["rollout"]["rollouts_per_s"],
            pg["sqlite"]["rollout"]["rollouts_per_s"],
        )
        ratio = a / b2 if a and b2 else None
        check(
            "PostgreSQL rollouts/s / SQLite (retail)",
            f"{_f(ratio)} ({_f(a)} vs {_f(b2)})",
            ">= 0.6",
            ratio is not None and ratio >= 0.6,
        )
    return out


def table(res: dict[str, Any]) -> str:
    body = rows(res)
    widths = [max(len(r[i]) for r in body + [("figure", "value", "target", "")]) for i in range(4)]
    lines = [
        " | ".join(
            h.ljust(w) for h, w in zip(("figure", "value", "target", ""), widths, strict=True)
        )
    ]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    load = res.get("load_average")
    if load:
        lines.append(
            f"load average at start: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.targets", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few rollouts per phase (smoke)")
    parser.add_argument("--only", choices=GROUPS, action="append", help="run only these groups")
    parser.add_argument("--envs", help="comma-separated environments for the rollout group")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else Config()
    if args.envs:
        cfg = Config(**{**asdict(cfg), "envs": tuple(args.envs.split(","))})
    work = Path(tempfile.mkdtemp(prefix="stategym-targets-"))
    started = time.perf_counter()
    try:
        res = run(cfg, tuple(args.only or GROUPS), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"targets-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    print(table(res))
    print(f"\nwall {res['wall_s']} s; wrote {path}")
    return res


if __name__ == "__main__":
    main()
