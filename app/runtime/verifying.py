"""Verifying sessions four ways: an open session in one worker hop (its gold built ahead), an
open one whose gold must be built first, a closed or gone one by replaying the response's calls
on the task's snapshot, and a task in the request body with no session at all (stateless
reverify); then the judge for tasks with a rubric.

The task stored at seed is the only source of truth for scoring (app/verify/request_task.py).
A task whose gold cannot be built within its budget, or a session that is not there to score,
is a masked sample saying why (`lost_session`), never a reward nobody measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection

from app.core.tasks import TaskSpec, check_decline_code, task_from_data
from app.errors import SessionClosed, SessionNotFound
from app.runtime.closing import Closing
from app.runtime.reverify import replay_result
from app.runtime.workers import SessionWorkers
from app.storage.base import SessionHandle
from app.storage.control import SessionRecord
from app.verify.gold import GoldOverBudget, check_ground_truth
from app.verify.judge import JudgeSpec, apply_judge
from app.verify.request_task import ScoredTask, scored_task
from app.verify.result import VerifyResult
from app.verify.session_verify import verify_result
from app.verify.state.checks import compile_checks

# NeMo Gym's failure vocabulary (nemo_gym.failure_kinds).
SESSION_LOST = "session_lost"
SESSION_EXPIRED = "session_expired"
# Ours: the task's reference solution ran past the gold budget (settings.gold_budget_ms).
GOLD_BUDGET = "gold_budget"


def lost_session(kind: str, reason: str) -> dict[str, Any]:
    """Verify's answer for a session that is not there to score: a masked sample, so training
    drops it instead of failing the batch (or learning from a reward nobody measured)."""
    return VerifyResult.masked(kind, reason).to_payload()


class Verifying:
    def __init__(self, workers: SessionWorkers, closing: Closing):
        self.w = workers
        self.closing = closing  # close_on_verify

    async def _gold_ready(self, task: TaskSpec) -> str | None:
        """Build the task's gold state on the gold lane (within the client's share) before a
        verify needs it; why it cannot be built within its budget, else None."""
        if self.w.gold.cached(task):
            return None
        try:
            await self.w.gold_lane.run(self.w.gold.get, task)
        except GoldOverBudget as exc:
            return str(exc)
        return None

    async def verify(self, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Verify the cookie's session (a closed or gone one by replay); a task whose gold
        cannot be built within its budget is a masked sample saying why."""
        try:
            result = await self._verify_session(session_id, body)
        except GoldOverBudget as exc:  # its gold let go of meanwhile and built again
            result = VerifyResult.masked(GOLD_BUDGET, str(exc))
        return result.to_payload()

    async def _verify_session(self, session_id: str, body: Mapping[str, Any]) -> VerifyResult:
        handle = self.w._open.get(session_id)
        if handle is not None:
            # The common case (seed opened it, its gold built ahead): the record read, the
            # verify and, for a task without a judge, the record's update in one worker hop.
            async with handle.lock:
                done = await self.w._run_verify(self._verify_open, session_id, handle, body)
            if done is not None:
                return await self._verified(session_id, *done, body)
        record = await self.w._run(self.w.control.get, session_id)
        if record is None or record.env != self.w.env.name:
            reason = f"session {session_id} is unknown to this server"
            return VerifyResult.masked(SESSION_LOST, reason)
        # The task stored at seed is the only source of truth for scoring; the body gives the
        # response, and scoring fields it contradicts are flagged (app/verify/request_task.py).
        scored = scored_task(record.task, body)
        task = scored.task
        over = await self._gold_ready(task)  # on the gold lane, not the verify lane
        if over is not None:
            return VerifyResult.masked(GOLD_BUDGET, over)
        result: VerifyResult | None = None
        if record.status != "closed":
            try:
                handle = await self.w._handle(session_id)
            except (SessionClosed, SessionNotFound):  # closed by another worker, or deleted
                handle = None
            if handle is not None:
                async with handle.lock:
                    result = await self.w._run_verify(
                        self._verify, handle, task, body.get("response")
                    )
        if result is None:
            # Closed or gone: scored by replaying its calls on the snapshot (app/runtime/reverify).
            result = await self.w._run_replay(self._replay_verify, task, body.get("response"))
        return await self._verified(session_id, record, scored, result, False, body)

    def _verify_open(
        self, session_id: str, handle: SessionHandle, body: Mapping[str, Any]
    ) -> tuple[SessionRecord, ScoredTask, VerifyResult, bool] | None:
        """Verify an open session in one worker hop: (record, scored task, result, whether the
        record was marked verified). None when the slow path must answer (unknown, or closed)."""
        record = self.w.control.get(session_id)
        if record is None or record.env != self.w.env.name or record.status == "closed":
            return None
        scored = scored_task(record.task, body)
        if not self.w.gold.cached(scored.task):
            return None  # the slow path builds it on the gold lane first
        result = self._verify(handle, scored.task, body.get("response"))
        if JudgeSpec.from_task(scored.judge_input.get("judge")) is not None:
            return record, scored, result, False  # the judge is awaited on the event loop
        return record, scored, self._settle(record, scored, result), True

    def _settle(
        self, record: SessionRecord, scored: ScoredTask, result: VerifyResult
    ) -> VerifyResult:
        """The verify's last word: scoring fields the body contradicts flagged, and the record
        marked verified with the result as stored (capped in size, app/verify/evidence.py)."""
        if scored.mismatch:
            result.task_mismatch = list(scored.mismatch)
        self.w.control.mark_verified(record.id, result.reward, result.stored())
        return result

    async def _verified(
        self,
        session_id: str,
        record: SessionRecord,
        scored: ScoredTask,
        result: VerifyResult,
        marked: bool,
        body: Mapping[str, Any],
    ) -> VerifyResult:
        """The rest of a verify: the judge (tasks with a rubric) and the record's update unless
        done already, then close_on_verify."""
        if not marked:
            if self.w.judge is not None:
                # Free-text answers graded against the task's rubric (no-op without one).
                result = await apply_judge(
                    result, scored.judge_input, body.get("response"), self.w.judge, session_id
                )
            result = await self.w._run(self._settle, record, scored, result)
        if self.w.settings.close_on_verify and record.status != "closed":
            await self.closing.close(session_id)
        return result

    async def reverify(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A verify without a session (NeMo Gym's stateless reverify): the task row in `body`
        is scored by replaying `body.response`'s calls on the task's snapshot, on the replay
        lane within the client's share (429 past its queue)."""
        task = task_from_data(body)
        compile_checks(self.w.env.metadata.tables, self.w.env.compare, task.expected_state)
        check_decline_code(task, self.w.env.decline_codes, self.w.env.name)
        check_ground_truth(task, self.w.settings.ground_truth_max_calls)
        try:
            over = await self._gold_ready(task)
            if over is not None:
                return lost_session(GOLD_BUDGET, over)
            result = await self.w._run_replay(self._stateless_replay, task, body.get("response"))
        except GoldOverBudget as exc:
            return lost_session(GOLD_BUDGET, str(exc))
        if self.w.judge is not None:
            result = await apply_judge(result, dict(body), body.get("response"), self.w.judge, "")
        return result.to_payload()

    def _stateless_replay(self, task: TaskSpec, response: Any) -> VerifyResult:
        """`_replay_verify` for a task in a request body: the snapshot and gold files it
        creates go to the bounded replay cache (app/runtime/replay_cache.py)."""
        paths = [
            self.w.backend.snapshots.snapshot_path(task.snapshot_key),
            self.w.gold.gold_path(task),
        ]
        created = [p for p in paths if not p.exists()]
        try:
            return self._replay_verify(task, response)
        finally:
            self.w.replay_files.touch(paths)
            self.w.replay_files.keep(created)

    def _replay_verify(self, task: TaskSpec, response: Any) -> VerifyResult:
        snapshot = self.w._snapshot(task)
        return replay_result(
            env=self.w.env,
            snapshot=snapshot,
            gold=self.w.gold,
            task=task,
            response=response,
            diff_limit=self.w.settings.verify_diff_limit,
            time_limit_ms=self.w.settings.tool_time_limit_ms,
            step_budget=self.w.step_budget,
            max_calls=self.w.settings.replay_max_calls,
            budget=self.w.replay_budget,
            policy_penalty=self.w.settings.policy_violation_penalty,
        )

    def _verify(self, handle: SessionHandle, task: TaskSpec, response: Any) -> VerifyResult:
        # `task` is the one stored at seed (app/verify/request_task.py), parsed once: its seed is
        # the snapshot this session was cloned from, where the gold replay starts.
        def work(bind: Connection) -> VerifyResult:
            return verify_result(
                env=self.w.env,
                gold=self.w.gold,
                engine=bind,  # type: ignore[arg-type]  # a Session binds either
                task=task,
                response=response,
                diff_limit=self.w.settings.verify_diff_limit,
                step_budget=self.w.step_budget,
                policy_penalty=self.w.settings.policy_violation_penalty,
            )

        return self.w.backend.read(handle, work)
