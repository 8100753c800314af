"""Fork, rewind, export and restore sessions (docs/steps.md); the storage work is the backend's.

- fork: n ordinary sessions holding the parent's state (as of one of its steps when asked); the
  parent is only read, under its lock. rewind: back to the state after step k, by the undo log.
- export / restore: the database image with its step log and task, signed by this server with
  an expiry; a blob it did not sign is refused (it would let a client choose the state verify
  scores), and the signature is the proof of ownership (app/runtime/ownership.py).
- Disk budgets are checked before anything is written (app/runtime/budgets.py).

A child or restored session gets its control row first, then its database (written whole by
rename, or cloned in one transaction): a crash leaves a row without a database, which verify
scores by replay and the reaper closes, never a half-copy. An export restores on its backend.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.clock import created_now, issued_at, naive_utcnow
from app.errors import (
    BadRequest,
    ExportExpired,
    InvalidExport,
    NotOwner,
    SeedConflict,
    SessionClosed,
    SessionNotFound,
)
from app.runtime.budgets import DiskBudget
from app.storage import lineage
from app.storage.base import SessionHandle, Unsupported
from app.storage.control import SessionRecord

if TYPE_CHECKING:  # the manager imports this module; the type is only for annotations
    from app.runtime.sessions import SessionManager

EXPORT_FORMAT = "stategym-session/1"
MAX_FORKS = 64


@dataclass(frozen=True)
class Child:
    session_id: str
    resources_session_id: str | None
    issued: int  # the cookie's issue time


class Branching:
    """The manager's fork / rewind / export / restore. `sign(data) -> str` authenticates
    exports (the server's secret, app/server)."""

    def __init__(self, sessions: SessionManager, sign: Callable[[bytes], str]):
        self.sessions = sessions
        self.sign = sign
        self.budget = DiskBudget(sessions.settings, sessions.backend)
        self.export_ttl = sessions.settings.export_ttl_seconds

    def _check_step_log(self, what: str) -> None:
        if not self.sessions.backend.capabilities.step_log:
            raise Unsupported(
                f"{what} needs the step log, which {self.sessions.backend.capabilities.name} "
                "sessions do not keep yet; serve on SQLite for it (docs/steps.md)"
            )

    async def _record(self, session_id: str) -> SessionRecord:
        record = await self.sessions._run(self.sessions.control.get, session_id)
        if record is None or record.env != self.sessions.env.name:
            raise SessionNotFound(f"session {session_id} is unknown to this server")
        if record.status == "closed":
            raise SessionClosed(f"session {session_id} is closed")
        return record

    # --- fork -------------------------------------------------------------------------------
    async def fork(
        self,
        parent_id: str,
        n: int,
        at_step: int | None = None,
    ) -> tuple[int, list[Child]]:
        """(the parent's step the children start from, the children). Children of a typed
        session get resources_session_ids minted here (and the parent's episode, so its
        lost-reply close works for them); no client picks an id another rollout may seed."""
        if at_step is not None:
            self._check_step_log("a fork as of an earlier step")
        if not 1 <= n <= MAX_FORKS:
            raise BadRequest(f"n must be between 1 and {MAX_FORKS}, got {n}")
        manager = self.sessions
        record = await self._record(parent_id)
        episode = None
        if record.resources_session_id is not None:
            claim = await manager._run(
                manager.control.claim, record.env, record.resources_session_id
            )
            episode = claim.episode if claim is not None else None
        rsids: list[str | None] = [
            minted_id() if record.resources_session_id is not None else None for _ in range(n)
        ]
        children = await manager._run(self._add_rows, record, rsids, episode)
        handle = await manager._handle(parent_id)
        ids = [c.session_id for c in children]
        try:
            async with handle.lock:
                step = await manager._run(self._fork_within_budget, handle, ids, at_step)
        except BaseException:
            await manager._run(self._remove_rows, record, children)
            raise
        await manager._run(self._opened, record, children, parent_id, step, lineage.FORK)
        return step, children

    def _fork_within_budget(
        self, handle: SessionHandle, ids: list[str], at_step: int | None
    ) -> int:
        """The copies, once they fit the request's and the server's budgets (the parent's size
        read under its lock, so it cannot grow in between); refused whole otherwise."""
        each = self.budget.size_of(handle)
        self.budget.check_fork(len(ids), each)
        with self.budget.reserve(len(ids) * each, f"a fork of {len(ids)} children"):
            return self.sessions.backend.fork(handle, ids, at_step)

    def _add_rows(
        self, record: SessionRecord, rsids: list[str | None], episode: str | None
    ) -> list[Child]:
        """Control rows (and claims) first: a crash before the copy leaves rows without a
        database, never a database nobody knows about."""
        manager, children = self.sessions, list[Child]()
        for rsid in rsids:
            session_id, created_at = secrets.token_hex(16), created_now()
            held = manager.control.add(
                session_id=session_id,
                env=record.env,
                task_id=record.task_id,
                snapshot_key=record.snapshot_key,
                resources_session_id=rsid,
                file=manager.backend.location(session_id),
                task=dict(record.task),
                created_at=created_at,
                episode=episode,
            )
            if held is not None:
                self._remove_rows(record, children)
                raise SeedConflict(f"resources_session_id {rsid!r} is already in use")
            children.append(Child(session_id, rsid, issued_at(created_at)))
        return children

    def _remove_rows(self, record: SessionRecord, children: list[Child]) -> None:
        manager = self.sessions
        for child in children:
            manager.backend.drop(child.session_id)
            if child.resources_session_id is not None:
                manager.control.release_claim(
                    record.env, child.resources_session_id, child.session_id
                )
        manager.control.delete([c.session_id for c in children])

    def _opened(
        self, record: SessionRecord, children: list[Child], parent: str, step: int, kind: str
    ) -> None:
        manager = self.sessions
        manager.control.record_lineage(
            [lineage.Origin(c.session_id, parent, step, kind) for c in children]
        )
        for child in children:
            if child.resources_session_id is not None:
                manager.control.open_claim(record.env, child.resources_session_id, child.session_id)

    # --- rewind -----------------------------------------------------------------------------
    async def rewind(self, session_id: str, to_step: int) -> dict[str, Any]:
        self._check_step_log("rewind")
        await self._record(session_id)
        handle = await self.sessions._handle(session_id)
        async with handle.lock:
            undone = await self.sessions._run(self.sessions.backend.rewind, handle, to_step)
        return {"session_id": session_id, "step": to_step, "undone": undone}

    # --- export / restore -------------------------------------------------------------------
    async def export(self, session_id: str) -> dict[str, Any]:
        self._check_step_log("export")
        record = await self._record(session_id)
        handle = await self.sessions._handle(session_id)
        async with handle.lock:
            image, steps = await self.sessions._run(self.sessions.backend.export_image, handle)
        blob = {
            "format": EXPORT_FORMAT,
            "env": record.env,
            "session_id": session_id,
            "steps": steps,
            "snapshot_key": record.snapshot_key,
            "task": record.task,
            "image": base64.b64encode(zlib.compress(image, 1)).decode(),
            # Inside the signature: a blob restores until then, never after.
            "expires_at": int(time.time()) + self.export_ttl,
        }
        blob["signature"] = self.sign(_signed_bytes(blob))
        return blob

    async def restore(self, blob: Any) -> Child:
        self._check_step_log("restore")
        image, record = self._check_blob(blob)
        manager = self.sessions
        self.budget.check_image(len(image))
        [child] = await manager._run(self._add_rows, record, [None], None)
        try:
            await manager._run(self._restore_within_budget, child.session_id, image)
        except BaseException:
            await manager._run(self._remove_rows, record, [child])
            raise
        parent, steps = str(blob["session_id"]), int(blob["steps"])
        await manager._run(self._opened, record, [child], parent, steps, lineage.RESTORE)
        return child

    def _restore_within_budget(self, session_id: str, image: bytes) -> None:
        with self.budget.reserve(len(image), "this restore"):
            self.sessions.backend.restore_image(session_id, image)

    def _check_blob(self, blob: Any) -> tuple[bytes, SessionRecord]:
        if not isinstance(blob, dict) or blob.get("format") != EXPORT_FORMAT:
            raise InvalidExport(f"not a StateGym session export (format {EXPORT_FORMAT!r})")
        signature = blob.get("signature")
        if not isinstance(signature, str) or not secrets.compare_digest(
            signature, self.sign(_signed_bytes(blob))
        ):
            raise InvalidExport(
                "the export's signature does not match: it was altered, or exported by a server "
                "with another secret key",
                hint="Restore on a server sharing the exporting server's STATEGYM_SECRET_KEY.",
            )
        expires = blob.get("expires_at")
        if not isinstance(expires, int) or isinstance(expires, bool):
            raise InvalidExport(
                "the export carries no expiry (made by an older release); export the session again"
            )
        if expires < time.time():
            raise ExportExpired(
                f"the export expired {int(time.time() - expires)} s ago "
                "(STATEGYM_EXPORT_TTL_SECONDS); export the session again",
            )
        if blob.get("env") != self.sessions.env.name:
            raise NotOwner(
                f"the export is of environment {blob.get('env')!r}, not {self.sessions.env.name!r}"
            )
        try:
            raw = zlib.decompress(base64.b64decode(blob["image"]))
            image, meta = self.sessions.backend.open_image(raw)
        except Exception as exc:  # noqa: BLE001 - a signed blob that does not decode
            raise InvalidExport(f"the export's image cannot be read: {exc}") from None
        if meta.get("env") != self.sessions.env.name:
            raise InvalidExport("the export's database is not of this environment")
        record = SessionRecord(
            id=str(blob["session_id"]),
            env=self.sessions.env.name,
            task_id=blob["task"].get("task_id") if isinstance(blob["task"], dict) else None,
            snapshot_key=str(blob["snapshot_key"]),
            resources_session_id=None,
            status="open",
            created_at=naive_utcnow(),
            reward=None,
            file="",
            task=dict(blob["task"]),
        )
        return image, record

    async def tree(self, session_id: str) -> dict[str, Any]:
        return await self.sessions._run(self.sessions.control.lineage_tree, session_id)


def minted_id() -> str:
    """A resources_session_id for a session the server makes (fork child): unguessable."""
    return f"fork-{secrets.token_hex(16)}"


def _signed_bytes(blob: dict[str, Any]) -> bytes:
    body = {k: v for k, v in blob.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
