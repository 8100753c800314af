"""Where each ms of seed, tool call, verify and close goes (issue 20): cProfile, in process.

    python -m bench profile_ops [passes] [--top N]   # all retail tasks, warm

Figures: bench/history/profile_ops.md.

`SessionManager` driven without HTTP over every retail task: one warm-up pass (snapshots and golds
built), then `passes` passes of seed → gold calls → verify → close. Two measurements per kind:
1. wall ms per op with the real executors (thread hops included), `time.perf_counter`;
2. a cProfile of the same ops with the executors replaced by an inline one (cProfile sees one
   thread only), printed as time by area (SQLAlchemy, sqlite3, the control DB, ...) and the top
   functions by own time. The difference between 1 and the profiled CPU is the hop/GIL cost.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from collections import defaultdict
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.settings import Settings
from bench.rollout import KINDS, env_tasks, verify_body

AREAS = (  # first match wins: (label, substring of the file path or function name)
    ("sqlite3 C calls (execute/commit/backup/deserialize)", "<method '"),
    ("SQLAlchemy engine/Core/ORM layer", "sqlalchemy/"),
    ("pydantic validation", "pydantic"),
    ("json encode/decode", "json/"),
    ("control DB (app/storage/control.py)", "app/storage/control.py"),
    ("verify (app/verify/)", "app/verify/"),
    ("store/snapshots (app/storage/sqlite/store.py, seeding)", "app/storage/sqlite/store.py"),
    ("sqlite helpers (app/storage/sqlite/db.py, meta)", "app/storage/sqlite/db.py"),
    ("runner (app/storage/runner.py)", "app/storage/runner.py"),
    ("runtime (app/runtime/: sessions, seeding, closing, verifying)", "app/runtime/"),
    ("environment tools (envs/)", "envs/"),
    ("other app/", "app/"),
    ("asyncio / threading / stdlib", "python3.11"),
)


class InlineExecutor(Executor):
    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            future.set_exception(exc)
        return future


async def drive(passes: int, profiled: bool) -> tuple[dict[str, list[float]], dict[str, Any]]:
    data = Path(tempfile.mkdtemp(prefix="stategym-prof-"))
    settings = Settings(data_dir=data, secret_key="x" * 8 + "abcdefghijklmnop" * 2)
    env = load_environment("retail")
    mgr = SessionManager(settings, env)
    tools = {t.name: t for t in env.tools}
    tasks = [(t, parse_seed_body(t), verify_body(t)) for t in env_tasks("retail")]
    profiles = {k: cProfile.Profile() for k in KINDS}
    times: dict[str, list[float]] = defaultdict(list)

    async def op(kind: str, coro: Any, record: bool) -> Any:
        prof = profiles[kind] if (record and profiled) else None
        started = time.perf_counter()
        if prof:
            prof.enable()
        try:
            return await coro
        finally:
            if prof:
                prof.disable()
            if record:
                times[kind].append((time.perf_counter() - started) * 1000)

    if profiled:
        inline = InlineExecutor()
        mgr.executor = inline  # type: ignore[assignment]
        for lane in (mgr.tool_lane, mgr.verify_lane, mgr.replay_lane, mgr.gold_lane):
            lane.executor = inline  # type: ignore[assignment]
    try:
        for n in range(passes + 1):
            record = n > 0  # pass 0 is the warm-up
            for task, request, body in tasks:
                sid = (await op("seed", mgr.seed(request), record)).session_id
                for call in task["ground_truth"]:
                    await op(
                        "tool", mgr.call_tool(sid, tools[call["name"]], call["arguments"]), record
                    )
                result = await op("verify", mgr.verify(sid, body), record)
                assert result["reward"] == 1.0, (task["task_id"], result.get("failure_reason"))
                await op("close", mgr.close(sid), record)
    finally:
        await mgr.aclose()
    return times, profiles


def by_area(stats: pstats.Stats) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (path, _line, name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{path}:{name}"
        label = next((lbl for lbl, key in AREAS if key in where), "other")
        out[label] += tt * 1000
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("passes", nargs="?", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    wall, _ = asyncio.run(drive(args.passes, profiled=False))
    prof_times, profiles = asyncio.run(drive(args.passes, profiled=True))
    for kind in KINDS:
        n = len(wall[kind])
        ordered = sorted(wall[kind])
        p50 = ordered[n // 2]
        stats = pstats.Stats(profiles[kind])
        total = stats.total_tt * 1000 / n  # type: ignore[attr-defined]
        print(
            f"\n=== {kind}: n={n}, wall p50 {p50:.2f} ms (real executors), "
            f"profiled {total:.2f} ms/op"
        )
        for label, ms in by_area(stats).items():
            if ms / n >= 0.01:
                print(f"  {ms / n:7.3f} ms  {label}")
        print("  top functions by own time (ms/op, calls/op):")
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[: args.top]  # type: ignore[attr-defined]
        for (path, line, name), (_cc, nc, tt, ct, _callers) in rows:
            short = "/".join(path.split("/")[-2:])
            print(
                f"  {tt * 1000 / n:7.3f} own {ct * 1000 / n:7.3f} cum {nc / n:6.1f}x  "
                f"{short}:{line} {name}"
            )


if __name__ == "__main__":
    main()
