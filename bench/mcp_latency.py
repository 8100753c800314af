"""One tool call over MCP vs over HTTP, on one real server, one session, one call at a time.

    .venv/bin/python -m bench.mcp_latency [--calls 500]

Starts `stategym serve --env retail` with MCP on, seeds a session, then calls the read tool
`get_order_details` `--calls` times through `POST /get_order_details` (httpx, keep-alive) and
through `/mcp` (the official client: `streamable_http_client` + `ClientSession`, same keep-alive
httpx client). Prints client-side round trips and the server's own time (`X-Process-Time`).
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

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.servers import ServerProcess, _spawn, free_port

ARGS = {"order_number": "#W9020002"}
TASKS = Path(__file__).resolve().parent.parent / "envs" / "retail" / "tasks.jsonl"


def start(data_dir: Path) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "app", "serve", "--env", "retail", "--port", str(port)]
    argv += ["--host", "127.0.0.1", "--data-dir", str(data_dir)]
    env = {"STATEGYM_EXPOSE_TOOLS_OVER_MCP": "true", "STATEGYM_LOG_LEVEL": "warning"}
    return _spawn("stategym-mcp", argv, data_dir, env, port)


def summary(name: str, client_ms: list[float], server_ms: list[float]) -> str:
    def q(values: list[float], p: float) -> float:
        return sorted(values)[int(p * (len(values) - 1))]

    return (
        f"{name:5} client p50 {statistics.median(client_ms):6.2f} ms  p90 {q(client_ms, 0.9):6.2f}"
        f"  | server p50 {statistics.median(server_ms):6.2f} ms  p90 {q(server_ms, 0.9):6.2f}"
    )


async def measure(url: str, calls: int) -> None:
    server_ms: list[float] = []

    async def record(response: httpx.Response) -> None:
        if "x-process-time" in response.headers:
            server_ms.append(float(response.headers["x-process-time"]))

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        task = next(json.loads(line) for line in TASKS.open() if '"retail-020"' in line)
        seeded = (await http.post("/seed_session", json=task)).json()
        headers = seeded["resources_tools"]["headers"]
        http.event_hooks["response"] = [record]
        client_ms = []
        for _ in range(calls):
            started = time.perf_counter()
            (await http.post("/get_order_details", json=ARGS)).raise_for_status()
            client_ms.append((time.perf_counter() - started) * 1000)
        print(summary("HTTP", client_ms, server_ms))

    server_ms.clear()
    hooks = {"response": [record]}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        server_ms.clear()
        client_ms = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await session.call_tool("get_order_details", ARGS)
            assert not result.isError, result.content
            client_ms.append((time.perf_counter() - started) * 1000)
        print(summary("MCP", client_ms, server_ms))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = start(Path(tmp))
        try:
            asyncio.run(measure(server.url, args.calls))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
