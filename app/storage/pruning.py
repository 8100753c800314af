"""The bound on records of closed sessions whose database retention deleted (`dropped_at` set).

Per environment, records older than the `keep`-th newest dropped one go, oldest first, a batch
per transaction, with their closed claims and lineage rows; the caller then drops the task rows
no session names. Finding that edge walks `keep` index entries (ix_sessions_env_dropped_at), so
`DroppedRecords` remembers, per process, the newest dropped record it saw and an upper bound of
how many there are: a pass that finds no newer one, or too few to pass `keep`, is one or two
index probes. Records only get newer and only old ones are deleted (by any worker), so the bound
stays an upper bound and a skipped pass never leaves more than `keep` records it should prune.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, delete, func, or_, select

from app.storage.control_schema import (
    CLAIM_CLOSED,
    lineage_table,
    resources_ids_table,
    sessions_table,
)

t = sessions_table


def _after(at: tuple[datetime, str]) -> Any:
    return or_(t.c.dropped_at > at[0], and_(t.c.dropped_at == at[0], t.c.id > at[1]))


def _before(at: tuple[datetime, str]) -> Any:
    return or_(t.c.dropped_at < at[0], and_(t.c.dropped_at == at[0], t.c.id < at[1]))


class DroppedRecords:
    """Prunes one control database's dropped records past a bound (see the module docstring)."""

    def __init__(self) -> None:
        # env -> (newest dropped record seen, at most how many dropped records there are)
        self._seen: dict[str, tuple[tuple[datetime, str] | None, int]] = {}
        self._lock = threading.Lock()

    def prune(self, engine: Engine, env: str, keep: int, limit: int) -> tuple[list[str], set[str]]:
        """Delete at most `limit` of `env`'s dropped records beyond the newest `keep`, oldest
        first; (their ids, their task digests)."""
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        mine = (t.c.env == env, t.c.dropped_at.is_not(None))
        with self._lock, engine.begin() as conn:
            newest, total = self._count(conn, env)
            if total <= keep:
                return [], set()
            edge = conn.execute(
                select(t.c.dropped_at, t.c.id)
                .where(*mine)
                .order_by(t.c.dropped_at.desc(), t.c.id.desc())
                .offset(keep - 1)
                .limit(1)
            ).first()
            if edge is None:  # fewer than the bound said (others pruned, or gc): count again
                self._seen[env] = (newest, self._all(conn, env))
                return [], set()
            victims = conn.execute(
                select(t.c.id, t.c.task_digest)
                .where(*mine, _before((edge.dropped_at, edge.id)))
                .order_by(t.c.dropped_at, t.c.id)
                .limit(limit)
            ).all()
            ids = [v.id for v in victims]
            if ids:
                lt, rt = lineage_table, resources_ids_table
                conn.execute(delete(lt).where(lt.c.session_id.in_(ids)))
                closed = (rt.c.env == env, rt.c.session_id.in_(ids), rt.c.state == CLAIM_CLOSED)
                conn.execute(delete(rt).where(*closed))
                conn.execute(delete(t).where(t.c.id.in_(ids)))
            left = total - len(ids) if len(ids) == limit else keep
            self._seen[env] = (newest, left)
        return ids, {v.task_digest for v in victims}

    def _count(self, conn: Connection, env: str) -> tuple[tuple[datetime, str] | None, int]:
        """(the newest dropped record, at most how many there are): a full count once per
        process, then only the records newer than the newest seen before are counted."""
        top = conn.execute(
            select(t.c.dropped_at, t.c.id)
            .where(t.c.env == env, t.c.dropped_at.is_not(None))
            .order_by(t.c.dropped_at.desc(), t.c.id.desc())
            .limit(1)
        ).first()
        newest = None if top is None else (top.dropped_at, top.id)
        seen = self._seen.get(env)
        if newest is None:
            total = 0
        elif seen is None:
            total = self._all(conn, env)
        elif newest == seen[0]:
            total = seen[1]
        else:
            newer = select(func.count()).where(t.c.env == env, t.c.dropped_at.is_not(None))
            if seen[0] is not None:
                newer = newer.where(_after(seen[0]))
            total = seen[1] + int(conn.execute(newer).scalar_one())
        self._seen[env] = (newest, total)
        return newest, total

    def _all(self, conn: Connection, env: str) -> int:
        count = select(func.count()).where(t.c.env == env, t.c.dropped_at.is_not(None))
        return int(conn.execute(count).scalar_one())
