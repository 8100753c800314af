"""What a long run looks like from outside: Prometheus metrics at `GET /metrics` and one log
line per interval (rollouts, p50/p99 per operation, live sessions, RSS, open files, data dir).

Per worker process: with `--workers N` each worker answers for itself (Prometheus scrapes see
the worker that took the connection; the log lines carry the pid). Off with
`STATEGYM_METRICS=false` (e.g. when an environment has a tool named `metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Response

log = logging.getLogger("stategym.stats")

OPERATIONS = ("seed", "tool", "verify", "close", "other")
_ROUTES = {"/seed_session": "seed", "/verify": "verify", "/close_session": "close"}
# Everything else that is not a tool call: the rest of the protocol and the read routes.
_NOT_TOOLS = ("/admin", "/mcp", "/metrics", "/health", "/aggregate_metrics", "/tools")
_DATA_DIR_EVERY_S = 30.0  # walking a data dir of 100,000 files costs ~0.1 s: not per scrape
_WINDOW = 50_000  # durations kept per operation for the interval's percentiles


def operation_of(method: str, path: str) -> str:
    """The protocol operation a request is (its path after the /ng-rollout/<id> prefix)."""
    if path in _ROUTES:
        return _ROUTES[path]
    if method == "POST" and path.count("/") == 1 and not path.startswith(_NOT_TOOLS):
        return "tool"
    return "other"


class Stats:
    """Durations per operation since the last interval, plus Prometheus histograms."""

    def __init__(self, data_dir: Path, live_sessions: Callable[[], int]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.data_dir = data_dir
        self.live_sessions = live_sessions
        self.registry = CollectorRegistry()
        self.window: dict[str, deque[float]] = {op: deque(maxlen=_WINDOW) for op in OPERATIONS}
        self.totals = dict.fromkeys(OPERATIONS, 0)
        self.errors = 0
        buckets = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
        self.latency = Histogram(
            "stategym_request_seconds",
            "Server-side request time by protocol operation.",
            ["operation"],
            buckets=buckets,
            registry=self.registry,
        )
        self.failed = Counter(
            "stategym_request_errors", "Responses with status >= 500.", registry=self.registry
        )
        gauges = {
            "stategym_live_sessions": ("Sessions seeded and not closed.", self.live_sessions),
            "stategym_rss_bytes": ("Resident memory of this worker.", rss_bytes),
            "stategym_open_fds": ("Open file descriptors of this worker.", open_fds),
            "stategym_data_dir_bytes": ("Bytes under the data dir.", self.data_dir_bytes),
        }
        for name, (doc, read) in gauges.items():
            Gauge(name, doc, registry=self.registry).set_function(read)
        self._dir_size = (0.0, 0)
        # Each operation's histogram series, looked up once (`labels` validates and locks).
        self._series: dict[str, Any] = {}

    def observe(self, operation: str, seconds: float, status: int) -> None:
        self.window[operation].append(seconds)
        self.totals[operation] += 1
        series = self._series.get(operation)
        if series is None:  # made at an operation's first request, as `labels` would
            series = self._series[operation] = self.latency.labels(operation)
        series.observe(seconds)
        if status >= 500:
            self.errors += 1
            self.failed.inc()

    def data_dir_bytes(self) -> int:
        at, size = self._dir_size
        if time.monotonic() - at > _DATA_DIR_EVERY_S:
            size = directory_bytes(self.data_dir)
            self._dir_size = (time.monotonic(), size)
        return size

    def summary_line(self, interval_s: float) -> str:
        """One line for the interval that just ended; resets the interval's windows."""
        parts = [f"pid={os.getpid()}", f"rollouts={self.totals['verify']}"]
        for op in ("seed", "tool", "verify", "close"):
            durations = sorted(self.window[op])
            self.window[op].clear()
            if durations:
                p50 = durations[len(durations) // 2] * 1000
                p99 = durations[min(len(durations) - 1, int(len(durations) * 0.99))] * 1000
                rate = len(durations) / interval_s
                parts.append(f"{op}={rate:.1f}/s p50={p50:.1f}ms p99={p99:.1f}ms")
        parts += [
            f"live={self.live_sessions()}",
            f"rss={rss_bytes() / 2**20:.0f}MiB",
            f"fds={open_fds()}",
            f"data_dir={self.data_dir_bytes() / 2**20:.0f}MiB",
            f"errors_5xx={self.errors}",
        ]
        return " ".join(parts)


def rss_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: ru_maxrss is the closest figure
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def directory_bytes(root: Path) -> int:
    total = 0
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:  # removed while we walked (a session closed): skip it
                continue
    return total


class MetricsMiddleware:
    """Times every HTTP request by operation (pure ASGI: no task or queue per request)."""

    def __init__(self, app: Any, stats: Stats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def watched(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            operation = operation_of(scope.get("method", ""), scope.get("path", ""))
            self.stats.observe(operation, time.perf_counter() - started, status)


def install_metrics(app: FastAPI, stats: Stats, log_every_s: int, expose: bool) -> None:
    """Time requests; serve `GET /metrics` when `expose`; log a line every `log_every_s`
    (0: never) while the app runs."""
    app.add_middleware(MetricsMiddleware, stats=stats)
    if expose:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        @app.get("/metrics", include_in_schema=False)
        def metrics() -> Response:
            return Response(generate_latest(stats.registry), media_type=CONTENT_TYPE_LATEST)

    if not log_every_s:
        return
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[Any]:
        async def every_interval() -> None:
            while True:
                await asyncio.sleep(log_every_s)
                if any(stats.window.values()):  # an idle server stays quiet
                    line = await asyncio.to_thread(stats.summary_line, log_every_s)
                    log.info("%s", line)

        task = asyncio.create_task(every_interval())
        try:
            async with inner(app_) as state:
                yield state
        finally:
            task.cancel()

    app.router.lifespan_context = lifespan
