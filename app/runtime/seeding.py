"""Seeding sessions: a legacy seed (always a new rollout) and a typed one, whose
resources_session_id is claimed first so a retried seed answers the session it made.

A seed makes the control row, then the database cloned from the task's snapshot; right after it
answers, the session is opened in the background and the task's gold state built, so the
rollout's first call and its verify do not wait for either, and a clone of the seed base is
made for the next never-seen task's snapshot to start from. The rules of a seed that meets a
held id are app/runtime/claims.py's.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from app.clock import created_now, issued_at
from app.core.tasks import SeedRequest, TaskSpec, check_decline_code
from app.errors import SeedConflict, SessionUnavailable
from app.runtime.claims import same_task_data, tombstone_lapsed
from app.runtime.closing import Closing
from app.runtime.lanes import client_of
from app.runtime.workers import SessionWorkers
from app.storage.control import CLAIM_CLOSED, CLAIM_OPEN, ResourcesClaim
from app.verify.gold import check_ground_truth
from app.verify.state.checks import compile_checks

log = logging.getLogger("stategym.sessions")

GOLD_AHEAD_DELAY_S = 0.005
# A retried seed waits this long for the first one to finish; a claim older than the stale limit
# belongs to a seeder that died (a cold snapshot takes well under a second).
SEED_WAIT_SECONDS = 30.0
SEED_POLL_SECONDS = 0.01
STALE_CLAIM_SECONDS = 120.0


@dataclass(frozen=True)
class Seeded:
    session_id: str
    # The cookie's issue time, from the session's creation: a repeated seed gets the same cookie.
    issued: int
    created: bool


class Seeding:
    def __init__(self, workers: SessionWorkers, closing: Closing):
        self.w = workers
        self.closing = closing  # a close that races a typed seed ends the session it made
        self._background: set[asyncio.Task[None]] = set()  # work started at seed (`_ahead`)

    async def seed(self, request: SeedRequest) -> Seeded:
        """A new session; for a typed seed, the existing one when its id was seeded before by
        the same episode (NeMo Gym retries seeds). A legacy seed is always a new rollout."""
        if request.resources_session_id is None:
            session_id, created_at = secrets.token_hex(16), created_now()
            await self.w._run(self._create, session_id, request, created_at)
            self._prefetch(session_id)
            self._ahead(request.task)
            return Seeded(session_id, issued_at(created_at), created=True)
        return await self._seed_typed(request, request.resources_session_id)

    async def _seed_typed(self, request: SeedRequest, rsid: str) -> Seeded:
        deadline = time.monotonic() + SEED_WAIT_SECONDS
        while True:
            session_id, created_at = secrets.token_hex(16), created_now()
            held = await self.w._run(self._claim_or_create, rsid, session_id, request, created_at)
            if held is None:
                self._prefetch(session_id)
                self._ahead(request.task)
                return Seeded(session_id, issued_at(created_at), created=True)
            seeded = await self._existing(held, request)
            if seeded is not None:
                return seeded
            # Another request is seeding this id right now: wait for it, then answer as it did.
            if _age_seconds(held.updated_at) > STALE_CLAIM_SECONDS:  # its seeder died
                await self.w._run(self.w.control.release_claim, held.env, rsid, held.session_id)
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
            if tombstone_lapsed(held, request.episode, self.w.settings.tombstone_ttl_seconds):
                await self.w._run(self.w.control.drop_tombstone, held)
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
        record = await self.w._run(self.w.control.get, held.session_id)
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
        held = self.w.control.claim(self.w.env.name, rsid)
        return held if held is not None else self._create(session_id, request, created_at)

    def _create(
        self, session_id: str, request: SeedRequest, created_at: datetime
    ) -> ResourcesClaim | None:
        """Make the session (control row, then database). With a resources_session_id, None
        when this call claimed it, else the claim of whoever holds it (nothing is made)."""
        task, rsid = request.task, request.resources_session_id
        # Checks naming unknown tables or columns are refused now, not at verify.
        compile_checks(self.w.env.metadata.tables, self.w.env.compare, task.expected_state)
        check_decline_code(task, self.w.env.decline_codes, self.w.env.name)
        check_ground_truth(task, self.w.settings.ground_truth_max_calls)
        snapshot = self.w._snapshot(task)
        # The control row comes first: a crash between the two leaves a row without a
        # database (the reaper closes it) rather than a database nobody knows about.
        held = self.w.control.add(
            session_id=session_id,
            env=self.w.env.name,
            task_id=task.task_id,
            snapshot_key=snapshot.key,
            resources_session_id=rsid,
            file=self.w.backend.location(session_id),
            task=dict(task.data),
            created_at=created_at,
            episode=request.episode,
        )
        if held is not None:
            return held
        try:
            self.w.backend.create(session_id, snapshot)
        except BaseException:
            self.w.control.delete([session_id])
            if rsid is not None:
                self.w.control.release_claim(self.w.env.name, rsid, session_id)
            raise
        if rsid is not None and not self.w.control.open_claim(self.w.env.name, rsid, session_id):
            # A close of this id arrived while we were seeding: the session must not live.
            record = self.w.control.get(session_id)
            if record is not None:
                self.closing.close_record(None, record)
            raise SeedConflict(f"resources_session_id {rsid!r} was closed while being seeded")
        return None

    def _prefetch(self, session_id: str) -> None:
        """Open a just-seeded session in the background (app/runtime/open_sessions.py)."""
        if self.w.settings.open_on_seed:
            self.w._open.prefetch(session_id)

    def _ahead(self, task: TaskSpec) -> None:
        """After the seed's answer, in the background: the task's gold state, built while the
        rollout runs so its first verify finds it ready (a first seed of a task is followed by
        seconds of agent turns), and the spare clone of the seed base the next never-seen
        task's snapshot starts from (`Store.prepare_spare`), so that seed does not make it."""
        gold = self.w.settings.gold_on_seed and not self.w.gold.cached(task)
        store = self.w.backend.snapshots
        if not gold and store.has_spare:
            return

        # A key of its own: builds ahead of a burst of seeds never queue the client's verifies
        # (which may need a gold now) behind them.
        client = f"{client_of()} (ahead)"

        async def build() -> None:
            for wanted, work, what in (
                (gold, partial(self.w.gold.get, task), "gold state"),
                (True, store.prepare_spare, "spare seed base"),  # no-op when one is there
            ):
                if not wanted:
                    continue
                try:
                    await self.w.gold_lane.run(work, client=client)
                except RuntimeError:  # shut down meanwhile: the verify (if any) builds it
                    return
                except Exception as exc:  # noqa: BLE001 - built again when it is needed
                    log.warning("%s built at seed failed: %r", what, exc)

        def start() -> None:
            started = asyncio.get_running_loop().create_task(build())
            self._background.add(started)  # kept referenced until it is done
            started.add_done_callback(self._background.discard)

        # Started once the seed's answer is on its way: a build holding the GIL meanwhile
        # would delay that answer by its switch interval.
        asyncio.get_running_loop().call_later(GOLD_AHEAD_DELAY_S, start)


def _age_seconds(stamp: datetime) -> float:
    return time.time() - stamp.replace(tzinfo=UTC).timestamp()
