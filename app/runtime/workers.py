"""What every job of a session manager shares: the backend, the worker threads and lanes, the
caches and budgets, the open-session handles and the judge.

Seeding (app/runtime/seeding.py), closing (closing.py) and verifying (verifying.py) each do their
work through one `SessionWorkers`; `SessionManager` (sessions.py) is one of these plus the three.
A lifespan's shutdown (`aclose`) replaces threads and handles in place, so the jobs read them from
here on every use rather than keeping their own references.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from app.core.tasks import TaskSpec
from app.errors import InvalidTask
from app.runtime.inline import InlinePolicy
from app.runtime.lanes import Lane, shared_lane
from app.runtime.llm_user import llm_user_of
from app.runtime.open_sessions import OpenSessions
from app.runtime.replay_cache import ReplayFiles
from app.sdk.environment import Environment
from app.settings import Settings
from app.storage.base import SessionBackend, SessionHandle, verify_threads, worker_threads
from app.storage.factory import make_backend
from app.storage.seeding import SeedError
from app.storage.snapshots import Snapshot
from app.verify.answers.answer_names import keep_answers_at_most
from app.verify.gold import GoldCache, WorkBudget
from app.verify.judge import Judge, JudgeSettings
from app.verify.state.patching import keep_at_most
from app.verify.steps.step_budget import StepBudget

# Replays and gold builds run at a lower CPU priority than tool calls and verifies
# (bench/history/attacks.md, "The verify stall").
BACKGROUND_NICENESS = 10

T = TypeVar("T")


class SessionWorkers:
    def __init__(self, settings: Settings, env: Environment, backend: SessionBackend | None = None):
        self.settings = settings
        self.env = env
        self.backend = backend if backend is not None else make_backend(settings, env)
        self.control = self.backend.control
        # Gold states replay on the SQLite snapshot images, whichever backend holds sessions.
        self.gold = GoldCache(
            self.backend.snapshots,
            settings.gold_cache_size,
            max_bytes=settings.gold_cache_mb * 2**20,
            budget=WorkBudget(settings.gold_budget_ms, settings.gold_cpu_ms),
        )
        # Files a verify without a session writes for tasks no session uses: bounded.
        self.replay_files = ReplayFiles(
            settings.replay_cache_files, settings.replay_cache_mb * 2**20
        )
        # The dumps verify patches (per process).
        keep_at_most(settings.pristine_cache_size, settings.pristine_cache_mb * 2**20)
        keep_answers_at_most(settings.answer_cache_mb * 2**20)  # answer vocabularies
        self.threads = worker_threads(settings, self.backend.capabilities)
        self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix="stategym")
        # Each kind of heavy work on its own lane, shared fairly between clients
        # (app/runtime/lanes.py): tool calls (a call may run to its time limit: agent SQL can)
        # and session verifies never hold up seeds and closes, which keep `executor`; replays
        # (their calls come from the request body) and gold builds (from the task row) never
        # hold up either, and no client holds more than its share of any of them.
        self.tool_lane = shared_lane("tool calls", self.threads, settings.tool_calls_per_client)
        self.verify_threads = verify_threads(settings, self.backend.capabilities)
        self.verify_lane = shared_lane("verifies", self.verify_threads, settings.verify_per_client)
        self.replay_lane = Lane(
            "replays",
            settings.replay_threads,
            settings.replay_per_client,
            settings.replay_queue_per_client,
            niceness=BACKGROUND_NICENESS,
        )
        self.gold_lane = Lane("gold builds", settings.gold_threads, 1, niceness=BACKGROUND_NICENESS)
        self.replay_budget = WorkBudget(settings.replay_budget_ms, settings.replay_cpu_ms)
        self.step_budget = StepBudget(
            max_rows=settings.step_reward_max_rows,
            max_states=settings.step_reward_max_states,
            max_ms=settings.step_reward_budget_ms,
        )
        # Fast tools run on the event loop (app/runtime/inline.py); off for environments that opt
        # out and on backends where every statement is a round trip.
        self.inline: InlinePolicy | None = (
            InlinePolicy(settings.inline_tool_budget_ms)
            if env.inline_tool_calls and self.backend.capabilities.inline_calls
            else None
        )
        # Evicted handles close on a thread of their own: queued behind the opens that evicted
        # them, a burst on an LRU full of other sessions held twice the connections at its peak.
        self._closer = _closer()
        self._open = self._open_sessions()
        # When this worker last served a call or verify of each session (Unix time): the idle
        # reaper's clock beside the backend's last write, which a read-only call on PostgreSQL
        # does not stamp. Kept only while the reaper runs; an entry goes at the session's close
        # here, or once older than the TTL (closed by another worker).
        self.touched: dict[str, float] = {}
        self._touching = bool(settings.session_idle_ttl_seconds)
        # LLM-as-judge for tasks with a rubric (STATEGYM_JUDGE_*); unconfigured, a rubric task
        # is masked rather than scored on its state alone.
        self.judge: Judge | None = Judge(JudgeSettings())

    def touch(self, session_id: str) -> None:
        """Note that a request used the session now (app/runtime/lifecycle.py reads it)."""
        if self._touching:
            self.touched[session_id] = time.time()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def _run_tool(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.tool_lane.run(fn, *args)

    async def _run_verify(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.verify_lane.run(fn, *args)

    async def _run_replay(self, fn: Callable[..., T], *args: Any) -> T:
        """A replay: its calls come from the request body, so past the client's queue it is
        a 429 (nothing done), never a wait in front of another client."""
        return await self.replay_lane.run(fn, *args, may_refuse=True)

    @property
    def tool_executor(self) -> ThreadPoolExecutor:
        return self.tool_lane.executor

    @property
    def verify_executor(self) -> ThreadPoolExecutor:
        return self.verify_lane.executor

    def _snapshot(self, task: TaskSpec) -> Snapshot:
        """The task's seeded snapshot; InvalidTask when its seed does not fit the models."""
        try:
            return self.backend.snapshot(task)
        except SeedError as exc:
            raise InvalidTask(
                f"the task's seed does not fit environment {self.env.name}: {exc}"
            ) from exc

    # --- open handles ------------------------------------------------------------------------
    def _open_sessions(self) -> OpenSessions:
        user = llm_user_of(self.settings)  # None: the scripted user (ToolContext.user)

        async def opener(session_id: str, ahead: bool) -> SessionHandle:
            handle = await self._run(partial(self.backend.open, session_id, ahead=ahead))
            if user is not None:
                handle.ctx = dataclasses.replace(handle.ctx, user=user)
            return handle

        return OpenSessions(
            self.settings.max_open_sessions,
            opener,
            self._on_evict,
            ahead=self.settings.open_ahead_sessions,
        )

    async def _handle(self, session_id: str) -> SessionHandle:
        return await self._open.handle(session_id)

    def _on_evict(self, _key: str, handle: SessionHandle) -> None:
        async def close_when_idle() -> None:
            async with handle.lock:
                await asyncio.get_running_loop().run_in_executor(self._closer, handle.close)

        asyncio.get_running_loop().create_task(close_when_idle())

    async def aclose(self) -> None:
        """Lifespan shutdown: close connections and threads. The manager stays usable (a test
        client may run the lifespan several times), so fresh ones replace them."""
        for handle in await self._open.aclose():
            handle.close()
        self._open = self._open_sessions()
        old, self.executor = (
            self.executor,
            ThreadPoolExecutor(self.threads, thread_name_prefix="stategym"),
        )
        old.shutdown(wait=True)
        for lane in (self.tool_lane, self.verify_lane, self.replay_lane, self.gold_lane):
            lane.renew()
        old_closer, self._closer = self._closer, _closer()
        old_closer.shutdown(wait=True)
        self.backend.dispose()
        if self.judge is not None:
            await self.judge.aclose()
            self.judge = Judge(self.judge.settings)


def _closer() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="stategym-close")
