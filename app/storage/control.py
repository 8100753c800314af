"""The control database: one row per session (who, which task, when, status, reward, file).

A small SQLite file in WAL mode shared by all workers of a server (app/storage/sqlite/control.py)
or, on PostgreSQL, a schema shared by every replica (app/storage/postgres/control.py). `ControlDB`
holds the queries, written once in SQLAlchemy Core; a backend overrides only what it runs its own
way (SQLite: the four hot statements on raw sqlite3). Written on seed, verify and close only,
never on a tool call. A session's task is a shared row (`task_rows`, written once per task);
records of closed sessions whose database retention deleted are pruned past a bound
(`prune_dropped`), so the database stops growing with the number of rollouts.
"""

from __future__ import annotations

import builtins  # `list` is a method name of the control store
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Engine,
    Select,
    case,
    delete,
    func,
    insert,
    select,
    type_coerce,
    update,
)
from sqlalchemy.exc import IntegrityError

from app import jsonio
from app.clock import naive_utcnow
from app.storage import lineage
from app.storage.control_schema import (  # re-exported: the control table's names
    CLAIM_CLOSED,
    CLAIM_OPEN,
    CLAIM_SEEDING,
    control_metadata,
    resources_ids_table,
    sessions_table,
    task_digest,
    task_rows_table,
    task_text,
)
from app.storage.pruning import DroppedRecords
from app.storage.task_rows import Digests, drop_unused, insert_task_row

__all__ = [
    "CLAIM_CLOSED",
    "CLAIM_OPEN",
    "CLAIM_SEEDING",
    "ControlDB",
    "ResourcesClaim",
    "SessionQuery",
    "SessionRecord",
    "control_metadata",
    "resources_ids_table",
    "sessions_table",
    "task_rows_table",
]


@dataclass(frozen=True)
class ResourcesClaim:
    env: str
    resources_session_id: str
    episode: str | None
    session_id: str | None
    state: str
    updated_at: datetime


@dataclass(frozen=True)
class SessionRecord:
    id: str
    env: str
    task_id: str | None
    snapshot_key: str
    resources_session_id: str | None
    status: str
    created_at: datetime
    reward: float | None
    file: str
    task: dict[str, Any]
    verified_at: datetime | None = None
    closed_at: datetime | None = None
    # The stored verify result (reward, components, evidence), None before any verify.
    verify: dict[str, Any] | None = None
    # When the close deleted the session's database (retention); None while it may exist.
    dropped_at: datetime | None = None


def session_record(row: Any) -> SessionRecord:
    """A record from a sessions row joined with its task row's `task_json`."""
    return SessionRecord(
        id=row.id,
        env=row.env,
        task_id=row.task_id,
        snapshot_key=row.snapshot_key,
        resources_session_id=row.resources_session_id,
        status=row.status,
        created_at=row.created_at,
        reward=row.reward,
        file=row.file,
        # Never None while the foreign key holds; an outer join all the same, so a record is
        # never hidden by its task row.
        task=jsonio.loads_text(row.task_json) if row.task_json is not None else {},
        verified_at=row.verified_at,
        closed_at=row.closed_at,
        verify=jsonio.loads_text(row.verify_json) if row.verify_json else None,
        dropped_at=row.dropped_at,
    )


def records_query() -> Select[Any]:
    """Sessions rows with their task's JSON: what `session_record` reads."""
    s, t = sessions_table, task_rows_table
    return select(s, t.c.task_json).select_from(s.outerjoin(t, t.c.digest == s.c.task_digest))


@dataclass(frozen=True)
class SessionQuery:
    """Filters for listing sessions; every value is bound as a parameter."""

    env: str | None = None
    task_id: str | None = None
    status: str | None = None  # open | verified | closed
    reward_op: str | None = None  # one of REWARD_OPS
    reward: float | None = None
    since: datetime | None = None  # created at or after (naive UTC)
    before: datetime | None = None  # created before (naive UTC)
    limit: int = 100
    offset: int = 0


REWARD_OPS = ("==", "!=", "<", "<=", ">", ">=")
# A session is "open", then "verified", then "closed". Live ones are named, not "not closed":
# the (env, status) index then seeks them instead of walking every record kept (count_live
# walked 16,000 closed records in 1 ms, ~6 ms at the default 100,000 of session_records_max,
# at every seed under max_live_sessions).
LIVE_STATUSES = ("open", "verified")


def deletes_on_close(retention: str, reward: float | None) -> bool:
    """Whether the retention policy removes a session's file as soon as it is closed."""
    if retention == "delete_on_close":
        return True
    # keep_failed keeps only sessions worth a look: those verified with a perfect reward go.
    return retention == "keep_failed" and reward is not None and reward >= 1.0


# Tries of a seed's control rows: a task row deleted under it twice in a row is not a race.
ADD_ATTEMPTS = 3


def _utcnow() -> datetime:
    return naive_utcnow()


class ControlDB:
    """The control queries over an engine (SQLite file or PostgreSQL schema); no I/O here:
    `open_sqlite_control` (app/storage/sqlite/control.py) and `open_pg_control` create or
    upgrade the tables first."""

    def __init__(self, engine: Engine, one_statement: Engine | None = None):
        self._engine = engine
        # Where the hot queries that are one statement each (add without a resources id, get,
        # mark_verified, mark_closed) run: on PostgreSQL an engine whose transactions send no
        # BEGIN (app/storage/postgres/control.py).
        self._one_statement = one_statement if one_statement is not None else engine
        self._written = Digests()
        self._dropped = DroppedRecords()

    @property
    def engine(self) -> Engine:
        """For the backend that opened it (schema creation, orphans); callers above storage
        use the methods."""
        return self._engine

    def add(
        self,
        *,
        session_id: str,
        env: str,
        task_id: str | None,
        snapshot_key: str,
        resources_session_id: str | None,
        file: str,
        task: dict[str, Any],
        created_at: datetime | None = None,
        episode: str | None = None,
    ) -> ResourcesClaim | None:
        """Insert the session's row, and its task's row unless stored already. With a
        `resources_session_id`, claim that id for it in the same transaction (state
        `seeding`): when another session holds the id already, nothing is written and that
        claim is returned."""
        text = task_text(task)
        digest = task_digest(env, text)
        row = {
            "id": session_id,
            "env": env,
            "task_id": task_id,
            "snapshot_key": snapshot_key,
            "resources_session_id": resources_session_id,
            "status": "open",
            "created_at": created_at or _utcnow(),
            "file": file,
            "task_digest": digest,
        }
        task_row = {"digest": digest, "env": env, "task_json": text, "created_at": _utcnow()}
        if resources_session_id is None:
            self._add_unclaimed(row, task_row)
            return None
        known = digest in self._written
        try:
            with self._engine.begin() as conn:
                conn.execute(
                    insert(resources_ids_table).values(
                        env=env,
                        resources_session_id=resources_session_id,
                        episode=episode,
                        session_id=session_id,
                        state=CLAIM_SEEDING,
                        updated_at=_utcnow(),
                    )
                )
                if not known:
                    insert_task_row(conn, task_row)
                conn.execute(insert(sessions_table).values(**row))
            self._written.add(digest)
        except IntegrityError:
            # The claim is held, or (the foreign key) the task row went since we wrote it:
            # the retry below writes it again.
            self._written.discard(digest)
            held = self.claim(env, resources_session_id)
            if held is None:  # released between our insert and this read: try once more
                return self.add(
                    session_id=session_id,
                    env=env,
                    task_id=task_id,
                    snapshot_key=snapshot_key,
                    resources_session_id=resources_session_id,
                    file=file,
                    task=task,
                    created_at=created_at,
                    episode=episode,
                )
            return held
        return None

    def _add_unclaimed(self, row: dict[str, Any], task_row: dict[str, Any]) -> None:
        """`add` without a resources id: the session's row alone when this process wrote its
        task row before, else both. The foreign key fails the session's row when its task row
        was deleted meanwhile (a pruner, on any worker): it is tried again, writing both."""
        digest = task_row["digest"]
        for attempt in range(ADD_ATTEMPTS):
            known = digest in self._written
            try:
                self._insert_unclaimed(row, None if known else task_row)
            except IntegrityError:
                self._written.discard(digest)
                if attempt == ADD_ATTEMPTS - 1:
                    raise  # not the race above: a session id taken, say
                continue
            self._written.add(digest)
            return

    def _insert_unclaimed(self, row: dict[str, Any], task_row: dict[str, Any] | None) -> None:
        """The session's row, one statement; with `task_row`, that row too if absent, in the
        same transaction."""
        if task_row is None:
            with self._one_statement.begin() as conn:
                conn.execute(insert(sessions_table).values(**row))
            return
        with self._engine.begin() as conn:
            insert_task_row(conn, task_row)
            conn.execute(insert(sessions_table).values(**row))

    def claim(self, env: str, resources_session_id: str) -> ResourcesClaim | None:
        t = resources_ids_table
        query = select(t).where(t.c.env == env, t.c.resources_session_id == resources_session_id)
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        return ResourcesClaim(**row._mapping) if row else None

    def take_over_claim(self, claim: ResourcesClaim, session_id: str) -> bool:
        """Hand a stale `seeding` claim (its seeder died) to a new session; False if it moved."""
        t = resources_ids_table
        with self._engine.begin() as conn:
            result = conn.execute(
                update(t)
                .where(t.c.env == claim.env)
                .where(t.c.resources_session_id == claim.resources_session_id)
                .where(t.c.state == CLAIM_SEEDING)
                .where(t.c.session_id == claim.session_id)
                .values(session_id=session_id, updated_at=_utcnow())
            )
        return result.rowcount > 0

    def open_claim(self, env: str, resources_session_id: str, session_id: str) -> bool:
        """The session is ready: `seeding` -> `open`. False when a close got there first."""
        t = resources_ids_table
        with self._engine.begin() as conn:
            result = conn.execute(
                update(t)
                .where(t.c.env == env)
                .where(t.c.resources_session_id == resources_session_id)
                .where(t.c.session_id == session_id)
                .where(t.c.state == CLAIM_SEEDING)
                .values(state=CLAIM_OPEN, updated_at=_utcnow())
            )
        return result.rowcount > 0

    def release_claim(self, env: str, resources_session_id: str, session_id: str) -> None:
        """A seed that failed gives its id back (only its own, still-seeding claim)."""
        t = resources_ids_table
        with self._engine.begin() as conn:
            conn.execute(
                delete(t)
                .where(t.c.env == env)
                .where(t.c.resources_session_id == resources_session_id)
                .where(t.c.session_id == session_id)
                .where(t.c.state == CLAIM_SEEDING)
            )

    def close_claim(self, env: str, resources_session_id: str, episode: str | None) -> bool:
        """Mark the id closed; an id nobody claimed gets a tombstone. False when it was
        already closed."""
        t = resources_ids_table
        try:
            with self._engine.begin() as conn:
                conn.execute(
                    insert(t).values(
                        env=env,
                        resources_session_id=resources_session_id,
                        episode=episode,
                        session_id=None,
                        state=CLAIM_CLOSED,
                        updated_at=_utcnow(),
                    )
                )
            return True
        except IntegrityError:
            pass
        with self._engine.begin() as conn:
            result = conn.execute(
                update(t)
                .where(t.c.env == env)
                .where(t.c.resources_session_id == resources_session_id)
                .where(t.c.state != CLAIM_CLOSED)
                .values(state=CLAIM_CLOSED, updated_at=_utcnow())
            )
        return result.rowcount > 0

    def drop_tombstone(self, claim: ResourcesClaim) -> bool:
        """Remove the tombstone `claim` (a close of an id never seeded), if it is still that
        row; a seed may then claim the id (app/runtime/claims.py says when)."""
        t = resources_ids_table
        with self._engine.begin() as conn:
            result = conn.execute(
                delete(t)
                .where(t.c.env == claim.env)
                .where(t.c.resources_session_id == claim.resources_session_id)
                .where(t.c.session_id.is_(None))
                .where(t.c.state == CLAIM_CLOSED)
                .where(t.c.updated_at == claim.updated_at)
            )
        return result.rowcount > 0

    def get(self, session_id: str) -> SessionRecord | None:
        with self._one_statement.connect() as conn:
            query = records_query().where(sessions_table.c.id == session_id)
            row = conn.execute(query).first()
        return session_record(row) if row else None

    def find_by_resources_id(self, env: str, resources_session_id: str) -> SessionRecord | None:
        query = (
            records_query()
            .where(sessions_table.c.env == env)
            .where(sessions_table.c.resources_session_id == resources_session_id)
            .order_by(sessions_table.c.created_at.desc())
        )
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        return session_record(row) if row else None

    def mark_verified(self, session_id: str, reward: float, result: dict[str, Any]) -> None:
        """Record the verify `result` as given (the caller caps its evidence's size)."""
        status = sessions_table.c.status
        with self._one_statement.begin() as conn:
            conn.execute(
                update(sessions_table)
                .where(sessions_table.c.id == session_id)
                .values(
                    # A verify after close keeps the session closed but records the reward.
                    status=case((status == "closed", status), else_="verified"),
                    verified_at=_utcnow(),
                    reward=reward,
                    verify_json=jsonio.dumps_text(result),
                )
            )

    def mark_closed(self, session_id: str, *, dropped: bool = False) -> bool:
        """True when this call closed it, False when it was closed already. `dropped`: the
        close deleted the session's database (its record may be pruned, `prune_dropped`)."""
        now = _utcnow()
        with self._one_statement.begin() as conn:
            result = conn.execute(
                update(sessions_table)
                .where(sessions_table.c.id == session_id)
                .where(sessions_table.c.status != "closed")
                .values(status="closed", closed_at=now, dropped_at=now if dropped else None)
            )
        return result.rowcount > 0

    def mark_dropped(self, session_id: str) -> None:
        """A session closed before has had its database deleted since (a repeated close)."""
        t = sessions_table
        with self._one_statement.begin() as conn:
            conn.execute(
                update(t)
                .where(t.c.id == session_id, t.c.status == "closed", t.c.dropped_at.is_(None))
                .values(dropped_at=_utcnow())
            )

    def list(self, env: str | None = None, limit: int = 1000) -> list[SessionRecord]:
        query = records_query().order_by(sessions_table.c.created_at.desc()).limit(limit)
        if env:
            query = query.where(sessions_table.c.env == env)
        with self._engine.connect() as conn:
            return [session_record(r) for r in conn.execute(query)]

    def query(self, q: SessionQuery) -> builtins.list[SessionRecord]:
        """Newest first."""
        t = sessions_table
        stmt = records_query().order_by(t.c.created_at.desc(), t.c.id)
        stmt = stmt.limit(q.limit).offset(q.offset)
        if q.env:
            stmt = stmt.where(t.c.env == q.env)
        if q.task_id:
            stmt = stmt.where(t.c.task_id == q.task_id)
        if q.status:
            stmt = stmt.where(t.c.status == q.status)
        if q.since is not None:
            stmt = stmt.where(t.c.created_at >= q.since)
        if q.before is not None:
            stmt = stmt.where(t.c.created_at < q.before)
        if q.reward_op is not None and q.reward is not None:
            stmt = stmt.where(_compare(t.c.reward, q.reward_op, q.reward))
        with self._engine.connect() as conn:
            return [session_record(r) for r in conn.execute(stmt)]

    def delete(self, session_ids: builtins.list[str]) -> int:
        """Remove control rows (the caller removes the files first), and the task rows no
        session names any more."""
        if not session_ids:
            return 0
        t = sessions_table
        with self._engine.begin() as conn:
            found = conn.execute(select(t.c.task_digest).where(t.c.id.in_(session_ids)))
            digests = sorted(set(found.scalars()))
            result = conn.execute(delete(t).where(t.c.id.in_(session_ids)))
        self._drop_unused_tasks(digests)
        return result.rowcount

    def prune_dropped(self, env: str, keep: int, limit: int) -> int:
        """Delete the records of `env`'s closed sessions whose database retention deleted
        (`dropped_at` set), oldest first, beyond the newest `keep` of them: at most `limit`
        records, with their closed claims and lineage rows and the task rows no session names
        any more (app/storage/pruning.py). Returns how many went (fewer than `limit`: none
        older are left). Records whose database may exist (`dropped_at` NULL) are never
        touched; idempotent across workers."""
        ids, digests = self._dropped.prune(self._engine, env, keep, limit)
        self._drop_unused_tasks(sorted(digests))
        return len(ids)

    def _drop_unused_tasks(self, digests: builtins.list[str]) -> None:
        for digest in digests:  # written again by this process's next seed of it
            self._written.discard(digest)
        drop_unused(self._engine, digests)

    def count_live(self, env: str) -> int:
        """Sessions of `env` not closed yet (open or verified)."""
        t = sessions_table
        query = select(func.count()).where(t.c.env == env).where(t.c.status.in_(LIVE_STATUSES))
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def live_created_before(
        self, env: str, cutoff: datetime
    ) -> builtins.list[tuple[str, datetime]]:
        """(id, created_at) of live sessions older than `cutoff`: the reaper's candidates."""
        t = sessions_table
        query = (
            select(t.c.id, t.c.created_at)
            .where(t.c.env == env)
            .where(t.c.status.in_(LIVE_STATUSES))
            .where(t.c.created_at < cutoff)
        )
        with self._engine.connect() as conn:
            return [(row.id, row.created_at) for row in conn.execute(query)]

    def connect(self) -> AbstractContextManager[Connection]:
        """A connection for reads of the control tables (the explorer's run pages)."""
        return self._engine.connect()

    def verify_field(self, key: str) -> Any:
        """The stored verify result's field `key` as text, in a SQL expression (SQLite's JSON
        functions read the TEXT column as it is)."""
        return type_coerce(sessions_table.c.verify_json, JSON)[key].as_string()

    def record_lineage(self, origins: builtins.list[lineage.Origin]) -> None:
        """Where forked or restored sessions came from (app/storage/lineage.py)."""
        lineage.record(self._engine, origins)

    def lineage_tree(self, session_id: str) -> dict[str, Any]:
        """The fork/restore tree holding `session_id`, from its root."""
        return lineage.tree(self._engine, session_id)

    def dispose(self) -> None:
        self._engine.dispose()


def _compare(column: Any, op: str, value: float) -> Any:
    if op not in REWARD_OPS:
        raise ValueError(f"reward comparison must be one of {REWARD_OPS}, got {op!r}")
    return {
        "==": column == value,
        "!=": column != value,
        "<": column < value,
        "<=": column <= value,
        ">": column > value,
        ">=": column >= value,
    }[op]
