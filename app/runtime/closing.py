"""Closing sessions: by cookie, by a typed resources_session_id (with its tombstone), and the
release every close (and the idle reaper, app/runtime/lifecycle.py) ends in.

A close releases the session's database (closed in its own file or schema, deleted per the
retention policy) and only then records it closed, so a release that fails leaves the session
open to a retried close. A typed close also marks the id's claim closed: the tombstone that
keeps a late seed of the id out (app/runtime/claims.py).
"""

from __future__ import annotations

import logging
from typing import Literal

from app.errors import NotOwner, ReleaseFailed, SeedConflict
from app.runtime.ownership import check_closer
from app.runtime.workers import SessionWorkers
from app.storage.base import SessionHandle
from app.storage.control import CLAIM_SEEDING, SessionRecord, deletes_on_close

log = logging.getLogger("stategym.sessions")


class Closing:
    def __init__(self, workers: SessionWorkers):
        self.w = workers

    async def close(self, session_id: str) -> bool:
        """Close by cookie. Idempotent: False when it was closed already (or never existed).
        One hop to a worker: the record read, the release and the record's update."""
        await self.w._open.settled(
            session_id
        )  # an open in flight (the seed's prefetch) lands first
        handle = self.w._open.pop(session_id)
        if handle is not None:
            async with handle.lock:
                return await self.w._run(self._close_by_id, session_id, handle)
        return await self.w._run(self._close_by_id, session_id, None)

    def _close_by_id(self, session_id: str, handle: SessionHandle | None) -> bool:
        record = self.w.control.get(session_id)
        if record is None or record.env != self.w.env.name:
            if handle is not None:  # never expected: handles are opened for known sessions
                handle.close()
            if record is None:
                return False
            raise NotOwner(
                f"session {session_id} belongs to environment {record.env!r}, not "
                f"{self.w.env.name!r}; close it on its own server"
            )
        closed_now = self.close_record(handle, record)
        if record.resources_session_id is not None:
            self.w.control.close_claim(self.w.env.name, record.resources_session_id, None)
        return closed_now

    async def close_by_resources_id(
        self, rsid: str, episode: str | None, cookie_session_id: str | None
    ) -> bool:
        """Close what a typed seed made under `rsid` in this environment; an id never seeded
        gets a tombstone so a late seed of it is refused. False when already closed.

        Ownership: a request with our cookie may close only that cookie's session; a
        cookieless one must name the episode that seeded it. Two hops: the claim and record
        read, then the release with the claim's close."""
        record = await self.w._run(self._held_for_close, rsid, episode, cookie_session_id)
        if record is False:
            return False
        if record is None:  # a seed in flight closes its own session (_create)
            await self.w._run(self.w.control.close_claim, self.w.env.name, rsid, episode)
            return False
        await self.w._open.settled(record.id)
        handle = self.w._open.pop(record.id)
        if handle is None:
            return await self.w._run(self._close_with_claim, None, record, rsid, episode)
        async with handle.lock:
            return await self.w._run(self._close_with_claim, handle, record, rsid, episode)

    def _held_for_close(
        self, rsid: str, episode: str | None, cookie_session_id: str | None
    ) -> SessionRecord | None | Literal[False]:
        """False when there is nothing to close (a tombstone now or already); else the record
        of the session `rsid` holds, or None while that session is still being seeded."""
        held = self.w.control.claim(self.w.env.name, rsid)
        if held is None:
            if self.w.control.close_claim(self.w.env.name, rsid, episode):
                return False  # a tombstone: nothing was open
            held = self.w.control.claim(self.w.env.name, rsid)  # a seed won
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
        return self.w.control.get(held.session_id)  # None: gone, so only the claim is closed

    def _close_with_claim(
        self, handle: SessionHandle | None, record: SessionRecord, rsid: str, episode: str | None
    ) -> bool:
        closed_now = self.close_record(handle, record)
        # Recorded only once the release worked: a failure above leaves the id open to retry.
        self.w.control.close_claim(self.w.env.name, rsid, episode)
        return closed_now

    def close_record(self, handle: SessionHandle | None, record: SessionRecord) -> bool:
        """Release the session (closed in its own database, deleted per retention), then
        record it closed. A release that fails is ReleaseFailed and leaves the record open."""
        try:
            delete = deletes_on_close(self.w.settings.retention, record.reward)
            if handle is not None or record.status != "closed":
                self.w.backend.release(handle, record.id, delete=delete)
            elif delete:
                self.w.backend.drop(record.id)
        except Exception as exc:
            log.exception("releasing session %s failed", record.id)
            raise ReleaseFailed(
                f"session {record.id} could not be released ({type(exc).__name__}: {exc}); "
                "it is not recorded as closed",
                hint="Retry /close_session.",
            ) from exc
        closed_now = self.w.control.mark_closed(record.id, dropped=delete)
        self.w.touched.pop(record.id, None)
        if delete and not closed_now:  # closed before, its database deleted only now
            self.w.control.mark_dropped(record.id)
        return closed_now
