"""Sessions: one rollout's database plus its control record; seed, tool calls, verify, close.

This is the protocol flow only; where state lives is the storage backend's (app/storage/base.py),
built once from settings. Each request does its database work in exactly one hop to a worker
thread, so a tool call costs one transaction and one hop; on a backend with `inline_calls`, a
tool whose calls have proven fast runs on the event loop instead, with no hop
(app/runtime/inline.py). Calls on one session are serialised by a per-session asyncio lock (and,
across worker processes or replicas, by the backend's lock); calls on different sessions run
concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, TypeVar

from sqlalchemy import Connection

from app.clock import created_now, issued_at
from app.core.tasks import SeedRequest, TaskSpec, check_decline_code, task_from_data
from app.errors import (
    InvalidTask,
    NotOwner,
    ReleaseFailed,
    SeedConflict,
    SessionClosed,
    SessionNotFound,
    SessionUnavailable,
)
from app.runtime.claims import same_task_data, tombstone_lapsed
from app.runtime.inline import InlinePolicy
from app.runtime.lanes import Lane, client_of, shared_lane
from app.runtime.llm_user import llm_user_of
from app.runtime.open_sessions import OpenSessions
from app.runtime.ownership import check_closer, owned_session_id
from app.runtime.replay_cache import ReplayFiles
from app.runtime.reverify import replay_verify
from app.runtime.steps import StepRecorder
from app.sdk.environment import Environment, Tool
from app.settings import Settings
from app.storage.base import SessionBackend, SessionHandle, verify_threads, worker_threads
from app.storage.control import (
    CLAIM_CLOSED,
    CLAIM_OPEN,
    CLAIM_SEEDING,
    ResourcesClaim,
    SessionRecord,
    deletes_on_close,
)
from app.storage.driver import NO_ROOM, RETRY_IN_THREAD, DbError
from app.storage.factory import make_backend
from app.storage.runner import run_tool
from app.storage.seeding import SeedError
from app.storage.snapshots import Snapshot
from app.verify.answer_names import keep_answers_at_most
from app.verify.checks import compile_checks
from app.verify.evidence import Known, cap_evidence
from app.verify.gold import GoldCache, GoldOverBudget, WorkBudget, check_ground_truth
from app.verify.judge import Judge, JudgeSettings, JudgeSpec, apply_judge
from app.verify.patching import keep_at_most
from app.verify.request_task import ScoredTask, scored_task
from app.verify.session_verify import verify_state
from app.verify.step_budget import StepBudget

log = logging.getLogger("stategym.sessions")


GOLD_AHEAD_DELAY_S = 0.005
# Replays and gold builds run at a lower CPU priority than tool calls and verifies
# (bench/history/attacks.md, "The verify stall").
BACKGROUND_NICENESS = 10


T = TypeVar("T")
# A call on the event loop (a proven-fast tool, app/runtime/inline.py) is stopped after this long
# and run again in a thread: an argument that makes a fast tool slow holds the loop at most this
# long.
INLINE_TIME_LIMIT_MS = 20


class SessionManager:
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
        self._background: set[asyncio.Task[None]] = set()  # gold builds started at seed
        self._open = self._open_sessions()
        # LLM-as-judge for tasks with a rubric (STATEGYM_JUDGE_*); unconfigured, a rubric task
        # is masked rather than scored on its state alone.
        self.judge: Judge | None = Judge(JudgeSettings())

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

    async def _gold_ready(self, task: TaskSpec) -> str | None:
        """Build the task's gold state on the gold lane (within the client's share) before a
        verify needs it; why it cannot be built within its budget, else None."""
        if self.gold.cached(task):
            return None
        try:
            await self.gold_lane.run(self.gold.get, task)
        except GoldOverBudget as exc:
            return str(exc)
        return None

    # --- lifecycle ---------------------------------------------------------------------------
    async def seed(self, request: SeedRequest) -> Seeded:
        """A new session; for a typed seed, the existing one when its id was seeded before by
        the same episode (NeMo Gym retries seeds). A legacy seed is always a new rollout."""
        if request.resources_session_id is None:
            session_id, created_at = secrets.token_hex(16), created_now()
            await self._run(self._create, session_id, request, created_at)
            self._prefetch(session_id)
            self._gold_ahead(request.task)
            return Seeded(session_id, issued_at(created_at), created=True)
        return await self._seed_typed(request, request.resources_session_id)

    async def _seed_typed(self, request: SeedRequest, rsid: str) -> Seeded:
        deadline = time.monotonic() + SEED_WAIT_SECONDS
        while True:
            session_id, created_at = secrets.token_hex(16), created_now()
            held = await self._run(self._claim_or_create, rsid, session_id, request, created_at)
            if held is None:
                self._prefetch(session_id)
                self._gold_ahead(request.task)
                return Seeded(session_id, issued_at(created_at), created=True)
            seeded = await self._existing(held, request)
            if seeded is not None:
                return seeded
            # Another request is seeding this id right now: wait for it, then answer as it did.
            if _age_seconds(held.updated_at) > STALE_CLAIM_SECONDS:  # its seeder died
                await self._run(self.control.release_claim, held.env, rsid, held.session_id)
            elif time.monotonic() > deadline:
                raise SessionUnavailable(
                    f"resources_session_id {rsid!r} is still being seeded by another request",
                    hint="Retry the seed in a few seconds.",
                )
            await asyncio.sleep(SEED_POLL_SECONDS)

    async def _existing(self, held: ResourcesClaim, request: SeedRequest) -> Seeded | None:
        """The answer to a seed of an id someone holds; None while it is still being seeded."""
        rsid = held.resources_session_id
        if held.state == CLAIM_CLOSED and held.session_id is None:
            if tombstone_lapsed(held, request.episode, self.settings.tombstone_ttl_seconds):
                await self._run(self.control.drop_tombstone, held)
                return None  # claimed afresh on the next pass
        if held.state == CLAIM_CLOSED:
            raise SeedConflict(
                f"resources_session_id {rsid!r} was closed; a closed session cannot be seeded "
                "again",
                hint="Use a new resources_session_id for a new rollout.",
            )
        if held.episode != request.episode:
            raise SeedConflict(
                f"resources_session_id {rsid!r} is already seeded for episode {held.episode}, "
                f"not {request.episode}",
                hint="Use a new resources_session_id for another episode.",
            )
        if held.state != CLAIM_OPEN or held.session_id is None:
            return None
        record = await self._run(self.control.get, held.session_id)
        if record is None or record.status == "closed":
            raise SeedConflict(f"resources_session_id {rsid!r} was closed; it cannot be reseeded")
        if not same_task_data(record.task, request.task.data):
            # A retry after a lost reply carries the very same body; anything else is another
            # rollout, which must not be handed this session's cookie.
            raise SeedConflict(
                f"resources_session_id {rsid!r} is already seeded with different task data",
                hint="Use a new resources_session_id for another task; a retried seed must "
                "repeat the first one's task_data exactly.",
            )
        return Seeded(record.id, issued_at(record.created_at), created=False)

    def _claim_or_create(
        self, rsid: str, session_id: str, request: SeedRequest, created_at: datetime
    ) -> ResourcesClaim | None:
        """One hop for a typed seed: the claim of whoever holds `rsid`, or None once this call
        has claimed it and made the session."""
        held = self.control.claim(self.env.name, rsid)
        return held if held is not None else self._create(session_id, request, created_at)

    def _create(
        self, session_id: str, request: SeedRequest, created_at: datetime
    ) -> ResourcesClaim | None:
        """Make the session (control row, then database). With a resources_session_id, None
        when this call claimed it, else the claim of whoever holds it (nothing is made)."""
        task, rsid = request.task, request.resources_session_id
        # Checks naming unknown tables or columns are refused now, not at verify.
        compile_checks(self.env.metadata.tables, self.env.compare, task.expected_state)
        check_decline_code(task, self.env.decline_codes, self.env.name)
        check_ground_truth(task, self.settings.ground_truth_max_calls)
        snapshot = self._snapshot(task)
        # The control row comes first: a crash between the two leaves a row without a
        # database (the reaper closes it) rather than a database nobody knows about.
        held = self.control.add(
            session_id=session_id,
            env=self.env.name,
            task_id=task.task_id,
            snapshot_key=snapshot.key,
            resources_session_id=rsid,
            file=self.backend.location(session_id),
            task=dict(task.data),
            created_at=created_at,
            episode=request.episode,
        )
        if held is not None:
            return held
        try:
            self.backend.create(session_id, snapshot)
        except BaseException:
            self.control.delete([session_id])
            if rsid is not None:
                self.control.release_claim(self.env.name, rsid, session_id)
            raise
        if rsid is not None and not self.control.open_claim(self.env.name, rsid, session_id):
            # A close of this id arrived while we were seeding: the session must not live.
            record = self.control.get(session_id)
            if record is not None:
                self._close_record(None, record)
            raise SeedConflict(f"resources_session_id {rsid!r} was closed while being seeded")
        return None

    async def close(self, session_id: str) -> bool:
        """Close by cookie. Idempotent: False when it was closed already (or never existed).
        One hop to a worker: the record read, the release and the record's update."""
        await self._open.settled(session_id)  # an open in flight (the seed's prefetch) lands first
        handle = self._open.pop(session_id)
        if handle is not None:
            async with handle.lock:
                return await self._run(self._close_by_id, session_id, handle)
        return await self._run(self._close_by_id, session_id, None)

    def _close_by_id(self, session_id: str, handle: SessionHandle | None) -> bool:
        record = self.control.get(session_id)
        if record is None or record.env != self.env.name:
            if handle is not None:  # never expected: handles are opened for known sessions
                handle.close()
            if record is None:
                return False
            raise NotOwner(
                f"session {session_id} belongs to environment {record.env!r}, not "
                f"{self.env.name!r}; close it on its own server"
            )
        closed_now = self._close_record(handle, record)
        if record.resources_session_id is not None:
            self.control.close_claim(self.env.name, record.resources_session_id, None)
        return closed_now

    async def close_by_resources_id(
        self, rsid: str, episode: str | None, cookie_session_id: str | None
    ) -> bool:
        """Close what a typed seed made under `rsid` in this environment; an id never seeded
        gets a tombstone so a late seed of it is refused. False when already closed.

        Ownership: a request with our cookie may close only that cookie's session; a
        cookieless one must name the episode that seeded it. Two hops: the claim and record
        read, then the release with the claim's close."""
        record = await self._run(self._held_for_close, rsid, episode, cookie_session_id)
        if record is False:
            return False
        if record is None:  # a seed in flight closes its own session (_create)
            await self._run(self.control.close_claim, self.env.name, rsid, episode)
            return False
        await self._open.settled(record.id)
        handle = self._open.pop(record.id)
        if handle is None:
            return await self._run(self._close_with_claim, None, record, rsid, episode)
        async with handle.lock:
            return await self._run(self._close_with_claim, handle, record, rsid, episode)

    def _held_for_close(
        self, rsid: str, episode: str | None, cookie_session_id: str | None
    ) -> SessionRecord | None | Literal[False]:
        """False when there is nothing to close (a tombstone now or already); else the record
        of the session `rsid` holds, or None while that session is still being seeded."""
        held = self.control.claim(self.env.name, rsid)
        if held is None:
            if self.control.close_claim(self.env.name, rsid, episode):
                return False  # a tombstone: nothing was open
            held = self.control.claim(self.env.name, rsid)  # a seed won
            if held is None:
                return False
        if held.session_id is None:  # a tombstone already: by another episode is a conflict
            if episode is not None and held.episode is not None and episode != held.episode:
                raise SeedConflict(
                    f"resources_session_id {rsid!r} was closed by another episode than {episode}"
                )
            return False
        check_closer(held, episode, cookie_session_id)
        if held.state == CLAIM_SEEDING:
            return None
        return self.control.get(held.session_id)  # None: gone, so only the claim is closed

    def _close_with_claim(
        self, handle: SessionHandle | None, record: SessionRecord, rsid: str, episode: str | None
    ) -> bool:
        closed_now = self._close_record(handle, record)
        # Recorded only once the release worked: a failure above leaves the id open to retry.
        self.control.close_claim(self.env.name, rsid, episode)
        return closed_now

    def _close_record(self, handle: SessionHandle | None, record: SessionRecord) -> bool:
        """Release the session (closed in its own database, deleted per retention), then
        record it closed. A release that fails is ReleaseFailed and leaves the record open."""
        try:
            delete = deletes_on_close(self.settings.retention, record.reward)
            if handle is not None or record.status != "closed":
                self.backend.release(handle, record.id, delete=delete)
            elif delete:
                self.backend.drop(record.id)
        except Exception as exc:
            log.exception("releasing session %s failed", record.id)
            raise ReleaseFailed(
                f"session {record.id} could not be released ({type(exc).__name__}: {exc}); "
                "it is not recorded as closed",
                hint="Retry /close_session.",
            ) from exc
        closed_now = self.control.mark_closed(record.id, dropped=delete)
        if delete and not closed_now:  # closed before, its database deleted only now
            self.control.mark_dropped(record.id)
        return closed_now

    async def owned(self, rsid: str | None, cookie_session_id: str | None) -> str:
        """The session a request holds: its cookie's, or the one `rsid` names when that is
        the cookie's (app/runtime/ownership.py, the rule of every session route but close)."""
        if rsid is None or cookie_session_id is None:
            return owned_session_id(self.control, self.env.name, rsid, cookie_session_id)
        return await self._run(
            owned_session_id, self.control, self.env.name, rsid, cookie_session_id
        )

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

    def _prefetch(self, session_id: str) -> None:
        """Open a just-seeded session in the background (app/runtime/open_sessions.py)."""
        if self.settings.open_on_seed:
            self._open.prefetch(session_id)

    def _gold_ahead(self, task: TaskSpec) -> None:
        """Build the task's gold state in the background while the rollout runs, so its first
        verify finds it ready (a first seed of a task is followed by seconds of agent turns)."""
        if not self.settings.gold_on_seed or self.gold.cached(task):
            return

        # A key of its own: builds ahead of a burst of seeds never queue the client's verifies
        # (which may need a gold now) behind them.
        client = f"{client_of()} (ahead)"

        async def build() -> None:
            try:
                await self.gold_lane.run(self.gold.get, task, client=client)
            except RuntimeError:  # shut down meanwhile: the verify (if any) builds it
                return
            except Exception as exc:  # noqa: BLE001 - built again (and answered) at verify
                log.warning("gold state built at seed failed: %r", exc)

        def start() -> None:
            started = asyncio.get_running_loop().create_task(build())
            self._background.add(started)  # kept referenced until it is done
            started.add_done_callback(self._background.discard)

        # Started once the seed's answer is on its way: a build holding the GIL meanwhile
        # would delay that answer by its switch interval.
        asyncio.get_running_loop().call_later(GOLD_AHEAD_DELAY_S, start)

    def _on_evict(self, _key: str, handle: SessionHandle) -> None:
        async def close_when_idle() -> None:
            async with handle.lock:
                await asyncio.get_running_loop().run_in_executor(self._closer, handle.close)

        asyncio.get_running_loop().create_task(close_when_idle())

    # --- tools and verify --------------------------------------------------------------------
    async def call_tool(self, session_id: str, tool: Tool, raw_args: Any) -> dict[str, Any]:
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

        def unlogged(bind: Connection) -> dict[str, Any]:
            return run_tool(bind, tool, raw_args, handle.ctx, limit)

        if not self.backend.logs_steps(handle):
            result = self.backend.call(handle, tool, unlogged, limit_ms=limit, inline=inline)
            return result, time.thread_time() - started
        # The step log (app/runtime/steps.py): a success's step in its own transaction.
        step = StepRecorder(tool.name, raw_args)

        def logged(bind: Connection) -> dict[str, Any]:
            return run_tool(bind, tool, raw_args, handle.ctx, limit, step.on_success)

        result = self.backend.call(handle, tool, logged, limit_ms=limit, inline=inline)
        code = result.get("error", {}).get("code")
        if code in NO_ROOM:
            # No room for the step itself: the call runs unlogged (a lookup still answers).
            result = self.backend.call(handle, tool, unlogged, limit_ms=limit, inline=inline)
            return result, time.thread_time() - started
        # An inline attempt that was busy or too slow runs again in a thread: not a step yet.
        if code is not None and not (inline and code in RETRY_IN_THREAD):
            self.backend.write_failed_step(handle, step.failure_writer(result))
        return result, time.thread_time() - started

    async def verify(self, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Verify the cookie's session (a closed or gone one by replay); a task whose gold
        cannot be built within its budget is a masked sample saying why."""
        try:
            return await self._verify_session(session_id, body)
        except GoldOverBudget as exc:  # its gold let go of meanwhile and built again
            return lost_session(GOLD_BUDGET, str(exc))

    async def _verify_session(self, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        handle = self._open.get(session_id)
        if handle is not None:
            # The common case (seed opened it, its gold built ahead): the record read, the
            # verify and, for a task without a judge, the record's update in one worker hop.
            async with handle.lock:
                done = await self._run_verify(self._verify_open, session_id, handle, body)
            if done is not None:
                return await self._verified(session_id, *done, body)
        record = await self._run(self.control.get, session_id)
        if record is None or record.env != self.env.name:
            return lost_session(SESSION_LOST, f"session {session_id} is unknown to this server")
        # The task stored at seed is the only source of truth for scoring; the body gives the
        # response, and scoring fields it contradicts are flagged (app/verify/request_task.py).
        scored = scored_task(record.task, body)
        task = scored.task
        over = await self._gold_ready(task)  # on the gold lane, not the verify lane
        if over is not None:
            return lost_session(GOLD_BUDGET, over)
        result: dict[str, Any] | None = None
        if record.status != "closed":
            try:
                handle = await self._handle(session_id)
            except (SessionClosed, SessionNotFound):  # closed by another worker, or deleted
                handle = None
            if handle is not None:
                async with handle.lock:
                    result = await self._run_verify(
                        self._verify, handle, record, task, body.get("response")
                    )
        if result is None:
            # Closed or gone: scored by replaying its calls on the snapshot (app/runtime/reverify).
            result = await self._run_replay(self._replay_verify, task, body.get("response"))
        return await self._verified(session_id, record, scored, result, False, body)

    def _verify_open(
        self, session_id: str, handle: SessionHandle, body: Mapping[str, Any]
    ) -> tuple[SessionRecord, ScoredTask, dict[str, Any], bool] | None:
        """Verify an open session in one worker hop: (record, scored task, result, whether the
        record was marked verified). None when the slow path must answer (unknown, or closed)."""
        record = self.control.get(session_id)
        if record is None or record.env != self.env.name or record.status == "closed":
            return None
        scored = scored_task(record.task, body)
        if not self.gold.cached(scored.task):
            return None  # the slow path builds it on the gold lane first
        known: Known = {}  # evidence parts capped already: not walked again below
        result = self._verify(handle, record, scored.task, body.get("response"), known)
        if JudgeSpec.from_task(scored.judge_input.get("judge")) is not None:
            return record, scored, result, False  # the judge is awaited on the event loop
        if scored.mismatch:
            result["task_mismatch"] = list(scored.mismatch)
        # What is stored is capped in size, as what is shown (app/verify/evidence.py).
        stored = cap_evidence(result, known=known)
        self.control.mark_verified(record.id, result["reward"], stored)
        return record, scored, result, True

    async def _verified(
        self,
        session_id: str,
        record: SessionRecord,
        scored: ScoredTask,
        result: dict[str, Any],
        marked: bool,
        body: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The rest of a verify: the judge (tasks with a rubric), the mismatch flag and the
        record's update unless done already, then close_on_verify."""
        if not marked:
            if self.judge is not None:
                # Free-text answers graded against the task's rubric (no-op without one).
                result = await apply_judge(
                    result, scored.judge_input, body.get("response"), self.judge, session_id
                )
            if scored.mismatch:
                result["task_mismatch"] = list(scored.mismatch)
            await self._run(
                self.control.mark_verified, record.id, result["reward"], cap_evidence(result)
            )
        if self.settings.close_on_verify and record.status != "closed":
            await self.close(session_id)
        return result

    async def reverify(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A verify without a session (NeMo Gym's stateless reverify): the task row in `body`
        is scored by replaying `body.response`'s calls on the task's snapshot, on the replay
        lane within the client's share (429 past its queue)."""
        task = task_from_data(body)
        compile_checks(self.env.metadata.tables, self.env.compare, task.expected_state)
        check_decline_code(task, self.env.decline_codes, self.env.name)
        check_ground_truth(task, self.settings.ground_truth_max_calls)
        try:
            over = await self._gold_ready(task)
            if over is not None:
                return lost_session(GOLD_BUDGET, over)
            result = await self._run_replay(self._stateless_replay, task, body.get("response"))
        except GoldOverBudget as exc:
            return lost_session(GOLD_BUDGET, str(exc))
        if self.judge is not None:
            result = await apply_judge(result, dict(body), body.get("response"), self.judge, "")
        return result

    def _stateless_replay(self, task: TaskSpec, response: Any) -> dict[str, Any]:
        """`_replay_verify` for a task in a request body: the snapshot and gold files it
        creates go to the bounded replay cache (app/runtime/replay_cache.py)."""
        paths = [self.backend.snapshots.snapshot_path(task.snapshot_key), self.gold.gold_path(task)]
        created = [p for p in paths if not p.exists()]
        try:
            return self._replay_verify(task, response)
        finally:
            self.replay_files.touch(paths)
            self.replay_files.keep(created)

    def _snapshot(self, task: TaskSpec) -> Snapshot:
        """The task's seeded snapshot; InvalidTask when its seed does not fit the models."""
        try:
            return self.backend.snapshot(task)
        except SeedError as exc:
            raise InvalidTask(
                f"the task's seed does not fit environment {self.env.name}: {exc}"
            ) from exc

    def _replay_verify(self, task: TaskSpec, response: Any) -> dict[str, Any]:
        snapshot = self._snapshot(task)
        return replay_verify(
            env=self.env,
            snapshot=snapshot,
            gold=self.gold,
            task=task,
            response=response,
            diff_limit=self.settings.verify_diff_limit,
            time_limit_ms=self.settings.tool_time_limit_ms,
            step_budget=self.step_budget,
            max_calls=self.settings.replay_max_calls,
            budget=self.replay_budget,
            policy_penalty=self.settings.policy_violation_penalty,
        )

    def _verify(
        self,
        handle: SessionHandle,
        record: SessionRecord,
        task: TaskSpec,
        response: Any,
        known: Known | None = None,
    ) -> dict[str, Any]:
        # `task` is the one stored at seed (app/verify/request_task.py), parsed once: its seed is
        # the snapshot this session was cloned from, where the gold replay starts.
        def work(bind: Connection) -> dict[str, Any]:
            return verify_state(
                env=self.env,
                gold=self.gold,
                engine=bind,  # type: ignore[arg-type]  # a Session binds either
                task=task,
                response=response,
                diff_limit=self.settings.verify_diff_limit,
                step_budget=self.step_budget,
                known=known,
                policy_penalty=self.settings.policy_violation_penalty,
            )

        return self.backend.read(handle, work)

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


# NeMo Gym's failure vocabulary (nemo_gym.failure_kinds).
SESSION_LOST = "session_lost"
SESSION_EXPIRED = "session_expired"
# Ours: the task's reference solution ran past the gold budget (settings.gold_budget_ms).
GOLD_BUDGET = "gold_budget"


def lost_session(kind: str, reason: str) -> dict[str, Any]:
    """Verify's answer for a session that is not there to score: a masked sample, so training
    drops it instead of failing the batch (or learning from a reward nobody measured)."""
    return {"reward": 0.0, "mask_sample": True, "failure_kind": kind, "failure_reason": reason}


@dataclass(frozen=True)
class Seeded:
    session_id: str
    # The cookie's issue time, from the session's creation: a repeated seed gets the same cookie.
    issued: int
    created: bool


# A retried seed waits this long for the first one to finish; a claim older than the stale limit
# belongs to a seeder that died (a cold snapshot takes well under a second).
SEED_WAIT_SECONDS = 30.0
SEED_POLL_SECONDS = 0.01
STALE_CLAIM_SECONDS = 120.0


def _age_seconds(stamp: datetime) -> float:
    return time.time() - stamp.replace(tzinfo=UTC).timestamp()


def _closer() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="stategym-close")
