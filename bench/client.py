"""The load generator's HTTP client: aiohttp, explicit cookies, client and server timings."""

from __future__ import annotations

import asyncio
import json
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

COOKIE = "stategym_session"


def raise_fd_limit() -> None:
    """2,000 sockets in flight need more than the default 1,024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Reply:
    status: int
    body: Any
    client_ms: float
    server_ms: float | None
    cookie: str | None

    @property
    def ok(self) -> bool:
        return self.status == 200 and not (isinstance(self.body, dict) and "error" in self.body)


@dataclass
class Samples:
    client_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def add(self, reply: Reply | None, error: str | None = None) -> None:
        if reply is None or not reply.ok:
            self.errors += 1
            if self.first_error is None:
                self.first_error = error or (
                    f"{reply.status} {str(reply.body)[:200]}" if reply else "no reply"
                )
            return
        self.client_ms.append(reply.client_ms)
        if reply.server_ms is not None:
            self.server_ms.append(reply.server_ms)


class Client:
    def __init__(
        self, base_url: str, *, limit: int = 100, timeout: float = 120, loopback: bool = False
    ):
        # uvicorn drops a keep-alive connection idle for 5 s; drop ours first, or a reused one
        # races the server's close and the request fails as "Server disconnected".
        # loopback=True binds the client's sockets to 127.0.0.1 (thousands of connections).
        connector = aiohttp.TCPConnector(
            limit=limit,
            keepalive_timeout=3,
            local_addr=("127.0.0.1", 0) if loopback else None,
        )
        self.http = aiohttp.ClientSession(
            base_url,
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.http.close()

    async def post(self, path: str, body: Any, cookie: str | None = None) -> Reply:
        headers = {"Content-Type": "application/json"}
        if cookie:
            headers["Cookie"] = f"{COOKIE}={cookie}"
        data = json.dumps(body)
        started = time.perf_counter()
        async with self.http.post(path, data=data, headers=headers) as resp:
            raw = await resp.read()
            client_ms = (time.perf_counter() - started) * 1000
            server = resp.headers.get("x-process-time")
            morsel = resp.cookies.get(COOKIE)
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            return Reply(
                resp.status,
                parsed,
                client_ms,
                float(server) if server else None,
                morsel.value if morsel else None,
            )

    async def safe_post(
        self, samples: Samples, path: str, body: Any, cookie: str | None = None
    ) -> Reply | None:
        try:
            reply = await self.post(path, body, cookie)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            samples.add(None, f"{type(exc).__name__}: {exc}")
            return None
        samples.add(reply)
        return reply


async def bounded(n_workers: int, max_requests: int, max_seconds: float, job: Any) -> float:
    """Run `job(i)` from `n_workers` concurrent loops until either bound; returns elapsed s."""
    counter = iter(range(max_requests))
    deadline = time.perf_counter() + max_seconds
    started = time.perf_counter()

    async def loop() -> None:
        for i in counter:
            if time.perf_counter() > deadline:
                return
            await job(i)

    await asyncio.gather(*(loop() for _ in range(n_workers)))
    return time.perf_counter() - started
