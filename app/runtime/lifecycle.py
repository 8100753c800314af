"""Session lifecycle beyond close_session: an idle reaper and the live-session capacity limit.

Nothing leaks when a rollout dies before verify: the reaper closes sessions with no write for
`session_idle_ttl_seconds`, so their connections go and their files follow the retention policy.
Every worker runs a reaper; closing is idempotent, so they never conflict.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from app.clock import naive_utcnow
from app.errors import CapacityReached
from app.runtime.sessions import SessionManager

log = logging.getLogger("stategym.lifecycle")


async def reap_idle(sessions: SessionManager, ttl_seconds: int) -> int:
    """Close every live session idle for longer than the TTL; returns how many it closed."""
    cutoff = naive_utcnow() - timedelta(seconds=ttl_seconds)
    candidates = await sessions._run(
        sessions.control.live_created_before, sessions.env.name, cutoff
    )
    now = time.time()
    closed = 0
    for session_id, created_at in candidates:
        idle = now - await sessions._run(sessions.backend.last_activity, session_id, created_at)
        if idle > ttl_seconds and await sessions.close(session_id):
            closed += 1
    if closed:
        log.info("reaper closed %d idle session(s) of %s", closed, sessions.env.name)
    return closed


async def reaper_loop(sessions: SessionManager, ttl_seconds: int, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await reap_idle(sessions, ttl_seconds)
        except Exception:  # noqa: BLE001 - the reaper must outlive any one bad pass
            log.exception("idle reaper pass failed")


@asynccontextmanager
async def serving(
    sessions: SessionManager, ttl_seconds: int | None, interval: float
) -> AsyncIterator[None]:
    """A server's lifespan for `sessions`: a reaper runs while it serves (with a TTL), and
    every session is closed when it stops."""
    reaper = None
    if ttl_seconds:
        reaper = asyncio.create_task(reaper_loop(sessions, ttl_seconds, interval))
    yield
    if reaper is not None:
        reaper.cancel()
    await sessions.aclose()


async def check_capacity(sessions: SessionManager, limit: int | None) -> None:
    """503 + Retry-After when the environment already holds `limit` live sessions."""
    if limit is None:
        return
    live = await sessions._run(sessions.control.count_live, sessions.env.name)
    if live >= limit:
        raise CapacityReached(
            f"{live} sessions of {sessions.env.name} are live (limit {limit}); "
            "close finished sessions or retry later",
            headers={"Retry-After": "5"},
            hint="Call /close_session for finished rollouts; idle ones are reaped.",
        )
