"""Sessions: one rollout's database plus its control record; seed, tool calls, verify, close.

`SessionManager` is the facade the server calls: the shared workers (app/runtime/workers.py) plus
one object per job, seeding (seeding.py), closing (closing.py) and verifying (verifying.py); a
tool call's step-recording policy is app/runtime/steps.py's. Where state lives is the storage
backend's (app/storage/base.py). A tool call costs one transaction and one hop to a worker thread;
on a backend with `inline_calls`, a tool whose calls have proven fast runs on the event loop
instead, with no hop (app/runtime/inline.py). Calls on one session are serialised by a
per-session asyncio lock (and, across worker processes or replicas, by the backend's lock); calls
on different sessions run concurrently.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from app.core.tasks import SeedRequest
from app.runtime.closing import Closing
from app.runtime.ownership import owned_session_id
from app.runtime.seeding import Seeded, Seeding
from app.runtime.steps import call_and_record
from app.runtime.verifying import (
    GOLD_BUDGET,
    SESSION_EXPIRED,
    SESSION_LOST,
    Verifying,
    lost_session,
)
from app.runtime.workers import SessionWorkers
from app.sdk.environment import Environment, Tool
from app.settings import Settings
from app.storage.base import SessionBackend, SessionHandle
from app.storage.driver import RETRY_IN_THREAD, DbError

__all__ = [
    "GOLD_BUDGET",
    "INLINE_TIME_LIMIT_MS",
    "SESSION_EXPIRED",
    "SESSION_LOST",
    "Seeded",
    "SessionManager",
    "lost_session",
]

# A call on the event loop (a proven-fast tool, app/runtime/inline.py) is stopped after this long
# and run again in a thread: an argument that makes a fast tool slow holds the loop at most this
# long.
INLINE_TIME_LIMIT_MS = 20


class SessionManager(SessionWorkers):
    """The workers every job shares, and the jobs; callers keep reaching the workers' parts
    (`backend`, `control`, `gold`, `judge`, `_run`, `_handle`, ...) on the manager itself."""

    def __init__(self, settings: Settings, env: Environment, backend: SessionBackend | None = None):
        super().__init__(settings, env, backend)
        self.closing = Closing(self)
        self.seeding = Seeding(self, self.closing)
        self.verifying = Verifying(self, self.closing)

    # --- seed and close (app/runtime/seeding.py, closing.py) ---------------------------------
    async def seed(self, request: SeedRequest) -> Seeded:
        """A new session; for a typed seed, the existing one when its id was seeded before by
        the same episode (NeMo Gym retries seeds). A legacy seed is always a new rollout."""
        return await self.seeding.seed(request)

    async def close(self, session_id: str) -> bool:
        """Close by cookie. Idempotent: False when it was closed already (or never existed)."""
        return await self.closing.close(session_id)

    async def close_by_resources_id(
        self, rsid: str, episode: str | None, cookie_session_id: str | None
    ) -> bool:
        """Close what a typed seed made under `rsid`; an id never seeded gets a tombstone."""
        return await self.closing.close_by_resources_id(rsid, episode, cookie_session_id)

    async def owned(self, rsid: str | None, cookie_session_id: str | None) -> str:
        """The session a request holds: its cookie's, or the one `rsid` names when that is
        the cookie's (app/runtime/ownership.py, the rule of every session route but close)."""
        if rsid is None or cookie_session_id is None:
            return owned_session_id(self.control, self.env.name, rsid, cookie_session_id)
        return await self._run(
            owned_session_id, self.control, self.env.name, rsid, cookie_session_id
        )

    # --- verify (app/runtime/verifying.py) ---------------------------------------------------
    async def verify(self, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Verify the cookie's session (a closed or gone one by replay); a task whose gold
        cannot be built within its budget is a masked sample saying why."""
        self.touch(session_id)
        return await self.verifying.verify(session_id, body)

    async def reverify(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A verify without a session (NeMo Gym's stateless reverify), by replay."""
        return await self.verifying.reverify(body)

    # --- tool calls --------------------------------------------------------------------------
    async def call_tool(self, session_id: str, tool: Tool, raw_args: Any) -> dict[str, Any]:
        self.touch(session_id)
        handle = await self._handle(session_id)
        async with handle.lock:
            if self.inline is not None and self.inline.allows(tool.name):
                result, seconds = self._timed_call(handle, tool, raw_args, inline=True)
                code = result.get("error", {}).get("code")
                if code != DbError.BUSY.code:
                    self.inline.record(tool.name, seconds, inline=True)
                if code not in RETRY_IN_THREAD:
                    return result
                # Another process holds the session's write lock, or the call ran past the
                # loop's short limit (and was rolled back): it runs again in a thread, never
                # holding the loop longer than INLINE_TIME_LIMIT_MS.
            result, seconds = await self._run_tool(self._timed_call, handle, tool, raw_args)
            if self.inline is not None:
                self.inline.record(tool.name, seconds, inline=False)
            return result

    def _timed_call(
        self, handle: SessionHandle, tool: Tool, raw_args: Any, *, inline: bool = False
    ) -> tuple[dict[str, Any], float]:
        """The call's result and the CPU time it took: what it holds the event loop for when
        inline (not the wait for a thread, nor for the GIL while other threads run). Inline, the
        backend does not wait for another writer: it answers "busy" at once instead."""
        started = time.thread_time()
        limit = self.settings.tool_time_limit_ms
        if inline:
            limit = min(INLINE_TIME_LIMIT_MS, limit)
        result = call_and_record(self.backend, handle, tool, raw_args, limit, inline=inline)
        return result, time.thread_time() - started
