"""Session lifecycle beyond close_session: an idle reaper, a pruner of old closed records and
the live-session capacity limit.

Nothing leaks when a rollout dies before verify, or a client never closes (verifiers): the reaper
closes sessions with no write for `session_idle_ttl_seconds` as a close would, so their
connections go, their files follow the retention policy and a typed id stays closed.
The pruner keeps the control database flat over a long run: past `session_records_max` records
of sessions whose database retention deleted, the oldest go. Every worker runs both; closing
and pruning are idempotent, so they never conflict.
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
from app.runtime.collector import settle_collector
from app.runtime.sessions import SessionManager

log = logging.getLogger("stategym.lifecycle")


async def reap_idle(sessions: SessionManager, ttl_seconds: int) -> int:
    """Close every live session idle for longer than the TTL, as `/close_session` would (a
    typed one's id is left closed: a later seed of it is 409); returns how many it closed.
    Idle: no write (the backend's clock, every worker's) and no call or verify on this worker
    (`touched`) within the TTL. One worker hop finds them; a session with a call in flight
    right now is left for the next pass, and a close that fails is retried there too."""
    idle = await sessions._run(idle_sessions, sessions, ttl_seconds)
    cutoff = time.time() - ttl_seconds
    touched = sessions.touched
    for session_id in [s for s, at in touched.items() if at < cutoff]:
        del touched[session_id]  # idle for the TTL, or closed: the backend's clock decides
    closed = 0
    for session_id in idle:
        if session_id in touched:
            continue  # a call or verify on this worker within the TTL
        handle = sessions._open.get(session_id)
        if handle is not None and handle.lock.locked():
            continue  # touched right now
        try:
            if await sessions.close(session_id):
                closed += 1
        except Exception as exc:  # noqa: BLE001 - one session must not stop the pass
            log.warning("reaper could not close idle session %s: %r", session_id, exc)
    if closed:
        log.info("reaper closed %d idle session(s) of %s", closed, sessions.env.name)
    return closed


def idle_sessions(sessions: SessionManager, ttl_seconds: int) -> list[str]:
    """Live sessions of this environment with no write for longer than the TTL: an indexed
    read of those created before the cutoff, then each one's last write (a file's mtime)."""
    cutoff = naive_utcnow() - timedelta(seconds=ttl_seconds)
    candidates = sessions.control.live_created_before(sessions.env.name, cutoff)
    now = time.time()
    return [
        session_id
        for session_id, created_at in candidates
        if now - sessions.backend.last_activity(session_id, created_at) > ttl_seconds
    ]


async def reaper_loop(sessions: SessionManager, ttl_seconds: int, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await reap_idle(sessions, ttl_seconds)
        except Exception:  # noqa: BLE001 - the reaper must outlive any one bad pass
            log.exception("idle reaper pass failed")


# Records deleted per transaction: a batch holds SQLite's one write lock for a few ms only, and
# seeds and closes of other workers run between batches.
PRUNE_BATCH = 500


async def prune_records(sessions: SessionManager, keep: int, batch: int = PRUNE_BATCH) -> int:
    """Delete the records of this environment's sessions whose database retention deleted,
    beyond the newest `keep`, a batch per worker-thread hop; returns how many went. When there
    is nothing to prune this is one indexed read."""
    pruned = 0
    while True:
        gone = await sessions._run(sessions.control.prune_dropped, sessions.env.name, keep, batch)
        pruned += gone
        if gone < batch:
            break
    if pruned:
        log.info("pruned %d closed record(s) of %s", pruned, sessions.env.name)
    return pruned


async def maintenance_loop(sessions: SessionManager, interval: float) -> None:
    """The backend's housekeeping (`SessionBackend.maintain`) on a thread of its own, off the
    worker threads: a pass may take seconds."""
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(sessions.backend.maintain)
        except Exception:  # noqa: BLE001 - housekeeping must outlive any one bad pass
            log.exception("maintenance pass failed")


async def pruner_loop(sessions: SessionManager, keep: int, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await prune_records(sessions, keep)
        except Exception:  # noqa: BLE001 - the pruner must outlive any one bad pass
            log.exception("closed-record pruner pass failed")


@asynccontextmanager
async def serving(
    sessions: SessionManager, ttl_seconds: int | None, interval: float
) -> AsyncIterator[None]:
    """A server's lifespan for `sessions`: a reaper runs while it serves (with a TTL), and a
    pruner of closed records (with `session_records_max`), both every `interval`, and the
    backend's housekeeping (every `maintenance_interval_seconds`); every session is closed when
    it stops. With `gc_settle`, the collector is set for a long-lived process first
    (app/runtime/collector.py)."""
    if sessions.settings.gc_settle:
        settle_collector()
    loops = []
    if ttl_seconds:
        loops.append(asyncio.create_task(reaper_loop(sessions, ttl_seconds, interval)))
    keep = sessions.settings.session_records_max
    if keep:
        loops.append(asyncio.create_task(pruner_loop(sessions, keep, interval)))
    if sessions.settings.maintenance_interval_seconds:
        every = sessions.settings.maintenance_interval_seconds
        loops.append(asyncio.create_task(maintenance_loop(sessions, every)))
    yield
    for loop in loops:
        loop.cancel()
    # Each loop has stopped (a close it had started on a worker thread runs to its end) before
    # the threads and connections go.
    await asyncio.gather(*loops, return_exceptions=True)
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
