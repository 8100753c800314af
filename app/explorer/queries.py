"""The explorer's reads of the control database: pages of runs, counts, reward sums per task.

SQLAlchemy Core over the control store's engine, so the same statements run on the SQLite
control file and the PostgreSQL control schema. They stay fast at 100,000 sessions because each
is served by an index (app/storage/control_schema.py): pages newest first by `created_at`
(with a keyset cursor, never a deep OFFSET), reward sums per task from (env, task_id, reward)
alone. Difficulty and family live in each row's stored task JSON: they are read once per task
(one row each) and kept, so filtering and grouping by them is a filter on task ids.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, case, false, func, or_, select, tuple_

from app import jsonio
from app.explorer.filters import RunFilter
from app.storage.control_schema import lineage_table, sessions_table

PASS = 1.0  # a run passes when its reward reaches this (the strict success bit)
BINS = 10  # reward histogram: [0, 0.1), ..., [0.9, 1.0] (1.0 counts in the last bin)
FAILURE_SAMPLE = 2000  # failure headlines are counted over the newest failed runs this many
t = sessions_table


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
    """Control-database reads for the explorer, over the control store's engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._meta: dict[tuple[str, str | None], tuple[str | None, str | None]] = {}
        self._lock = threading.Lock()

    # --- difficulty and family, per task ------------------------------------------------------
    def task_meta(
        self, pairs: list[tuple[str, str | None]]
    ) -> dict[tuple[str, str | None], tuple[str | None, str | None]]:
        """(difficulty, family) of each (env, task_id), from one stored task row each."""
        missing = [p for p in pairs if p not in self._meta]
        if missing:
            with self.engine.connect() as conn:
                for env, task_id in missing:
                    row = conn.execute(
                        select(t.c.task_json).where(t.c.env == env, t.c.task_id == task_id).limit(1)
                    ).first()
                    task = jsonio.loads_text(row.task_json) if row else {}
                    found = (_label(task.get("difficulty")), _label(task.get("family")))
                    with self._lock:
                        self._meta[(env, task_id)] = found
        return {p: self._meta[p] for p in pairs}

    def all_tasks(self) -> list[tuple[str, str | None]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(t.c.env, t.c.task_id).group_by(t.c.env, t.c.task_id))
            return [(r.env, r.task_id) for r in rows]

    # --- filters --------------------------------------------------------------------------------
    def conditions(self, f: RunFilter) -> list[Any]:
        out: list[Any] = []
        if f.env:
            out.append(t.c.env == f.env)
        if f.task:
            out.append(t.c.task_id == f.task)
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
                p for p, (difficulty, family) in meta.items()
                if (not f.family or family == f.family)
                and (not f.difficulty or difficulty == f.difficulty)
            ]  # fmt: skip
            out.append(tuple_(t.c.env, t.c.task_id).in_(pairs) if pairs else false())
        return out

    # --- the runs page ---------------------------------------------------------------------------
    def count(self, f: RunFilter) -> int:
        with self.engine.connect() as conn:
            query = select(func.count()).select_from(t).where(*self.conditions(f))
            return int(conn.execute(query).scalar_one())

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
            query = query.order_by(t.c.created_at.desc(), t.c.id)
        else:
            query = query.order_by(*_order(f)).offset(f.offset)
        with self.engine.connect() as conn:
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
                )  # fmt: skip
            )
        cursor = (out[-1].created_at, out[-1].id) if more and f.keyset and out else None
        return out, cursor

    def histogram(self, f: RunFilter) -> tuple[list[int], int]:
        """Counts of verified runs per reward bin, and the count of runs not verified."""
        r = t.c.reward
        bins = []
        for i in range(BINS):
            low, high = i / BINS, (i + 1) / BINS
            if i == 0:
                cond = r < high
            elif i == BINS - 1:
                cond = r >= low
            else:
                cond = and_(r >= low, r < high)
            bins.append(func.coalesce(func.sum(case((cond, 1), else_=0)), 0))
        unverified = func.coalesce(func.sum(case((r.is_(None), 1), else_=0)), 0)
        with self.engine.connect() as conn:
            row = conn.execute(select(*bins, unverified).where(*self.conditions(f))).one()
        return [int(v) for v in row[:BINS]], int(row[BINS])

    def task_stats(self, f: RunFilter) -> list[TaskStat]:
        """Runs, verified runs, passes and mean reward per (env, task) under the filter."""
        r = t.c.reward
        query = (
            select(
                t.c.env, t.c.task_id, func.count().label("runs"), func.count(r).label("verified"),
                func.coalesce(func.sum(case((r >= PASS, 1), else_=0)), 0).label("passed"),
                func.avg(r).label("mean"),
            )
            .where(*self.conditions(f))
            .group_by(t.c.env, t.c.task_id)
        )  # fmt: skip
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        meta = self.task_meta([(row.env, row.task_id) for row in rows])
        return [
            TaskStat(
                row.env,
                row.task_id,
                int(row.runs),
                int(row.verified),
                int(row.passed),
                None if row.mean is None else float(row.mean),
                *meta[(row.env, row.task_id)],
            )  # fmt: skip
            for row in rows
        ]

    def failure_headlines(self, f: RunFilter) -> list[tuple[str, int]]:
        """The most common failure headlines among the newest failed runs under the filter."""
        query = (
            select(t.c.verify_json)
            .where(*self.conditions(f), t.c.reward < PASS)
            .order_by(t.c.created_at.desc())
            .limit(FAILURE_SAMPLE)
        )
        counts: dict[str, int] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                verify = jsonio.loads_text(row.verify_json) if row.verify_json else {}
                head = headline(verify.get("failure_reason")) or "(no reason recorded)"
                counts[head] = counts.get(head, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:12]

    # --- tasks and lineage -----------------------------------------------------------------------
    def task_runs(self, env: str, task_id: str, limit: int) -> tuple[list[str], int]:
        """Ids of the task's first `limit` runs, oldest first (a GRPO group in the order it was
        sampled), and how many runs the task has."""
        where = (t.c.env == env, t.c.task_id == task_id)
        query = select(t.c.id).where(*where).order_by(t.c.created_at, t.c.id).limit(limit)
        with self.engine.connect() as conn:
            ids = [row.id for row in conn.execute(query)]
            total = conn.execute(select(func.count()).select_from(t).where(*where)).scalar_one()
        return ids, int(total)

    def lineage(self, session_id: str) -> dict[str, Any]:
        """Where a session came from (parent, step, kind) and the sessions made from it."""
        lt = lineage_table
        with self.engine.connect() as conn:
            up = conn.execute(select(lt).where(lt.c.session_id == session_id)).first()
            kids = conn.execute(
                select(lt.c.session_id, lt.c.parent_step, lt.c.kind, t.c.reward, t.c.status)
                .select_from(lt.outerjoin(t, t.c.id == lt.c.session_id))
                .where(lt.c.parent_id == session_id)
                .order_by(lt.c.created_at, lt.c.session_id)
                .limit(200)
            ).all()
        return {
            "parent": None if up is None else {
                "session_id": up.parent_id, "step": up.parent_step, "kind": up.kind,
            },
            "children": [
                {"session_id": k.session_id, "step": k.parent_step, "kind": k.kind,
                 "reward": k.reward, "status": k.status or "unknown"}
                for k in kids
            ],
        }  # fmt: skip


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
