"""Verify latency on retail: gold state cached vs cold, in process, direct and through HTTP (ASGI).

    cd /work/main && PYTHONPATH=. python bench/verify_bench.py [--runs 40]

cold   = a fresh gold cache per call: replay the gold solution, dump gold and seed states, compare.
cached = the gold state (and seed state) already in memory: dump the final state, diff, score.
http   = POST /verify through the ASGI app with the gold cached (adds routing, JSON, the
         control-db write and the thread hop).
The session's final state is the gold state in every case (a successful rollout).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from app.core.tasks import task_from_data
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from app.storage.sqlite.store import Store
from app.verify.gold import GoldCache, replay
from app.verify.session_verify import verify_state

REPO = Path(__file__).resolve().parent.parent
TASK_IDS = ("retail-005", "retail-020", "retail-033", "retail-040", "retail-046")
SECRET = "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz"


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "n": len(samples),
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def _rows() -> list[dict[str, Any]]:
    path = REPO / "envs" / "retail" / "tasks.jsonl"
    rows = {r["task_id"]: r for r in map(json.loads, path.read_text().splitlines())}
    return [rows[t] for t in TASK_IDS]


def _answer(row: dict[str, Any]) -> dict[str, Any]:
    text = "Done. " + " ".join(row.get("expected_outputs") or [])
    return {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        ]
    }


def _direct(data_dir: Path, runs: int) -> dict[str, dict[str, float]]:
    env = load_environment("retail")
    store = Store(data_dir, env)
    rows = _rows()
    tasks = [task_from_data(r) for r in rows]
    finals = [replay(env, store.snapshot(t), t) for t in tasks]  # session engines at the gold state
    warm = GoldCache(store, capacity=64)
    timings: dict[str, list[float]] = {"cold": [], "cached": []}
    # CPU time of the verifying thread: robust to other processes sharing the 2 cores.
    cpu_times: dict[str, list[float]] = {"cold": [], "cached": []}
    for i in range(runs):
        k = i % len(tasks)
        for mode in ("cold", "cached"):
            gold = GoldCache(store, capacity=64) if mode == "cold" else warm
            if mode == "cached" and i < len(tasks):
                gold.get(tasks[k])  # warm-up, not timed
            started, cpu = time.perf_counter(), time.thread_time()
            result = verify_state(
                env=env,
                gold=gold,
                engine=finals[k][1],
                task=tasks[k],
                response=_answer(rows[k]),
                diff_limit=20,
            )
            timings[mode].append(time.perf_counter() - started)
            cpu_times[mode].append(time.thread_time() - cpu)
            assert result["reward"] == 1.0, result.get("failure_reason")
    for conn, engine, _ in finals:
        engine.dispose()
        conn.close()
    return {
        mode: {**_stats(samples), "cpu_median_ms": _stats(cpu_times[mode])["median_ms"]}
        for mode, samples in timings.items()
    }


async def _http(data_dir: Path, runs: int) -> dict[str, float]:
    env = load_environment("retail")
    app = create_app(Settings(data_dir=data_dir, secret_key=SECRET), env)
    samples = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        for row in _rows():
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                await client.post("/seed_session", json=row)
                for call in row["ground_truth"]:
                    await client.post(f"/{call['name']}", json=call["arguments"])
                body = {**row, "response": _answer(row)}
                await client.post("/verify", json=body)  # warms the gold cache
                for _ in range(max(1, runs // len(TASK_IDS))):
                    started = time.perf_counter()
                    r = await client.post("/verify", json=body)
                    samples.append(time.perf_counter() - started)
                    assert r.status_code == 200 and r.json()["reward"] == 1.0, r.text[:500]
    return _stats(samples)


def run(report: Callable[[str], Any] | None = None, runs: int = 40) -> dict[str, Any]:
    """Measure; `report` (e.g. print) receives one line per result. Returns the figures."""
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
        results: dict[str, Any] = _direct(Path(tmp) / "direct", runs)
        results["http_cached"] = asyncio.run(_http(Path(tmp) / "http", runs))
    results["tasks"] = list(TASK_IDS)
    if report is not None:
        head = ("verify (retail)", "n", "median ms", "p99 ms", "max ms", "cpu med ms")
        report("{:<16}{:>4}{:>11}{:>9}{:>9}{:>12}".format(*head))
        for mode in ("cold", "cached", "http_cached"):
            s = results[mode]
            cpu = s.get("cpu_median_ms", "-")
            cols = (mode, s["n"], s["median_ms"], s["p99_ms"], s["max_ms"], cpu)
            report("{:<16}{:>4}{:>11}{:>9}{:>9}{:>12}".format(*cols))
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="timed verifies per mode")
    run(print, parser.parse_args().runs)
