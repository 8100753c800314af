"""Lanes: each kind of heavy work on its own threads, shared fairly between clients.

Tool calls, session verifies, replays (a verify without a session, or of a closed one: the
calls come from the request body) and gold builds each run on an executor of their own, so none
queues behind another. In front of each executor a `ClientGate` caps how much of it one client
holds at once: its further requests wait in its own queue (first come, first served), never in
front of another client's. Where a refusal is safe (replays, which a client asks for as often as
it likes), a queue past its bound answers 429 with Retry-After instead of growing.

A client is the request's peer address (`client_of`, set per request by the protocol routes);
in-process callers (MCP, the CLI) share one key. Tool and verify pools keep one thread more than
one client may hold, so a client that holds its whole share leaves a thread for the others.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.errors import StateGymError

T = TypeVar("T")
LOCAL_CLIENT = "local"
_client: contextvars.ContextVar[str] = contextvars.ContextVar(
    "stategym_client", default=LOCAL_CLIENT
)


def set_client(peer: str | None) -> None:
    """Name the client of the request being handled (its peer address)."""
    _client.set(peer or LOCAL_CLIENT)


def client_of() -> str:
    """The client of the request being handled (LOCAL_CLIENT outside a request)."""
    return _client.get()


class TooManyRequests(StateGymError):
    """429: this client already holds its share of a lane and its queue is full."""

    status_code = 429
    error_type = "too_many_requests"


@dataclass
class _Client:
    in_flight: int = 0
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)


class ClientGate:
    """At most `per_client` slots per client; more wait in that client's FIFO (at most
    `queue` of them where a refusal is allowed: past it, TooManyRequests)."""

    def __init__(self, name: str, per_client: int, queue: int | None = None):
        self.name = name
        self.per_client = per_client
        self.queue = queue
        self._clients: dict[str, _Client] = {}

    def in_flight(self, client: str) -> int:
        state = self._clients.get(client)
        return state.in_flight if state else 0

    def waiting(self, client: str) -> int:
        state = self._clients.get(client)
        return len(state.waiters) if state else 0

    @asynccontextmanager
    async def slot(self, client: str, *, may_refuse: bool = False) -> AsyncIterator[None]:
        await self._acquire(client, may_refuse)
        try:
            yield
        finally:
            self._release(client)

    async def _acquire(self, client: str, may_refuse: bool) -> None:
        state = self._clients.setdefault(client, _Client())
        if state.in_flight < self.per_client and not state.waiters:
            state.in_flight += 1
            return
        if may_refuse and self.queue is not None and len(state.waiters) >= self.queue:
            if state.in_flight == 0 and not state.waiters:
                del self._clients[client]
            raise TooManyRequests(
                f"this client ({client}) already runs {state.in_flight} {self.name} and has "
                f"{len(state.waiters)} waiting, its share of this server; nothing was done",
                hint="Retry after the Retry-After seconds, or send fewer at once.",
                headers={"Retry-After": "1"},
                lane=self.name,
                per_client=self.per_client,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        state.waiters.append(waiter)
        try:
            await waiter  # handed a slot by `_release` (in_flight already counts it)
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release(client)  # granted, then cancelled: pass the slot on
            else:
                if waiter in state.waiters:  # `_release` may have dropped it already
                    state.waiters.remove(waiter)
                self._forget(client)
            raise

    def _release(self, client: str) -> None:
        state = self._clients[client]
        while state.waiters:
            waiter = state.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to it: in_flight unchanged
                return
        state.in_flight -= 1
        self._forget(client)

    def _forget(self, client: str) -> None:
        state = self._clients.get(client)
        if state is not None and state.in_flight == 0 and not state.waiters:
            del self._clients[client]


def _lower_priority(niceness: int) -> None:
    """Lower this thread's CPU priority (Linux: a thread id is a PRIO_PROCESS target)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):  # not Linux, or not permitted: the lane still works
        pass


class Lane:
    """An executor of `threads` threads behind a ClientGate (`renew` after a shutdown).
    `niceness` > 0 lowers its threads' CPU priority: background work (replays, gold builds)
    yields the cores to tool calls and verifies when they compete for them."""

    def __init__(
        self,
        name: str,
        threads: int,
        per_client: int,
        queue: int | None = None,
        *,
        niceness: int = 0,
    ):
        self.name = name
        self.threads = threads
        self.niceness = niceness
        self.gate = ClientGate(name, per_client, queue)
        self.executor = self._executor()

    def _executor(self) -> ThreadPoolExecutor:
        prefix = f"stategym-{self.name.replace(' ', '-')}"
        if self.niceness <= 0:
            return ThreadPoolExecutor(self.threads, thread_name_prefix=prefix)
        return ThreadPoolExecutor(
            self.threads,
            thread_name_prefix=prefix,
            initializer=_lower_priority,
            initargs=(self.niceness,),
        )

    async def run(
        self, fn: Callable[..., T], *args: Any, client: str | None = None, may_refuse: bool = False
    ) -> T:
        """`fn(*args)` on this lane's threads, within the client's share."""
        async with self.gate.slot(client or client_of(), may_refuse=may_refuse):
            return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def renew(self) -> None:
        """Wait for the running work, then start fresh threads (the manager stays usable)."""
        old, self.executor = self.executor, self._executor()
        old.shutdown(wait=True)


def shared_lane(name: str, threads: int, per_client: int | None) -> Lane:
    """A pool every client uses (tool calls, session verifies): one thread more than a
    client's share, so one client holding its whole share still leaves one free."""
    share = per_client or threads
    return Lane(name, max(threads, share + 1), share)
