"""A verify's CPU in process: every task of an environment, its gold calls run, then the verify's
worker-thread part (`Verifying._verify_open`: record read, verify, mark) timed with
`time.thread_time`, `rounds` times per session; the checkout on PYTHONPATH serves:

    PYTHONPATH=/path/to/checkout python -m bench.verify_cpu [--env retail] [--rounds 8]
        [--profile N] [--kind gold|noop|partial]

The response carries the calls and their outputs (as NeMo Gym's agents send them), so the
trajectory check runs. `--profile N`: a cProfile of the timed verifies, top N by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.settings import Settings

try:  # the exact body the route sent (as NeMo Gym's agents pass it on)
    from app.runtime.steps import body_text
except ImportError:  # pragma: no cover - an older checkout
    body_text = json.dumps  # type: ignore[assignment]

ROOT = Path(os.environ.get("PYTHONPATH", ".").split(":")[0]).resolve()


def _tasks(env: str) -> list[dict[str, Any]]:
    path = ROOT / "envs" / env / "tasks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _calls(task: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    calls = list(task.get("ground_truth") or [])
    if kind == "noop":
        return []
    if kind == "partial":
        return calls[: len(calls) // 2]
    return calls


async def _prepare(mgr: SessionManager, env: Any, kind: str) -> list[tuple[str, dict]]:
    out = []
    for task in _tasks(env.name):
        sid = (await mgr.seed(parse_seed_body(task))).session_id
        items: list[dict[str, Any]] = []
        for n, call in enumerate(_calls(task, kind)):
            tool = env.tool_named(call["name"])
            result = await mgr.call_tool(sid, tool, call["arguments"])
            cid = f"call_{n}"
            args = call["arguments"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": cid,
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                }
            )
            items.append(
                {"type": "function_call_output", "call_id": cid, "output": body_text(result)}
            )
        text = "Done. " + " ".join(str(x) for x in task.get("expected_outputs") or [])
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        )
        out.append((sid, {**task, "response": {"id": "r", "output": items}}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", default="retail")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument("--kind", default="gold", choices=("gold", "noop", "partial"))
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="stategym-vcpu-"))
    settings = Settings(data_dir=data, secret_key="x" * 8 + "abcdefghijklmnop" * 2)
    env = load_environment(args.env)
    mgr = SessionManager(settings, env)
    loop = asyncio.new_event_loop()
    sessions = loop.run_until_complete(_prepare(mgr, env, args.kind))
    handles = {sid: loop.run_until_complete(mgr._handle(sid)) for sid, _ in sessions}
    for sid, body in sessions:  # warm: golds built, dumps kept
        mgr.verifying._verify_open(sid, handles[sid], body)
    prof = cProfile.Profile() if args.profile else None
    per_round = []
    samples = []
    for _ in range(args.rounds):
        started = time.thread_time()
        for sid, body in sessions:
            t0 = time.thread_time()
            if prof:
                prof.enable()
            mgr.verifying._verify_open(sid, handles[sid], body)
            if prof:
                prof.disable()
            samples.append(time.thread_time() - t0)
        per_round.append((time.thread_time() - started) / len(sessions))
    ms = sorted(s * 1000 for s in samples)
    print(
        f"{args.env} {args.kind}: {len(sessions)} sessions x {args.rounds}: "
        f"p50 {statistics.median(ms):.3f} ms, mean {statistics.mean(ms):.3f} ms, "
        f"round means {min(per_round) * 1000:.3f}-{max(per_round) * 1000:.3f} ms, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    if prof:
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(args.profile)
        stats.sort_stats("cumulative").print_stats(args.profile)
    loop.run_until_complete(mgr.aclose())
    loop.close()


if __name__ == "__main__":
    main()
