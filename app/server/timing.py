"""Server-side request time in an `X-Process-Time` header (milliseconds), for benchmarks.

A pure ASGI middleware (no BaseHTTPMiddleware: that adds a task and a queue per request). The
time runs from the first byte of the request handling to the response start.
"""

from __future__ import annotations

import time
from typing import Any

HEADER = b"x-process-time"


class ProcessTimeMiddleware:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                elapsed_ms = (time.perf_counter() - started) * 1000
                headers = list(message.get("headers", []))
                headers.append((HEADER, f"{elapsed_ms:.3f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, timed_send)
