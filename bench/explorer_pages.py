"""Page loads of the run explorer (`stategym browse`): the runs page at 10,000 and 100,000
sessions and a 50-step rollout page, p50/p99 of whole HTTP requests in process (httpx on the
ASGI app: routing, queries, templates; no socket).

    PYTHONPATH=. python -m bench.explorer_pages               # SQLite, 10k and 100k (≈ 3 min)
    PYTHONPATH=. python -m bench.explorer_pages --sizes 10000 --requests 20   # quicker
    PYTHONPATH=. python -m bench.explorer_pages --postgres    # on $STATEGYM_TEST_PG_URL

The control rows are synthesised (copies of a real verified row: real task and verify JSON,
200 task ids with 8 families and 5 difficulties, rewards 0 / 0.5 / 1 / unverified, one second
apart); the rollout page is a real retail session with 50 logged calls, 6 of them writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert, select

from app.cli.browse import browse_app, explorer_for
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from app.storage.control_schema import sessions_table, task_digest, task_text
from app.storage.sqlite.control import open_sqlite_control
from app.storage.task_rows import insert_task_row
from tests.support.rollouts import load_tasks, response_object

REPO = Path(__file__).resolve().parents[1]
SECRET = "bench-explorer-secret-0123456789abcdef"
TASK = {t["task_id"]: t for t in load_tasks(REPO / "envs/retail/tasks.jsonl")}["retail-044"]


async def _rollout(settings: Settings, steps: int) -> str:
    """One retail session with `steps` logged calls (retail-044's gold calls, repeated)."""
    app = create_app(settings, load_environment("retail"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as c:
            await c.post("/seed_session", json=TASK)
            gold = TASK["ground_truth"]
            outputs = []
            for i in range(steps):
                call = gold[i % len(gold)]
                args = call["arguments"]
                args = json.loads(args) if isinstance(args, str) else args
                r = await c.post(f"/{call['name']}", json=args)
                outputs.append(
                    {
                        "type": "function_call",
                        "call_id": f"c{i}",
                        "name": call["name"],
                        "arguments": json.dumps(args),
                    }
                )
                outputs.append(
                    {"type": "function_call_output", "call_id": f"c{i}", "output": r.text}
                )
            verified = await c.post(
                "/verify", json={**TASK, "response": response_object(outputs, "done")}
            )
            await c.post("/close_session", json={})
            return str(verified.json()["session_id"])


def _control(settings: Settings) -> Any:
    """The control store of `settings`' backend (a SQLite file, or a PostgreSQL schema)."""
    if settings.database_url is None:
        return open_sqlite_control(settings.data_dir / "control.sqlite")
    from app.storage.postgres.control import open_pg_control
    from app.storage.postgres.db import SchemaNames, make_engine

    engine = make_engine(settings.database_url, pool_size=1)
    return open_pg_control(engine, SchemaNames(settings.pg_schema_prefix).control)


def synthesise(settings: Settings, n: int, seed: int = 7) -> None:
    """`n` control rows copied from the real one, varied in task, reward and time."""
    control = _control(settings)
    try:
        with control.engine.begin() as conn:
            model = conn.execute(select(sessions_table)).first()
            assert model is not None
            base = dict(model._mapping)
            task = control.get(base["id"]).task
            rng = random.Random(seed)
            families = ["cancel", "return", "exchange", "lookup", "modify_address",
                        "modify_items", "refuse_other_customer", "multi_cancel"]  # fmt: skip
            digests = []  # one task row per synthetic task, as seeds store them
            for t in range(200):
                text = task_text(
                    {
                        **task,
                        "task_id": f"retail-syn-{t:03d}",
                        "family": families[t % 8],
                        "difficulty": 1 + t % 5,
                    }
                )
                digests.append(task_digest(base["env"], text))
                row = {"digest": digests[-1], "env": base["env"], "task_json": text}
                insert_task_row(conn, {**row, "created_at": base["created_at"]})
            start = base["created_at"] - timedelta(seconds=n + 10)
            batch = []
            for i in range(n):
                t = rng.randrange(200)
                reward = rng.choice([0.0, 0.5, 1.0, 1.0, None])
                row = {
                    **base,
                    "id": uuid.uuid4().hex,
                    "task_id": f"retail-syn-{t:03d}",
                    "created_at": start + timedelta(seconds=i),
                    "reward": reward,
                    "status": "closed" if reward is not None else "open",
                    "verify_json": base["verify_json"] if reward is not None else None,
                    "task_digest": digests[t],
                }
                batch.append(row)
                if len(batch) == 5000:
                    conn.execute(insert(sessions_table), batch)
                    batch = []
            if batch:
                conn.execute(insert(sessions_table), batch)
        if settings.database_url is not None:
            # What autovacuum does soon after a bulk insert: without it the visibility map is
            # empty and PostgreSQL reads the table instead of the covering index.
            from sqlalchemy import create_engine

            from app.storage.backend import sync_pg_url

            schema = f"{settings.pg_schema_prefix}_control"
            plain = create_engine(sync_pg_url(settings.database_url), isolation_level="AUTOCOMMIT")
            try:
                with plain.connect() as conn:
                    conn.exec_driver_sql(f'VACUUM ANALYZE "{schema}".sessions')
            finally:
                plain.dispose()
    finally:
        control.dispose()


async def _measure(settings: Settings, paths: dict[str, str], requests: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with explorer_for(settings) as (x, ds):
        if ds is not None:
            await ds.invoke_startup()
        transport = httpx.ASGITransport(app=browse_app(x, ds, settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            for name, path in paths.items():
                # Every figure reads the filtered set again, except the one named "cached".
                x.queries.summary_ttl = 3600.0 if "cached" in name else 0.0
                first = await c.get(path)  # warm: the task fields cache, the gold cache
                assert first.status_code == 200, (path, first.text[:300])
                times, cpu = [], []
                for _ in range(requests):
                    t0, c0 = time.perf_counter(), time.process_time()
                    r = await c.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)  # all threads: load-proof
                    assert r.status_code == 200
                times.sort()
                out[name] = {
                    "p50_ms": round(statistics.median(times), 1),
                    "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 1),
                    "cpu_p50_ms": round(statistics.median(cpu), 1),
                    "requests": requests,
                    "bytes": len(first.content),
                }
                print(
                    f"  {name:<34} p50 {out[name]['p50_ms']:>7.1f} ms  "
                    f"p99 {out[name]['p99_ms']:>7.1f} ms  "
                    f"cpu p50 {out[name]['cpu_p50_ms']:>7.1f} ms  "
                    f"({len(first.content)} bytes)"
                )
    return out


@contextmanager
def _backend(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Settings of the backend to measure: none for SQLite; a fresh PostgreSQL prefix, dropped
    at the end, with --postgres."""
    if not args.postgres:
        yield {}
        return
    from tests.conftest import PG_URL, drop_pg_schemas, new_pg_prefix

    prefix = new_pg_prefix()
    try:
        yield {"database_url": PG_URL, "pg_schema_prefix": prefix, "pg_schema_pool": 0}
    finally:
        drop_pg_schemas(prefix)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="Session counts (comma list).")
    parser.add_argument("--requests", type=int, default=50, help="Requests per page.")
    parser.add_argument("--steps", type=int, default=50, help="Calls in the rollout page.")
    parser.add_argument("--postgres", action="store_true", help="On $STATEGYM_TEST_PG_URL.")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="JSON dir.")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="bench-explorer-") as tmp, _backend(args) as extra:
        data_dir = Path(tmp) / "data"
        settings = Settings(data_dir=data_dir, secret_key=SECRET, **extra)
        results["backend"] = "postgres" if extra else "sqlite"
        sid = asyncio.run(_rollout(settings, args.steps))
        have = 1
        for size in (int(s) for s in args.sizes.split(",")):
            synthesise(settings, size - have)
            have = size
            print(f"{size} sessions:")
            paths = {
                "runs page (newest first)": "/",
                "runs page, next page (summary cached)": "/?offset=50",
                "runs page, one task": "/?task=retail-syn-007",
                "runs page, family + reward<1": "/?family=cancel&reward_max=0.99",
                "runs page, sorted by reward, p.20": "/?sort=reward&offset=950",
                f"rollout page ({args.steps} steps)": f"/rollouts/{sid}",
                f"orders at step {args.steps // 2}": f"/rollouts/{sid}/tables/orders?step="
                f"{args.steps // 2}",
            }
            results[str(size)] = asyncio.run(_measure(settings, paths, args.requests))
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.out / f"explorer-{stamp}.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
