"""The explorer's reads of the control database: pages of runs, counts, reward sums per task.

SQLAlchemy Core over the control store's engine, so the same statements run on the SQLite
control file and the PostgreSQL control schema. They stay fast at 100,000 sessions because each
is served by an index (app/storage/control_schema.py): pages newest first by `created_at`
(with a keyset cursor, never a deep OFFSET), reward sums per task from (env, task_id, reward)
alone. Difficulty and family live in each task's stored JSON (its task row): they are read once
per task (one row each) and kept, so filtering and grouping by them is a filter on task ids.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, false, func, or_, select, tuple_

from app import jsonio
from app.explorer.filters import RunFilter
from app.storage.base import ControlStore
from app.storage.control_schema import lineage_table, sessions_table, task_rows_table

PASS = 1.0  # a run passes when its reward reaches this (the strict success bit)
BINS = 10  # reward histogram: [0, 0.1), ..., [0.9, 1.0] (1.0 counts in the last bin)
ENV_TTL = 30.0  # seconds the list of environments is reused
SUMMARY_TTL = 10.0  # seconds a filter's counts, histogram and failure reasons are reused
FAILURE_SAMPLE = 2000  # failure headlines are counted over the newest failed runs this many
t = sessions_table
tasks = task_rows_table


@dataclass(frozen=True)
class RunRow:
    id: str
    env: str
    task_id: str | None
    status: str
    reward: float | None
    created_at: datetime
    ended_at: datetime | None
    failure: str | None
    calls: int | None
    difficulty: str | None
    family: str | None


@dataclass(frozen=True)
class TaskStat:
    env: str
    task_id: str | None
    runs: int
    verified: int
    passed: int
    mean_reward: float | None
    difficulty: str | None = None
    family: str | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.verified if self.verified else None


@dataclass(frozen=True)
class Summary:
    total: int
    bins: list[int]  # verified runs per reward bin
    unverified: int
    tasks: list[TaskStat]


def headline(reason: str | None) -> str | None:
    """A failure reason's first clause: what runs fail *for*, without the per-run detail."""
    if not reason:
        return None
    for sep in (" (", ": ", "; "):
        reason = reason.split(sep, 1)[0]
    return reason.strip()


def calls_of(verify: dict[str, Any] | None) -> int | None:
    """The calls a verified run made, as its verify result counted them."""
    if not verify:
        return None
    trajectory = (verify.get("verification") or {}).get("trajectory") or {}
    calls = trajectory.get("calls")
    if isinstance(calls, int):
        return calls
    steps = verify.get("step_rewards")
    return len(steps) if isinstance(steps, list) else None


def _like_text(text: str) -> str:
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    return escaped.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class RunQueries:
    """Control-database reads for the explorer, on the control store's read connections."""

    def __init__(self, control: ControlStore, summary_ttl: float = SUMMARY_TTL):
        self.control = control
        # (filter fields) -> (when, summary, failure headlines): turning pages of one filter
        # reads only the page, not the whole filtered set again.
        self.summary_ttl = summary_ttl
        self._summaries: dict[tuple[Any, ...], tuple[float, Summary, list[tuple[str, int]]]] = {}
        self._meta: dict[tuple[str, str | None], tuple[str | None, str | None]] = {}
        self._lock = threading.Lock()
        self._envs: tuple[float, list[str]] = (-ENV_TTL - 1.0, [])

    # --- difficulty and family, per task ------------------------------------------------------
    def task_meta(
        self, pairs: list[tuple[str, str | None]]
    ) -> dict[tuple[str, str | None], tuple[str | None, str | None]]:
        """(difficulty, family) of each (env, task_id), from one stored task row each."""
        missing = [p for p in pairs if p not in self._meta]
        if missing:
            with self.control.connect() as conn:
                for env, task_id in missing:
                    row = conn.execute(
                        select(tasks.c.task_json)
                        .join(t, t.c.task_digest == tasks.c.digest)
                        .where(t.c.env == env, t.c.task_id == task_id)
                        .limit(1)
                    ).first()
                    task = jsonio.loads_text(row.task_json) if row else {}
                    found = (_label(task.get("difficulty")), _label(task.get("family")))
                    with self._lock:
                        self._meta[(env, task_id)] = found
        return {p: self._meta[p] for p in pairs}

    def envs(self) -> list[str]:
        """The environments with sessions (kept for ENV_TTL seconds)."""
        now = time.monotonic()
        if now - self._envs[0] > ENV_TTL:
            with self.control.connect() as conn:
                found = [r.env for r in conn.execute(select(t.c.env).distinct())]
            self._envs = (now, found or [""])
        return self._envs[1]

    def all_tasks(self) -> list[tuple[str, str | None]]:
        with self.control.connect() as conn:
            rows = conn.execute(select(t.c.env, t.c.task_id).group_by(t.c.env, t.c.task_id))
            return [(r.env, r.task_id) for r in rows]

    # --- filters --------------------------------------------------------------------------------
    def conditions(self, f: RunFilter) -> list[Any]:
        out: list[Any] = []
        if f.env:
            out.append(t.c.env == f.env)
        if f.task:
            out.append(t.c.task_id == f.task)
            if not f.env:  # lets the (env, task_id) indexes serve a task filter alone
                out.append(t.c.env.in_(self.envs()))
        if f.status:
            out.append(t.c.status == f.status)
        if f.reward_min is not None:
            out.append(t.c.reward >= f.reward_min)
        if f.reward_max is not None:
            out.append(t.c.reward <= f.reward_max)
        if f.since is not None:
            out.append(t.c.created_at >= f.since)
        if f.until is not None:
            out.append(t.c.created_at < f.until)
        if f.failure:
            # Stored JSON is compact (app/jsonio.py); an older row may have ": " between.
            text = _like_text(f.failure)
            out.append(
                or_(
                    t.c.verify_json.like(f'%"failure_reason":"{text}%', escape="\\"),
                    t.c.verify_json.like(f'%"failure_reason": "{text}%', escape="\\"),
                )
            )
        if f.family or f.difficulty:
            meta = self.task_meta(self.all_tasks())
            pairs = [
                p
                for p, (difficulty, family) in meta.items()
                if (not f.family or family == f.family)
                and (not f.difficulty or difficulty == f.difficulty)
            ]
            out.append(tuple_(t.c.env, t.c.task_id).in_(pairs) if pairs else false())
        return out

    # --- the runs page ---------------------------------------------------------------------------
    def page(self, f: RunFilter) -> tuple[list[RunRow], tuple[datetime, str] | None]:
        """One page of runs and the cursor of the next (None on the last page)."""
        columns = (t.c.id, t.c.env, t.c.task_id, t.c.status, t.c.reward, t.c.created_at,
                   t.c.verified_at, t.c.closed_at, t.c.verify_json)  # fmt: skip
        query = select(*columns).where(*self.conditions(f))
        if f.keyset:
            if f.after is not None:
                at, sid = f.after
                query = query.where(
                    or_(t.c.created_at < at, and_(t.c.created_at == at, t.c.id > sid))
                )
            # An explicit offset still works here; the "next page" links use the cursor.
            query = query.order_by(t.c.created_at.desc(), t.c.id).offset(f.offset)
        else:
            # Sort and skip on the narrow columns first, then read the page's wide rows: a
            # sort carrying every row's verify JSON was seconds at 100,000 sessions.
            ids = (
                select(t.c.id)
                .where(*self.conditions(f))
                .order_by(*_order(f))
                .offset(f.offset)
                .limit(f.limit + 1)
                .subquery()
            )
            query = select(*columns).join(ids, ids.c.id == t.c.id).order_by(*_order(f))
        with self.control.connect() as conn:
            rows = conn.execute(query.limit(f.limit + 1)).all()
        more = len(rows) > f.limit
        rows = rows[: f.limit]
        meta = self.task_meta(sorted({(r.env, r.task_id) for r in rows}, key=str))
        out = []
        for r in rows:
            verify = jsonio.loads_text(r.verify_json) if r.verify_json else None
            difficulty, family = meta[(r.env, r.task_id)]
            out.append(
                RunRow(
                    id=r.id,
                    env=r.env,
                    task_id=r.task_id,
                    status=r.status,
                    reward=r.reward,
                    created_at=r.created_at,
                    ended_at=r.closed_at or r.verified_at,
                    failure=(verify or {}).get("failure_reason"),
                    calls=calls_of(verify),
                    difficulty=difficulty,
                    family=family,
                )
            )
        cursor = (out[-1].created_at, out[-1].id) if more and f.keyset and out else None
        return out, cursor

    def overview(self, f: RunFilter) -> tuple[Summary, list[tuple[str, int]], float]:
        """The filter's summary and failure headlines, and the time.time() they were read: kept
        `summary_ttl` seconds per filter (paging and sorting do not change them)."""
        key = f.summary_key()
        now = time.monotonic()
        with self._lock:
            hit = self._summaries.get(key)
        if hit is not None and now - hit[0] <= self.summary_ttl:
            return hit[1], hit[2], time.time() - (now - hit[0])
        summary, failures = self.summary(f), self.failure_headlines(f)
        with self._lock:
            if len(self._summaries) >= 256:  # a bounded cache: drop the oldest
                del self._summaries[min(self._summaries, key=lambda k: self._summaries[k][0])]
            self._summaries[key] = (now, summary, failures)
        return summary, failures, time.time()

    def summary(self, f: RunFilter) -> Summary:
        """Runs, the reward histogram and per-task sums under the filter, from one grouped
        read of (env, task_id, reward): an index scan (ix_sessions_env_task_reward), whatever
        the number of sessions, returning a row per task and distinct reward."""
        query = (
            select(t.c.env, t.c.task_id, t.c.reward, func.count().label("n"))
            .where(*self.conditions(f))
            .group_by(t.c.env, t.c.task_id, t.c.reward)
        )
        with self.control.connect() as conn:
            rows = conn.execute(query).all()
        bins = [0] * BINS
        unverified = 0
        sums: dict[tuple[str, str | None], list[float]] = {}  # runs, verified, passed, total
        for row in rows:
            n = int(row.n)
            acc = sums.setdefault((row.env, row.task_id), [0, 0, 0, 0.0])
            acc[0] += n
            if row.reward is None:
                unverified += n
                continue
            reward = float(row.reward)
            bins[min(BINS - 1, max(0, int(reward * BINS)))] += n
            acc[1] += n
            acc[2] += n if reward >= PASS else 0
            acc[3] += reward * n
        meta = self.task_meta(list(sums))
        stats = [
            TaskStat(
                env,
                task_id,
                int(a[0]),
                int(a[1]),
                int(a[2]),
                a[3] / a[1] if a[1] else None,
                *meta[(env, task_id)],
            )
            for (env, task_id), a in sums.items()
        ]
        return Summary(sum(int(a[0]) for a in sums.values()), bins, unverified, stats)

    def failure_headlines(self, f: RunFilter) -> list[tuple[str, int]]:
        """The most common failure headlines among the newest failed runs under the filter
        (the reason is read out of the stored JSON by the database, not parsed here)."""
        newest = (
            select(self._reason().label("reason"))
            .where(*self.conditions(f), t.c.reward < PASS)
            .order_by(t.c.created_at.desc())
            .limit(FAILURE_SAMPLE)
            .subquery()
        )
        query = select(newest.c.reason, func.count().label("n")).group_by(newest.c.reason)
        counts: dict[str, int] = {}
        with self.control.connect() as conn:
            for row in conn.execute(query):
                head = headline(row.reason) or "(no reason recorded)"
                counts[head] = counts.get(head, 0) + int(row.n)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:12]

    def _reason(self) -> Any:
        """verify_json's failure_reason as text (a TEXT column: PostgreSQL casts it to JSON)."""
        return self.control.verify_field("failure_reason")

    # --- tasks and lineage -----------------------------------------------------------------------
    def task_runs(self, env: str, task_id: str, limit: int) -> tuple[list[str], int]:
        """Ids of the task's first `limit` runs, oldest first (a GRPO group in the order it was
        sampled), and how many runs the task has."""
        where = (t.c.env == env, t.c.task_id == task_id)
        query = select(t.c.id).where(*where).order_by(t.c.created_at, t.c.id).limit(limit)
        with self.control.connect() as conn:
            ids = [row.id for row in conn.execute(query)]
            total = conn.execute(select(func.count()).select_from(t).where(*where)).scalar_one()
        return ids, int(total)

    def lineage(self, session_id: str) -> dict[str, Any]:
        """Where a session came from (parent, step, kind) and the sessions made from it."""
        lt = lineage_table
        with self.control.connect() as conn:
            up = conn.execute(select(lt).where(lt.c.session_id == session_id)).first()
            kids = conn.execute(
                select(lt.c.session_id, lt.c.parent_step, lt.c.kind, t.c.reward, t.c.status)
                .select_from(lt.outerjoin(t, t.c.id == lt.c.session_id))
                .where(lt.c.parent_id == session_id)
                .order_by(lt.c.created_at, lt.c.session_id)
                .limit(200)
            ).all()
        return {
            "parent": None
            if up is None
            else {
                "session_id": up.parent_id,
                "step": up.parent_step,
                "kind": up.kind,
            },
            "children": [
                {
                    "session_id": k.session_id,
                    "step": k.parent_step,
                    "kind": k.kind,
                    "reward": k.reward,
                    "status": k.status or "unknown",
                }
                for k in kids
            ],
        }


def _label(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _order(f: RunFilter) -> list[Any]:
    desc = f.order == "desc"
    column = {"reward": t.c.reward, "task": t.c.task_id, "env": t.c.env, "status": t.c.status}.get(
        f.sort, t.c.created_at
    )
    # Runs without a reward come last either way.
    first = [column.is_(None)] if f.sort == "reward" else []
    return [*first, column.desc() if desc else column.asc(), t.c.created_at.desc(), t.c.id]
