"""In-process hot-path driver for a profiler (py-spy / cProfile): seed, tools, verify, reopen.

python -m bench.profile_hot [seed|read|write|verify|reopen|rollout] [n]   (no HTTP: app code only)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.settings import Settings
from bench import tasks as T


async def drive(what: str, n: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="stategym-prof-"))
    settings = Settings(
        data_dir=data, max_open_sessions=8, secret_key="x" * 8 + "abcdefghijklmnop" * 2
    )
    env = load_environment("retail")
    mgr = SessionManager(settings, env)
    task = T.rollout_task()
    request = parse_seed_body(task)
    sid = (await mgr.seed(request)).session_id
    tools = {t.name: t for t in env.tools}
    read_name, read_args = T.read_call(task)
    write_name, write_args = T.write_call(task)
    for call in task["ground_truth"]:
        await mgr.call_tool(sid, tools[call["name"]], call["arguments"])
    await mgr.verify(sid, T.verify_body(task))
    sids = [(await mgr.seed(request)).session_id for _ in range(20)] if what == "reopen" else []
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        if what == "seed":
            await mgr.seed(request)
        elif what == "read":
            await mgr.call_tool(sid, tools[read_name], read_args)
        elif what == "write":
            await mgr.call_tool(sid, tools[write_name], write_args)
        elif what == "verify":
            await mgr.verify(sid, T.verify_body(task))
        elif what == "rollout":  # what one rollout of the HTTP phase costs, minus HTTP
            rollout = (await mgr.seed(request)).session_id
            for name, args in T.rollout_calls(task):
                await mgr.call_tool(rollout, tools[name], args)
            await mgr.verify(rollout, T.verify_body(task))
            await mgr.close(rollout)
        elif what == "reopen":  # 20 sessions through an LRU of 8: every call opens a handle
            await mgr.call_tool(sids[i % 20], tools[read_name], read_args)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    # CPU time is the steadier figure on a shared machine; wall time includes waiting for it.
    print(f"{what}: {cpu / n * 1000:.3f} ms CPU, {elapsed / n * 1000:.3f} ms wall per op ({n} ops)")
    await mgr.aclose()


if __name__ == "__main__":
    asyncio.run(
        drive(
            sys.argv[1] if len(sys.argv) > 1 else "read",
            int(sys.argv[2]) if len(sys.argv) > 2 else 200,
        )
    )
