"""PostgreSQL backend figures: how a session schema is cloned, and the HTTP phases on PostgreSQL
beside SQLite's (seed cold/warm, read/write tool calls, rollouts with 1 and 2 replicas).

    PYTHONPATH=. python -m bench.pg [--quick]     # prints JSON; run() returns the same dict
    PYTHONPATH=. python -m bench.pg --ratio keep  # rollouts/s on both backends, CPU per rollout
    PYTHONPATH=. python -m bench.pg --backend-caches  # PostgreSQL CPU, warm vs unseen schemas

Needs a PostgreSQL at $STATEGYM_BENCH_PG_URL (default: the test server on 127.0.0.1:5432);
every schema it creates is under a fresh prefix and dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench import phases
from bench import tasks as T
from bench.servers import ROOT, ServerProcess, _spawn, free_port

PG_URL = os.environ.get(
    "STATEGYM_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
SECRET = "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
# Seconds of untimed rollout traffic at the timed concurrency before a timed run (steady state).
WARM_S = 10.0


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


# --- in process: clone strategies ---------------------------------------------------------------
def clone_strategies(n: int = 7) -> dict[str, Any]:
    """Median ms to make one retail session schema (~6,500 rows, 12 tables) each way."""
    from app.core.tasks import task_from_data
    from app.registry import load_environment
    from app.storage.postgres.db import (
        SchemaNames,
        clone_sql,
        drop_schema_sql,
        in_schema,
        make_engine,
        quoted,
        schema_ddl,
    )
    from app.storage.postgres.store import PgStore
    from app.storage.sqlite.store import Store

    env = load_environment("retail")
    work = Path(tempfile.mkdtemp(prefix="stategym-pgbench-"))
    engine = make_engine(PG_URL, pool_size=2)
    names = SchemaNames("b" + secrets.token_hex(4))
    store = PgStore(Store(work, env), engine, names)
    store.snapshot(task_from_data(T.rollout_task()))
    started = time.perf_counter()
    source, maxima = store.ensure_base()  # every session is a clone of it plus its seed rows
    template_s = time.perf_counter() - started
    md = env.metadata

    def ddl_only(target: str) -> str:
        return f"CREATE SCHEMA {quoted(target)};" + in_schema(schema_ddl(md).full, target)

    def like_all(target: str) -> str:
        # Copies columns, defaults, checks and indexes but no foreign keys, and the defaults
        # still draw from the template's sequences: shown for its speed, not usable as is.
        parts = [f"CREATE SCHEMA {quoted(target)}"]
        for table in md.sorted_tables:
            t = quoted(table.name)
            parts.append(
                f"CREATE TABLE {quoted(target)}.{t} (LIKE {quoted(source)}.{t} INCLUDING ALL)"
            )
            parts.append(f"INSERT INTO {quoted(target)}.{t} SELECT * FROM {quoted(source)}.{t}")
        return ";".join(parts)

    strategies = {
        "models DDL + INSERT..SELECT + setval (used)": lambda t: clone_sql(md, source, t, maxima),
        "models DDL only (no rows)": ddl_only,
        "LIKE .. INCLUDING ALL + INSERT..SELECT (no FKs, shared sequences)": like_all,
    }
    out: dict[str, Any] = {"template_build_ms": round(template_s * 1000, 1)}
    try:
        for label, script in strategies.items():
            times = []
            for _ in range(n):
                target = names.session(secrets.token_hex(16))
                t0 = time.perf_counter()
                with engine.begin() as conn:
                    conn.exec_driver_sql(script(target))
                times.append(time.perf_counter() - t0)
                with engine.begin() as conn:
                    conn.exec_driver_sql(drop_schema_sql(target))
            out[label] = _median_ms(times)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(drop_schema_sql(source))
        engine.dispose()
        shutil.rmtree(work, ignore_errors=True)
    return out


# --- in process: verify ------------------------------------------------------------------------
def verify_in_process(n: int = 10) -> dict[str, Any]:
    """Median ms of a verify (gold cached) after the rollout calls, on each backend."""
    import asyncio

    from app.registry import load_environment
    from app.runtime.sessions import SessionManager
    from app.server.models import parse_seed_body
    from app.settings import Settings

    env, task = load_environment("retail"), T.rollout_task()
    work = Path(tempfile.mkdtemp(prefix="stategym-pgbench-"))
    prefix = "b" + secrets.token_hex(4)

    async def one(settings: Settings) -> float:
        manager = SessionManager(settings, env)
        try:
            session_id = (await manager.seed(parse_seed_body(task))).session_id
            for name, args in T.rollout_calls(task):
                await manager.call_tool(session_id, T.tool(env, name), args)
            await manager.verify(session_id, T.verify_body(task))  # builds the gold
            times = []
            for _ in range(n):
                started = time.perf_counter()
                await manager.verify(session_id, T.verify_body(task))
                times.append(time.perf_counter() - started)
            return _median_ms(times)
        finally:
            await manager.aclose()

    try:
        return {
            "sqlite": asyncio.run(one(Settings(data_dir=work / "sqlite"))),
            "postgres": asyncio.run(
                one(Settings(data_dir=work / "pg", database_url=PG_URL, pg_schema_prefix=prefix))
            ),
        }
    finally:
        _drop_prefix(prefix)
        shutil.rmtree(work, ignore_errors=True)


# --- over HTTP ------------------------------------------------------------------------------------
def start_server(name: str, data_dir: Path, extra: dict[str, str]) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "app", "serve", "--env", "retail", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--data-dir", str(data_dir), "--workers", "1"]
    env = {"STATEGYM_LOG_LEVEL": "warning", "STATEGYM_SECRET_KEY": SECRET, **extra}
    return _spawn(name, argv, data_dir, env, port)


def _drop_prefix(prefix: str) -> None:
    from sqlalchemy import create_engine

    from app.storage.backend import sync_pg_url

    engine = create_engine(sync_pg_url(PG_URL))
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "\\_%",)
        ).all()
        conn.commit()
        # The step-log function's schema last (dropped first it cascades to every trigger).
        for (name,) in sorted(rows, key=lambda row: row[0].endswith("_fn")):
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.commit()
    engine.dispose()


def http_phases(quick: bool) -> dict[str, Any]:
    n_cold, n_warm = (2, 5) if quick else (5, 60)
    tool_n, tool_s = (20, 4) if quick else (2_000, 6)
    roll_c, roll_n, roll_s = (2, 4, 8) if quick else (16, 2_000, 12)
    task = T.rollout_task()
    work = Path(tempfile.mkdtemp(prefix="stategym-pgbench-"))
    prefix = "b" + secrets.token_hex(4)
    pg = {"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": prefix}
    res: dict[str, Any] = {}
    servers: list[ServerProcess] = []
    pool = ProcessPoolExecutor(2)
    try:
        for backend, extra in (("sqlite", {}), ("postgres", pg)):
            server = start_server(f"{backend}-a", work / f"{backend}-a", extra)
            servers.append(server)
            figures: dict[str, Any] = {
                "seed": pool.submit(phases.seed_latency, server.url, task, n_cold, n_warm).result()
            }
            for kind in ("read", "write"):
                for conc in (1, 16):
                    figures[f"tool_{kind}_c{conc}"] = pool.submit(
                        phases.tool_load, server.url, task, kind, conc, tool_n, tool_s
                    ).result()
            one = pool.submit(phases.rollouts, server.url, task, roll_c, roll_n, roll_s)
            figures["rollouts_1_replica"] = one.result()
            if backend == "postgres":
                # A second replica on its own data dir (another host, as far as it knows):
                # the load is split between the two, and their rollouts/s add up.
                other = start_server("postgres-b", work / "postgres-b", extra)
                servers.append(other)
                jobs = [
                    pool.submit(phases.rollouts, url, task, roll_c // 2 or 1, roll_n, roll_s)
                    for url in (server.url, other.url)
                ]
                both = [j.result() for j in jobs]
                figures["rollouts_2_replicas"] = {
                    "rollouts_per_s": round(sum(b["rollouts_per_s"] for b in both), 2),
                    "per_replica": both,
                }
            res[backend] = figures
            for s in servers:
                s.stop()
            servers.clear()
    finally:
        for s in servers:
            s.stop()
        pool.shutdown()
        _drop_prefix(prefix)
        shutil.rmtree(work, ignore_errors=True)
    return res


# --- rollouts/s, PostgreSQL beside SQLite, one run ----------------------------------------------
def _pool_settled(prefix: str, quiet_s: float = 3.0, limit_s: float = 180.0) -> tuple[float, int]:
    """Wait until the server's schema pools stop growing (the first seed of each task starts
    its pool: 48 tasks x 4 clones in the background, ~10-20 s of PostgreSQL CPU that a training
    run pays once); (seconds waited, pooled schemas)."""
    from sqlalchemy import create_engine

    from app.storage.backend import sync_pg_url

    engine = create_engine(sync_pg_url(PG_URL))
    start = last_change = time.monotonic()
    count = -1
    try:
        while time.monotonic() - start < limit_s:
            with engine.connect() as conn:
                now = conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", (prefix + r"\_p\_%",)
                ).scalar()
            if now != count:
                count, last_change = int(now or 0), time.monotonic()
            elif time.monotonic() - last_change >= quiet_s:
                break
            time.sleep(0.25)
    finally:
        engine.dispose()
    return round(time.monotonic() - start, 1), count


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of processes (gone ones count 0)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _backend_pids(app_name: str) -> list[int]:
    """PostgreSQL backends serving connections named `app_name` (the bench server's)."""
    import psycopg

    from app.storage.backend import sync_pg_url

    url = sync_pg_url(PG_URL).replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app_name,)
        )
        return [row[0] for row in rows]


def rollout_ratio(seconds: float = 20, retention: str = "keep", concurrency: int = 16) -> Any:
    """Rollouts/s of retail on SQLite and on PostgreSQL, servers run one after the other in
    this run with the same settings (`retention` on both), and the CPU each rollout costs the
    StateGym server and (PostgreSQL) its database backends."""
    from bench import rollout

    work = Path(tempfile.mkdtemp(prefix="stategym-pgbench-"))
    prefix = "b" + secrets.token_hex(4)
    app_name = f"stategym-bench-{prefix}"
    pg = {
        "STATEGYM_DATABASE_URL": PG_URL,
        "STATEGYM_PG_SCHEMA_PREFIX": prefix,
        "PGAPPNAME": app_name,  # libpq's: finds the server's backends in pg_stat_activity
    }
    out: dict[str, Any] = {"retention": retention, "concurrency": concurrency}
    pool = ProcessPoolExecutor(1)
    try:
        for backend, extra in (("sqlite", {}), ("postgres", pg)):
            extra = {**extra, "STATEGYM_RETENTION": retention}
            server = start_server(backend, work / backend, extra)
            try:  # every task once (templates, gold caches, pools), then measured
                pool.submit(rollout.rollout_traffic, server.url, "retail", 4, 48, 30).result()
                # Then the timed concurrency, untimed, on both backends: more sessions of a
                # task at once than the first pass dip its schema pool and clone; a training
                # run's steady state has those pools at their high-water mark.
                pool.submit(
                    rollout.rollout_traffic, server.url, "retail", concurrency, 10**6, WARM_S
                ).result()
                if backend == "postgres":  # steady state: the schema pools filled once
                    out["pool_settle_s"], out["pooled_schemas"] = _pool_settled(prefix)
                pids = server.pids()
                db = _backend_pids(app_name) if backend == "postgres" else []
                before = (_cpu_s(pids), _cpu_s(db))
                res = pool.submit(
                    rollout.rollout_traffic, server.url, "retail", concurrency, 10**6, seconds
                ).result()
                n = max(res["rollouts"], 1)
                server_s = _cpu_s(pids) - before[0]
                # Backends that ended meanwhile (overflow connections closed) take their CPU
                # with them: only a run whose backends all lasted gives the database's figure.
                lasted = set(db) == set(_backend_pids(app_name)) if db else False
                db_s = _cpu_s(db) - before[1]
                db = db if lasted else []
                out[backend] = {
                    "rollouts_per_s": res["rollouts_per_s"],
                    "rollouts": res["rollouts"],
                    "errors": res["errors"],
                    "mean_reward": res["mean_reward"],
                    "server_cpu_ms_per_rollout": round(server_s * 1000 / n, 1),
                    "db_cpu_ms_per_rollout": round(db_s * 1000 / n, 1) if db else None,
                }
            finally:
                server.stop()
        out["ratio"] = round(
            out["postgres"]["rollouts_per_s"] / max(out["sqlite"]["rollouts_per_s"], 1e-9), 2
        )
        out["load_average"] = os.getloadavg()
    finally:
        pool.shutdown()
        _drop_prefix(prefix)
        shutil.rmtree(work, ignore_errors=True)
    return out


def run(quick: bool = False) -> dict[str, Any]:
    return {
        "pg_url": PG_URL.split("@")[-1],
        "clone": clone_strategies(3 if quick else 7),
        "verify_ms": verify_in_process(3 if quick else 10),
        "http": http_phases(quick),
    }


def archived_reads(n: int = 12) -> dict[str, Any]:
    """Median ms of inspection reads (`tables`, `diff`, `reverify`) of n closed retail sessions,
    kept as schemas and archived (app/storage/postgres/archive.py: each read rebuilds it)."""
    import asyncio

    from app.registry import load_environment
    from app.runtime.inspection import Inspector
    from app.runtime.sessions import SessionManager
    from app.server.models import parse_seed_body
    from app.settings import Settings

    env, task = load_environment("retail"), T.rollout_task()
    work = Path(tempfile.mkdtemp(prefix="stategym-pgbench-"))
    prefix = "b" + secrets.token_hex(4)

    async def reads(archive: bool) -> dict[str, float]:
        settings = Settings(
            data_dir=work / str(archive),
            database_url=PG_URL,
            pg_schema_prefix=prefix,
            pg_schema_pool=1,
            pg_archive_closed=archive,
        )
        manager = SessionManager(settings, env)
        try:
            ids = []
            for _ in range(n):
                session_id = (await manager.seed(parse_seed_body(task))).session_id
                for name, args in T.rollout_calls(task):
                    await manager.call_tool(session_id, T.tool(env, name), args)
                await manager.verify(session_id, T.verify_body(task))
                await manager.close(session_id)
                ids.append(session_id)
            view = manager.backend.view()
            inspector = Inspector(settings.data_dir, manager.control, view, envs={env.name: env})
            times: dict[str, list[float]] = {"tables": [], "diff": [], "reverify": []}
            for session_id in ids:
                record = inspector.record(session_id)
                for name, read in (
                    ("tables", inspector.tables),
                    ("diff", inspector.diff),
                    ("reverify", inspector.reverify),
                ):
                    started = time.perf_counter()
                    read(record)
                    times[name].append(time.perf_counter() - started)
            return {name: _median_ms(values) for name, values in times.items()}
        finally:
            await manager.aclose()

    try:
        return {"kept_schema": asyncio.run(reads(False)), "archived": asyncio.run(reads(True))}
    finally:
        _drop_prefix(prefix)
        shutil.rmtree(work, ignore_errors=True)


def backend_caches(n: int = 300) -> dict[str, Any]:
    """PostgreSQL CPU (the backend's own, /proc) per tool-like transaction (a read, an update its
    step trigger logs, a step row) on one connection: on one warm schema, on schemas the backend
    has not touched yet, and on them again (what a backend pays for a schema it has not cached:
    docs/postgres.md, "Schema renames and the backends' caches")."""
    import asyncio

    import psycopg

    from app.registry import load_environment
    from app.runtime.sessions import SessionManager
    from app.server.models import parse_seed_body
    from app.settings import Settings
    from app.storage.backend import sync_pg_url
    from app.storage.postgres.db import SchemaNames

    env, task = load_environment("retail"), T.rollout_task()
    work = Path(tempfile.mkdtemp(prefix="stategym-pgbench-"))
    prefix = "b" + secrets.token_hex(4)
    settings = Settings(
        data_dir=work, database_url=PG_URL, pg_schema_prefix=prefix, pg_schema_pool=0
    )
    tick = os.sysconf("SC_CLK_TCK")

    async def seed(count: int) -> tuple[SessionManager, list[str]]:
        manager = SessionManager(settings, env)
        ids = [(await manager.seed(parse_seed_body(task))).session_id for _ in range(count)]
        return manager, [SchemaNames(prefix).session(i) for i in ids]

    def cpu_s(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    url = sync_pg_url(PG_URL).replace("postgresql+psycopg://", "postgresql://")
    out: dict[str, Any] = {}

    def measure(schemas: list[str]) -> None:
        with psycopg.connect(url) as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
            conn.commit()

            def timed(label: str, order: list[str]) -> None:
                before = cpu_s(pid)
                for i, schema in enumerate(order):
                    with conn.transaction():
                        conn.execute(f'SET LOCAL search_path TO "{schema}"')
                        conn.execute("SELECT id, stock FROM variants WHERE id = %s", (1 + i % 5,))
                        conn.execute(
                            "UPDATE variants SET stock = stock + 1 WHERE id = %s", (1 + i % 5,)
                        )
                        conn.execute(
                            "INSERT INTO _stategym_steps VALUES ((SELECT coalesce(max(idx), 0) "
                            "+ 1 FROM _stategym_steps), 't', '{}', 'ok', '', '', 0, 0)"
                        )
                out[label] = round((cpu_s(pid) - before) * 1000 / len(order), 2)

            timed("warm-up (one schema)", [schemas[0]] * 50)
            timed("one warm schema, ms/transaction", [schemas[0]] * n)
            timed("60 schemas, first visit, ms/transaction", schemas)
            timed("60 schemas, second visit, ms/transaction", schemas)

    async def main() -> None:
        manager, schemas = await seed(60)
        try:
            measure(schemas)
        finally:
            await manager.aclose()

    try:
        asyncio.run(main())
    finally:
        _drop_prefix(prefix)
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--ratio",
        metavar="RETENTION",
        help="only rollouts/s on both backends, same run, with this retention "
        "(keep, delete_on_close, ...)",
    )
    parser.add_argument("--seconds", type=float, default=20, help="with --ratio")
    parser.add_argument(
        "--archived-reads", action="store_true", help="only inspection reads, kept vs archived"
    )
    parser.add_argument(
        "--backend-caches",
        action="store_true",
        help="only PostgreSQL's CPU per transaction on warm and unseen schemas",
    )
    args = parser.parse_args()
    if args.backend_caches:
        print(json.dumps(backend_caches(), indent=1))
        return
    if args.archived_reads:
        print(json.dumps(archived_reads(), indent=1))
        return
    if args.ratio:
        print(json.dumps(rollout_ratio(args.seconds, args.ratio), indent=1))
        return
    print(json.dumps(run(args.quick), indent=1))


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
