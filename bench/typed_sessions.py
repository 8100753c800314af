"""What NeMo Gym 0.7.0's typed session flow costs next to the legacy one, in process.

    python -m bench.typed_sessions [--env retail] [--n 300] [--backend sqlite|postgres]

Per request kind, the server-side time (ASGI, no network) of: a legacy seed, a typed seed (it
also claims the id in the control database), a repeated typed seed (a retry: answered from the
claim, no database made), a typed close and a legacy close. Every task of the environment is
seeded once before timing, so snapshots are warm. Prints p50/p90/p99 and each typed figure as a
ratio of its legacy twin, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings

SECRET = "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz"


def _typed(row: dict[str, Any], rsid: str) -> dict[str, Any]:
    return {
        "resources_session_id": rsid,
        "episode_id": {"rollout_id": "bench", "attempt": 0},
        "task_id": {"taskset": "bench", "task_id": str(row["task_id"])},
        "task_data": {k: v for k, v in row.items() if k != "responses_create_params"},
    }


async def _timed(call: Callable[[], Awaitable[httpx.Response]]) -> float:
    started = time.perf_counter()
    response = await call()
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text
    return elapsed


def _summary(name: str, ms: list[float], base: list[float] | None) -> str:
    q = statistics.quantiles(ms, n=100)
    ratio = f"{statistics.median(ms) / statistics.median(base):5.2f}x" if base else "    -"
    return f"{name:<22} p50 {q[49]:6.2f} ms  p90 {q[89]:6.2f}  p99 {q[98]:6.2f}  {ratio}"


async def run(env_name: str, n: int, database_url: str | None) -> None:
    env = load_environment(env_name)
    lines = env.tasks_path.read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        extra: dict[str, Any] = {}
        if database_url:
            extra = {"database_url": database_url, "pg_schema_prefix": "b" + uuid.uuid4().hex[:8]}
        app = create_app(Settings(data_dir=Path(tmp), secret_key=SECRET, **extra), env)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
                for row in rows:  # warm every snapshot
                    await client.post("/seed_session", json=row)
                times: dict[str, list[float]] = {
                    k: []
                    for k in (
                        "legacy seed",
                        "typed seed",
                        "typed seed (retry)",
                        "legacy close",
                        "typed close",
                    )
                }
                for i in range(n):
                    row = rows[i % len(rows)]
                    client.cookies.clear()
                    times["legacy seed"].append(
                        await _timed(partial(client.post, "/seed_session", json=row))
                    )
                    times["legacy close"].append(
                        await _timed(partial(client.post, "/close_session", json={}))
                    )
                    client.cookies.clear()
                    body = _typed(row, f"rs-{uuid.uuid4().hex}")
                    times["typed seed"].append(
                        await _timed(partial(client.post, "/seed_session", json=body))
                    )
                    times["typed seed (retry)"].append(
                        await _timed(partial(client.post, "/seed_session", json=body))
                    )
                    close = {k: body[k] for k in ("resources_session_id", "episode_id")}
                    times["typed close"].append(
                        await _timed(partial(client.post, "/close_session", json=close))
                    )
        backend = "postgres" if database_url else "sqlite"
        print(f"{env_name} on {backend}, {n} of each, every task warm; ratio = p50 / legacy p50")
        print(_summary("legacy seed", times["legacy seed"], None))
        for kind in ("typed seed", "typed seed (retry)"):
            print(_summary(kind, times[kind], times["legacy seed"]))
        print(_summary("legacy close", times["legacy close"], None))
        print(_summary("typed close", times["typed close"], times["legacy close"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="retail")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (default: SQLite)")
    args = parser.parse_args()
    asyncio.run(run(args.env, args.n, args.database_url))


if __name__ == "__main__":
    main()
