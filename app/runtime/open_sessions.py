"""The session handles a worker keeps open, the opens in flight, and the open after a seed.

One open per session at a time: a request that needs a session another request (or the
prefetch) is opening waits for that open instead of starting its own. Right after a seed answers,
the new session is opened in the background, so the rollout's first tool call does not pay for
the open; only while the LRU has room (a prefetch never closes a session in use), and at most
`open_ahead_sessions` wait for their first call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from app.core.lru import LRU
from app.storage.base import SessionHandle

# (session id, ahead): `ahead` is True for a prefetch (SessionBackend.open).
Opener = Callable[[str, bool], Awaitable[SessionHandle]]


class OpenSessions:
    def __init__(
        self,
        capacity: int,
        opener: Opener,
        on_evict: Callable[[str, SessionHandle], None],
        ahead: int | None = None,
    ):
        """`ahead`: at most this many prefetched sessions wait for a first call (None: as many
        as the LRU has room for)."""

        def evicted(session_id: str, handle: SessionHandle) -> None:
            self._uncalled.discard(session_id)
            on_evict(session_id, handle)

        self._lru: LRU[str, SessionHandle] = LRU(capacity, evicted)
        self._opening: dict[str, asyncio.Future[SessionHandle]] = {}
        self._uncalled: set[str] = set()  # prefetched, no request has asked for them yet
        self._opener = opener
        self._ahead = capacity if ahead is None else ahead

    def get(self, session_id: str) -> SessionHandle | None:
        """The handle when the session is open now (no waiting, no opening)."""
        return self._lru.get(session_id)

    async def handle(self, session_id: str) -> SessionHandle:
        """The session's handle, opened (once) if it is not open."""
        self._uncalled.discard(session_id)
        handle = self._lru.get(session_id)
        if handle is not None:
            return handle
        pending = self._opening.get(session_id) or self._start_open(session_id, ahead=False)
        # Shielded: a request that gives up does not cancel the open others wait for.
        return await asyncio.shield(pending)

    def _start_open(self, session_id: str, *, ahead: bool) -> asyncio.Future[SessionHandle]:
        # Registered before it first runs: a close that comes first still waits for it.
        opening = asyncio.ensure_future(self._open(session_id, ahead))
        self._opening[session_id] = opening
        return opening

    async def _open(self, session_id: str, ahead: bool) -> SessionHandle:
        try:
            handle = await self._opener(session_id, ahead)
            self._lru.put(session_id, handle)
            return handle
        except BaseException:
            self._uncalled.discard(session_id)
            raise
        finally:
            self._opening.pop(session_id, None)

    def prefetch(self, session_id: str) -> bool:
        """Open the session in the background when there is room; True when it started."""
        if len(self._lru) + len(self._opening) >= self._lru.capacity:
            return False
        if len(self._uncalled) >= self._ahead:
            return False
        if session_id in self._lru or session_id in self._opening:
            return False
        self._uncalled.add(session_id)
        task = self._start_open(session_id, ahead=True)
        # A failed prefetch (the session was closed or deleted at once) is nobody's error: the
        # next request opens it again and answers for it.
        task.add_done_callback(_consume)
        return True

    async def settled(self, session_id: str) -> None:
        """Wait for an open of the session in flight (whatever its outcome): a close then finds
        the handle, and no open lands after the close."""
        pending = self._opening.get(session_id)
        if pending is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(pending)

    def pop(self, session_id: str) -> SessionHandle | None:
        self._uncalled.discard(session_id)
        return self._lru.pop(session_id)

    def values(self) -> list[SessionHandle]:
        return self._lru.values()

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._lru

    async def aclose(self) -> list[SessionHandle]:
        """Wait for every open in flight, then hand over every handle (to be closed)."""
        for session_id in list(self._opening):
            await self.settled(session_id)
        handles = self._lru.values()
        for session_id in self._lru.keys():
            self.pop(session_id)
        return handles


def _consume(task: asyncio.Future[SessionHandle]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" warning
