"""One tool call through OpenEnv's WebSocket step vs `POST /<tool>`, same machine, one at a time.

    .venv-openenv/bin/python -m bench.openenv_overhead [--calls 500]   # needs stategym[openenv]

Starts `stategym serve --env retail` and `stategym serve --env retail --protocol openenv`, seeds
one session on each (the same task), then calls the read tool `get_order_details` `--calls`
times: `POST /get_order_details` (httpx, keep-alive) and `step(call_tool)` over `/ws` (OpenEnv's
own `GenericEnvClient`). Prints client-side round trips; the difference is what the OpenEnv path
adds per step (its message framing, pydantic observation models, the JSON round trip of the
result). A whole episode (reset, the gold calls, finish) is timed on each path too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from openenv.core.generic_client import GenericEnvClient

from bench.servers import ServerProcess, _spawn, free_port

ARGS = {"order_number": "#W9020002"}
TASKS = Path(__file__).resolve().parent.parent / "envs" / "retail" / "tasks.jsonl"


def start(data_dir: Path, protocol: str) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "app", "serve", "--env", "retail", "--port", str(port)]
    argv += ["--host", "127.0.0.1", "--data-dir", str(data_dir), "--protocol", protocol]
    env = {"STATEGYM_LOG_LEVEL": "warning"}
    return _spawn(f"stategym-{protocol}", argv, data_dir, env, port)


def q(values: list[float], p: float) -> float:
    return sorted(values)[int(p * (len(values) - 1))]


def line(name: str, ms: list[float]) -> str:
    return f"{name:28} p50 {statistics.median(ms):7.2f} ms  p90 {q(ms, 0.9):7.2f} ms"


async def over_http(url: str, task: dict[str, Any], calls: int) -> tuple[list[float], float]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        (await http.post("/seed_session", json=task)).raise_for_status()
        steps = []
        for _ in range(calls):
            started = time.perf_counter()
            (await http.post("/get_order_details", json=ARGS)).raise_for_status()
            steps.append((time.perf_counter() - started) * 1000)
        await http.post("/close_session", json={})
        started = time.perf_counter()
        (await http.post("/seed_session", json=task)).raise_for_status()
        for call in task["ground_truth"]:
            (await http.post(f"/{call['name']}", json=call["arguments"])).raise_for_status()
        (await http.post("/verify", json={**task, "response": {"output": []}})).raise_for_status()
        await http.post("/close_session", json={})
        return steps, (time.perf_counter() - started) * 1000


async def over_openenv(url: str, task: dict[str, Any], calls: int) -> tuple[list[float], float]:
    step = {"type": "call_tool", "tool_name": "get_order_details", "arguments": ARGS}
    async with GenericEnvClient(base_url=url, message_timeout_s=60) as env:
        await env.reset(task_id=task["task_id"])
        steps = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await env.step(step)
            steps.append((time.perf_counter() - started) * 1000)
        assert result.observation.get("error") is None, result.observation
        started = time.perf_counter()
        await env.reset(task_id=task["task_id"])
        for call in task["ground_truth"]:
            gold = {"type": "call_tool", "tool_name": call["name"], "arguments": call["arguments"]}
            await env.step(gold)
        end = await env.step({"type": "call_tool", "tool_name": "finish", "arguments": {}})
        assert end.done
        return steps, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    task = next(json.loads(line) for line in TASKS.open() if '"retail-020"' in line)
    with tempfile.TemporaryDirectory() as tmp:
        http_server = start(Path(tmp) / "http", "nemo-gym")
        openenv_server = start(Path(tmp) / "openenv", "openenv")
        try:
            http_steps, http_episode = asyncio.run(over_http(http_server.url, task, args.calls))
            ws_steps, ws_episode = asyncio.run(over_openenv(openenv_server.url, task, args.calls))
        finally:
            http_server.stop()
            openenv_server.stop()
    print(line("POST /get_order_details", http_steps))
    print(line("OpenEnv step(call_tool)", ws_steps))
    extra = statistics.median(ws_steps) - statistics.median(http_steps)
    print(f"OpenEnv adds {extra:+.2f} ms per step at p50 ({args.calls} calls each)")
    calls = len(task["ground_truth"])
    print(f"episode ({calls} gold calls): HTTP {http_episode:.1f} ms, OpenEnv {ws_episode:.1f} ms")


if __name__ == "__main__":
    main()
