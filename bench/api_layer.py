"""The protocol layer's own time per request, in process: `python -m bench.api_layer [n]`.

The whole ASGI app (middleware, routing, body parsing, cookie, answer rendering) serves seed,
a tool call, verify and close for a retail task, with the SessionManager's four methods
answering at once with what they answered for real before. What is left is the time the
protocol layer adds to each request (issue 20: seed, verify and close over HTTP were 0.5-0.7 ms
above the same calls in process). No uvicorn, no sockets: compare runs of the same machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from app.server.api import create_app
from app.server.models import parse_seed_body
from app.server.timing import ProcessTimeMiddleware
from app.settings import Settings
from bench.rollout import env_tasks, verify_body

TASK_INDEX = 5  # a retail task with writes: its verify echo is ~18 KB


def _scope(path: str, raw: bytes, cookie: bytes | None) -> dict[str, Any]:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
    ]
    if cookie:
        headers.append((b"cookie", cookie))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }


async def measure(n: int) -> dict[str, float]:
    data = Path(tempfile.mkdtemp(prefix="stategym-api-"))
    settings = Settings(data_dir=data, env="retail", secret_key="x" * 8 + "abcdefghijklmnop" * 2)
    app = create_app(settings)
    app.add_middleware(ProcessTimeMiddleware)
    mgr = app.state.protocol.sessions
    task = env_tasks("retail")[TASK_INDEX]
    tools = {t.name: t for t in mgr.env.tools}
    first_call = task["ground_truth"][0]

    async def call(path: str, raw: bytes, cookie: bytes | None = None) -> dict[str, Any]:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": raw, "more_body": False}

        out: dict[str, Any] = {}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out["status"], out["headers"] = message["status"], message["headers"]

        await app(_scope(path, raw, cookie), receive, send)
        return out

    figures: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        seeded = await mgr.seed(parse_seed_body(task))
        tool_result: dict[str, Any] = {}
        for c in task["ground_truth"]:
            tool_result = await mgr.call_tool(seeded.session_id, tools[c["name"]], c["arguments"])
        vbody = verify_body(task)
        verify_result = await mgr.verify(seeded.session_id, vbody)
        assert verify_result["reward"] == 1.0

        async def seed(_request: Any) -> Any:
            return seeded

        async def call_tool(*_args: Any) -> dict[str, Any]:
            return tool_result

        async def verify(*_args: Any) -> dict[str, Any]:
            return verify_result

        async def close(*_args: Any) -> bool:
            return True

        mgr.seed, mgr.call_tool, mgr.verify, mgr.close = seed, call_tool, verify, close
        reply = await call("/seed_session", json.dumps(task).encode())
        cookie = next(v for k, v in reply["headers"] if k == b"set-cookie").split(b";")[0]
        kinds = {
            "seed": ("/seed_session", task, None),
            "tool": (f"/{first_call['name']}", first_call["arguments"], cookie),
            "verify": ("/verify", vbody, cookie),
            "close": ("/close_session", {}, cookie),
        }
        for kind, (path, body, with_cookie) in kinds.items():
            raw = json.dumps(body).encode()
            for _ in range(n // 10):  # warm-up
                await call(path, raw, with_cookie)
            best = float("inf")
            for _ in range(5):  # best of 5 rounds: the machine's other work only adds
                started = time.perf_counter()
                for _ in range(n // 5):
                    reply = await call(path, raw, with_cookie)
                best = min(best, (time.perf_counter() - started) / (n // 5))
            assert reply["status"] == 200, (kind, reply)
            figures[kind] = best * 1e6
    return figures


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    for kind, us in asyncio.run(measure(n)).items():
        print(f"{kind:7s} {us:6.0f} us a request in the protocol layer (best of 5 rounds)")


if __name__ == "__main__":
    main()
