"""Steps (issue 17) on retail, in process: what the step log costs and what it buys.

    python -m bench.steps [--runs 200] [--pg]

- step log overhead: a write tool call's server time (the manager's `_timed_call`: runner,
  transaction, commit) on a session with the step log vs the same task's session with its step
  triggers dropped (what a call cost before the log), calls interleaved;
- fork: `backend.fork` of a retail session into one child (SQLite: serialise + write the file;
  `--pg`: clone the schema, step log included), and the whole `POST /fork_session` through ASGI;
- rewind of 10 steps: `backend.rewind` of a session 10 writing steps back (`--pg` too);
- step rewards: verify with and without them (gold cached), on a 9-step rollout with 3 writes;
- reverify by replay: `replay_result` of a gold rollout (gold cached), per rollout.
Medians of wall time (and of the thread's CPU time, robust to other load on the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from app.core.tasks import task_from_data
from app.registry import load_environment
from app.runtime.reverify import replay_result
from app.runtime.sessions import SessionManager
from app.server.api import create_app
from app.server.models import parse_seed_body
from app.settings import Settings
from app.verify.session_verify import verify_state
from bench import tasks as T

REPO = Path(__file__).resolve().parent.parent
SECRET = "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
MULTI = "retail-044"  # 9 calls, 3 of them writes
REPLAYED = ("retail-005", "retail-020", "retail-033", "retail-040", "retail-046")


def _rows() -> dict[str, dict[str, Any]]:
    path = REPO / "envs" / "retail" / "tasks.jsonl"
    return {r["task_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _stats(wall: list[float], cpu: list[float] | None = None) -> dict[str, float]:
    out = {"n": len(wall), "p50_ms": round(statistics.median(wall) * 1000, 3)}
    ordered = sorted(wall)
    out["p90_ms"] = round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 3)
    if cpu:
        out["cpu_p50_ms"] = round(statistics.median(cpu) * 1000, 3)
    return out


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.thread_time()
    result = fn()
    return time.perf_counter() - wall, time.thread_time() - cpu, result


def _address(customer: int, i: int) -> dict[str, Any]:
    return {
        "customer_id": customer,
        "line1": f"{i} Bench St",
        "line2": None,
        "city": "Reno",
        "state": "NV",
        "zip": f"{89500 + i % 90}",
        "country": "USA",
    }


def gold_response(row: dict[str, Any], outputs: list[str]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i, (call, out) in enumerate(zip(row["ground_truth"], outputs, strict=True)):
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": out})
    text = "Done. " + " ".join(row.get("expected_outputs") or [])
    items.append(
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    )
    return {"output": items}


def _drop_step_log(conn: Any) -> None:
    """The session as it was before the step log: no step triggers, no `step_log` meta."""
    names = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '_stategym_step_%'"
    ).fetchall()
    for (name,) in names:
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute("DELETE FROM _stategym_meta WHERE key = 'step_log'")


def _drop_pg_step_log(manager: SessionManager, handle: Any) -> None:
    """The same on a PostgreSQL session schema (the function and, with it, every trigger)."""
    with manager.backend.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.exec_driver_sql(f'DROP FUNCTION "{handle.schema}"._stategym_step_log() CASCADE')
        conn.exec_driver_sql(
            f"DELETE FROM \"{handle.schema}\"._stategym_meta WHERE key = 'step_log'"
        )


async def _manager_figures(data_dir: Path, runs: int, pg: bool) -> dict[str, Any]:
    settings = Settings(data_dir=data_dir, secret_key=SECRET)
    if pg:
        from tests.conftest import PG_URL, new_pg_prefix

        settings = Settings(
            data_dir=data_dir,
            secret_key=SECRET,
            database_url=PG_URL,
            pg_schema_prefix=new_pg_prefix(),
        )
    env = load_environment("retail")
    manager = SessionManager(settings, env)
    rows = _rows()
    row = rows[MULTI]
    customer = row["seed"]["rows"]["customers"][0]["id"]
    tool = env.tool_named("update_customer_default_address")
    assert tool is not None
    figures: dict[str, Any] = {}
    try:
        logged = await manager.seed(parse_seed_body(row))
        plain = await manager.seed(parse_seed_body(row))
        handles = {
            "logged": await manager._handle(logged.session_id),
            "plain": await manager._handle(plain.session_id),
        }
        if pg:
            _drop_pg_step_log(manager, handles["plain"])
        else:
            _drop_step_log(handles["plain"].conn)  # type: ignore[attr-defined]
        handles["plain"].logs_steps = False  # type: ignore[attr-defined]
        samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in handles}
        for i in range(runs + 20):
            for name, handle in handles.items():
                wall, cpu, (result, _) = _timed(
                    partial(manager._timed_call, handle, tool, _address(customer, i))
                )
                assert "output" in result, result
                if i >= 20:  # warm-up
                    samples[name][0].append(wall)
                    samples[name][1].append(cpu)
        on, off = _stats(*samples["logged"]), _stats(*samples["plain"])
        figures["write_call"] = {
            "step_log": on,
            "no_step_log": off,
            "overhead_p50": round(on["p50_ms"] / off["p50_ms"] - 1, 3),
            "overhead_cpu_p50": round(on["cpu_p50_ms"] / off["cpu_p50_ms"] - 1, 3),
        }
        # Rewind of 10 steps: 10 writes, then back; repeated.
        handle = handles["logged"]
        base = runs + 20  # the calls above
        wall_s, cpu_s = [], []
        for r in range(max(10, runs // 10)):
            for i in range(10):
                manager._timed_call(handle, tool, _address(customer, 1000 * r + i))
            wall, cpu, undone = _timed(lambda: manager.backend.rewind(handle, base))
            assert undone == 10
            wall_s.append(wall)
            cpu_s.append(cpu)
        figures["rewind_10_steps"] = _stats(wall_s, cpu_s)
        # Fork into one child, storage only.
        parent = await manager.seed(parse_seed_body(row))
        handle = await manager._handle(parent.session_id)
        for i in range(3):
            manager._timed_call(handle, tool, _address(customer, i))
        wall_s, cpu_s, children = [], [], []
        for i in range(runs):
            child = f"{i:032x}"
            wall, cpu, _ = _timed(partial(manager.backend.fork, handle, [child], None))
            wall_s.append(wall)
            cpu_s.append(cpu)
            children.append(child)
        for child in children:
            manager.backend.drop(child)
        figures["fork_storage"] = _stats(wall_s, cpu_s)
        if pg:  # step rewards' added verify time (SQLite's: _verify_figures, in memory)
            figures["verify"] = await _session_verify_figures(manager, row, runs)
    finally:
        await manager.aclose()
        if pg:
            from tests.conftest import drop_pg_schemas

            drop_pg_schemas(settings.pg_schema_prefix or "")
    return figures


async def _session_verify_figures(
    manager: SessionManager, row: dict[str, Any], runs: int
) -> dict[str, Any]:
    """Verify of a live session that played the gold, with and without step rewards (the
    backend's read transaction, gold cached)."""
    env, task = manager.env, task_from_data(row)
    seeded = await manager.seed(parse_seed_body(row))
    handle = await manager._handle(seeded.session_id)
    outputs = []
    for call in row["ground_truth"]:
        result, _ = manager._timed_call(handle, T.tool(env, call["name"]), call["arguments"])
        outputs.append(json.dumps(result, ensure_ascii=False, separators=(",", ":")))
    response = gold_response(row, outputs)
    samples: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
    for i in range(runs // 4 + 3):
        for with_steps in (True, False):

            def work(bind: Any, w: bool = with_steps) -> dict[str, Any]:
                return verify_state(
                    env=env,
                    gold=manager.gold,
                    engine=bind,
                    task=task,
                    response=response,
                    diff_limit=20,
                    with_steps=w,
                )

            wall, cpu, result = _timed(lambda: manager.backend.read(handle, work))
            assert result["reward"] == 1.0 and ("step_rewards" in result) == with_steps
            if i >= 3:
                samples[with_steps][0].append(wall)
                samples[with_steps][1].append(cpu)
    on, off = _stats(*samples[True]), _stats(*samples[False])
    return {
        "with_step_rewards": on,
        "without": off,
        "added_p50_ms": round(on["p50_ms"] - off["p50_ms"], 3),
    }


def _verify_figures(data_dir: Path, runs: int) -> dict[str, Any]:
    """Step rewards' added verify time, and reverify by replay, without HTTP."""
    from app.runtime.steps import StepRecorder
    from app.sdk.environment import ToolContext
    from app.storage.runner import run_tool
    from app.storage.sqlite import db as sqlite_db
    from app.storage.sqlite.store import Store
    from app.verify.gold import GoldCache

    env = load_environment("retail")
    store = Store(data_dir, env)
    gold = GoldCache(store, 64)
    rows = _rows()

    def played(row: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        task = task_from_data(row)
        snapshot = store.snapshot(task)
        conn = sqlite_db.memory_from_image(snapshot.image)
        bind = sqlite_db.bind_connection(conn)
        ctx = ToolContext(now=snapshot.now, session_id="bench", task_id=None)
        outputs = []
        for call in row["ground_truth"]:
            step = StepRecorder(call["name"], call["arguments"])
            result = run_tool(
                bind, T.tool(env, call["name"]), call["arguments"], ctx, None, step.on_success
            )
            outputs.append(json.dumps(result, ensure_ascii=False, separators=(",", ":")))
        return conn, bind, gold_response(row, outputs)

    figures: dict[str, Any] = {}
    row = rows[MULTI]
    task = task_from_data(row)
    conn, bind, response = played(row)
    gold.get(task)
    samples: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
    for i in range(runs + 10):
        for with_steps in (True, False):
            wall, cpu, result = _timed(
                partial(
                    verify_state,
                    env=env,
                    gold=gold,
                    engine=bind,
                    task=task,
                    response=response,
                    diff_limit=20,
                    with_steps=with_steps,
                )
            )
            assert result["reward"] == 1.0
            if i >= 10:
                samples[with_steps][0].append(wall)
                samples[with_steps][1].append(cpu)
    on, off = _stats(*samples[True]), _stats(*samples[False])
    figures["verify"] = {
        "with_step_rewards": on,
        "without": off,
        "added_p50_ms": round(on["p50_ms"] - off["p50_ms"], 3),
        "added_cpu_p50_ms": round(on["cpu_p50_ms"] - off["cpu_p50_ms"], 3),
    }
    bind.close()
    conn.close()
    # Reverify by replay, per gold rollout (gold and snapshots warm).
    rollouts = []
    for task_id in REPLAYED:
        r = rows[task_id]
        c, b, resp = played(r)
        b.close()
        c.close()
        t = task_from_data(r)
        gold.get(t)
        rollouts.append((t, resp))
    wall_s, cpu_s = [], []
    for i in range(runs):
        t, resp = rollouts[i % len(rollouts)]
        snapshot = store.snapshot(t)
        wall, cpu, result = _timed(
            partial(
                replay_result,
                env=env,
                snapshot=snapshot,
                gold=gold,
                task=t,
                response=resp,
                diff_limit=20,
            )
        )
        assert result.reward == 1.0, result.failure_reason
        wall_s.append(wall)
        cpu_s.append(cpu)
    figures["reverify_by_replay"] = _stats(wall_s, cpu_s)
    return figures


async def _http_write(data_dir: Path, runs: int) -> dict[str, Any]:
    """A write tool call's whole server time in process (ASGI: routing, cookie, JSON, the call,
    the answer), on a session with the step log and one without, interleaved."""
    app = create_app(Settings(data_dir=data_dir, secret_key=SECRET), load_environment("retail"))
    row = _rows()[MULTI]
    customer = row["seed"]["rows"]["customers"][0]["id"]
    samples: dict[str, list[float]] = {"step_log": [], "no_step_log": []}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        clients = {k: httpx.AsyncClient(transport=transport, base_url="http://b") for k in samples}
        for name, client in clients.items():
            seeded = await client.post("/seed_session", json=row)
            if name == "no_step_log":
                sessions = app.state.protocol.sessions
                handle = await sessions._handle(seeded.json()["session_id"])
                _drop_step_log(handle.conn)
                handle.logs_steps = False
        for i in range(runs + 20):
            for name, client in clients.items():
                started = time.perf_counter()
                r = await client.post(
                    "/update_customer_default_address", json=_address(customer, i)
                )
                if i >= 20:
                    samples[name].append(time.perf_counter() - started)
                assert r.status_code == 200 and "output" in r.json(), r.text
        for client in clients.values():
            await client.aclose()
    on, off = _stats(samples["step_log"]), _stats(samples["no_step_log"])
    return {
        **{"step_log": on, "no_step_log": off},
        "overhead_p50": round(on["p50_ms"] / off["p50_ms"] - 1, 3),
    }


async def _http_fork(data_dir: Path, runs: int) -> dict[str, float]:
    app = create_app(Settings(data_dir=data_dir, secret_key=SECRET), load_environment("retail"))
    row = _rows()[MULTI]
    samples = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            await client.post("/seed_session", json=row)
            for call in row["ground_truth"]:
                await client.post(f"/{call['name']}", json=call["arguments"])
            for _ in range(runs):
                started = time.perf_counter()
                r = await client.post("/fork_session", json={"n": 1})
                samples.append(time.perf_counter() - started)
                assert r.status_code == 200, r.text
    return _stats(samples)


def run(runs: int = 200, pg: bool = False, report: Callable[[str], Any] | None = print) -> dict:
    with tempfile.TemporaryDirectory(prefix="steps-bench-") as tmp:
        figures = asyncio.run(_manager_figures(Path(tmp) / "m", runs, pg=False))
        if pg:
            figures["postgres"] = asyncio.run(_manager_figures(Path(tmp) / "pg", runs, pg=True))
        figures["fork_http"] = asyncio.run(_http_fork(Path(tmp) / "h", runs))
        figures["write_request"] = asyncio.run(_http_write(Path(tmp) / "w", runs))
        figures.update(_verify_figures(Path(tmp) / "v", runs))
    if report is not None:
        report(json.dumps(figures, indent=2))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--pg", action="store_true", help="also on PostgreSQL (STATEGYM_TEST_PG_URL)"
    )
    args = parser.parse_args()
    run(args.runs, args.pg)


if __name__ == "__main__":
    main()
