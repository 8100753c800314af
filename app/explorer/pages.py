"""What each explorer page shows, as plain data: the page's JSON form and its template's input.

Sessions are read through the Inspector (the backend's read-only view; steps and earlier
states on its `scratch` connection, rolled back), the control database through RunQueries.
Every function here runs in a worker thread (blocking reads) and raises StateGymError
subclasses for bad input, which carry their 4xx status.
"""

from __future__ import annotations

import json
import shlex
import statistics
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from app.core.tasks import task_from_data
from app.errors import BadRequest, SessionNotFound
from app.explorer.filters import RunFilter
from app.explorer.queries import PASS, RunQueries, headline
from app.explorer.steps_view import rollout_steps, row_changes, table_at_step, task_calls
from app.runtime.inspection import Inspector, jsonable, record_fields
from app.sdk.environment import Environment
from app.storage.control import SessionRecord
from app.storage.steplog import canonical
from app.verify.gold import GoldCache

MAX_GROUP = 64  # runs of one task shown side by side
MAX_MATRIX = 16  # pairwise divergence matrix up to this many runs


@dataclass
class Explorer:
    """Everything the pages read from: one per `stategym browse` process (thread-safe)."""

    insp: Inspector
    queries: RunQueries
    data_dir: Path
    backend: str  # "sqlite" | "postgres"
    datasette: bool = False  # Datasette's raw SQL view is mounted (SQLite files)
    scratch: Path | None = None  # where Datasette's copies of packed sessions go (browse's own)
    _gold: dict[str, GoldCache] = field(default_factory=dict)
    _prompts: dict[str, tuple[float, dict[str, list[dict[str, Any]]]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def gold(self, env: Environment) -> GoldCache:
        with self._lock:
            cache = self._gold.get(env.name)
            if cache is None:
                cache = self._gold[env.name] = self.insp.gold_cache(env)
            return cache

    def prompt(self, env: Environment, task_id: str | None) -> list[dict[str, Any]] | None:
        """The task's input messages, from the environment's task file (the control row keeps
        the task's verify fields, not its prompt); None when the file has no such task."""
        path = env.tasks_path
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        with self._lock:
            cached = self._prompts.get(env.name)
        if cached is None or cached[0] != mtime:
            found: dict[str, list[dict[str, Any]]] = {}
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                params = row.get("responses_create_params") or {}
                found[str(row.get("task_id"))] = list(params.get("input") or [])
            cached = (mtime, found)
            with self._lock:
                self._prompts[env.name] = cached
        return cached[1].get(str(task_id))

    def cli(self, *args: str) -> str:
        """The `stategym` command that prints the same data in a terminal."""
        return shlex.join(["stategym", *args, "--data-dir", str(self.data_dir)])


ANSWER_TABLE = "stategym_answer"  # what submit_answer / decline_request write (one row)
CONVERSATION_TABLE = "stategym_conversation"  # what message_user writes (a row per message)


def submitted_answer(
    insp: Inspector, record: SessionRecord, env: Environment
) -> dict[str, Any] | None:
    """The answer or decline the session submitted as state, when its environment has the
    framework's answer table; None otherwise."""
    table = env.metadata.tables.get(ANSWER_TABLE)
    if table is None:
        return None
    with insp.connection(record) as conn:
        row = conn.execute(select(table)).first()
    return None if row is None else {k: jsonable(v) for k, v in row._mapping.items()}


def conversation(insp: Inspector, record: SessionRecord, env: Environment) -> list[dict[str, Any]]:
    """The session's messages to the simulated user and its replies (message_user's rows), in
    order: what the user understood (`act`) and allowed (`confirms`) with each."""
    table = env.metadata.tables.get(CONVERSATION_TABLE)
    if table is None:
        return []
    with insp.connection(record) as conn:
        rows = conn.execute(select(table).order_by(table.c.turn)).all()
    return [{k: jsonable(v) for k, v in row._mapping.items()} for row in rows]


def _messages(messages: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    out = []
    for m in messages or []:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        out.append({"role": str(m.get("role", "?")), "content": str(content or "")})
    return out


# --- runs ------------------------------------------------------------------------------------
def runs_page(x: Explorer, f: RunFilter) -> dict[str, Any]:
    rows, cursor = x.queries.page(f)
    summary, failures, as_of = x.queries.overview(f)
    stats, total, bins, unverified = summary.tasks, summary.total, summary.bins, summary.unverified
    groups: dict[str, dict[str, dict[str, float]]] = {"difficulty": {}, "family": {}}
    for s in stats:
        for key in groups:
            label = getattr(s, key) or "(unknown)"
            g = groups[key].setdefault(label, {"runs": 0, "verified": 0, "passed": 0})
            g["runs"] += s.runs
            g["verified"] += s.verified
            g["passed"] += s.passed
    verified = sum(s.verified for s in stats)
    passed = sum(s.passed for s in stats)
    weighted = sum((s.mean_reward or 0.0) * s.verified for s in stats)
    by_task = sorted(stats, key=lambda s: (s.pass_rate if s.verified else 2.0, str(s.task_id)))
    args = ["sessions", "list", "--limit", str(f.limit)]
    for flag, value in (("--env", f.env), ("--task", f.task), ("--status", f.status)):
        if value:
            args += [flag, value]
    if f.reward_min is not None:
        args += ["--reward", f">={f.reward_min:g}"]
    elif f.reward_max is not None:
        args += ["--reward", f"<={f.reward_max:g}"]
    if f.since is not None:
        args += ["--since", f.since.isoformat()]
    return {
        "filter": {k: jsonable(v) for k, v in asdict(f).items() if k != "after"},
        "total": total,
        "runs": [{**vars(r), "failure_headline": headline(r.failure)} for r in rows],
        "next": None if cursor is None else f.params(after=cursor, offset=0),
        "summary": {
            "verified": verified,
            "passed": passed,
            "pass_rate": passed / verified if verified else None,
            "mean_reward": weighted / verified if verified else None,
            "unverified": unverified,
        },
        "histogram": {"bins": bins, "width": 1 / len(bins), "unverified": unverified},
        # vars(): shallow (asdict deep-copies; a quarter of the page at 200 tasks).
        "by_task": [{**vars(s), "pass_rate": s.pass_rate} for s in by_task],
        "by_difficulty": _rates(groups["difficulty"]),
        "by_family": _rates(groups["family"]),
        "failures": [{"headline": h, "runs": n} for h, n in failures],
        "summary_as_of": datetime.fromtimestamp(as_of, UTC).isoformat(timespec="seconds"),
        "cli": x.cli(*args),
        "pass_threshold": PASS,
    }


def _rates(groups: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    return [
        {
            "label": label,
            **{k: int(v) for k, v in g.items()},
            "pass_rate": g["passed"] / g["verified"] if g["verified"] else None,
        }
        for label, g in sorted(groups.items())
    ]


# --- one rollout -------------------------------------------------------------------------------
def rollout_page(x: Explorer, session_id: str) -> dict[str, Any]:
    record = x.insp.record(session_id)
    env = x.insp.env_of(record)
    task = task_from_data(record.task)
    present = x.insp.file_present(record)
    steps: list[dict[str, Any]] = []
    step_log, rewards_from = False, "none"
    if present:
        step_log, steps, rewards_from = rollout_steps(x.insp, record, x.gold(env))
        for step in steps:
            step["changes"] = [row_changes(c) for c in step.get("changes", [])]
    verify = record.verify or {}
    verification = dict(verify.get("verification") or {})
    state_diff = verification.pop("state_diff", None) or {}
    answer = verification.pop("answer", None) or verification.pop("decline", None)
    tables = x.insp.tables(record)["tables"] if present else {}
    submitted = submitted_answer(x.insp, record, env) if present else None
    talk = conversation(x.insp, record, env) if present else []
    sid = record.id
    return {
        "session": {
            **record_fields(record),
            "difficulty": record.task.get("difficulty"),
            "family": record.task.get("family"),
            "present": present,
        },
        "prompt": _messages(x.prompt(env, record.task_id)),
        "gold_calls": [{"name": c.name, "arguments": c.arguments} for c in task.ground_truth],
        "conversation": talk,
        "step_log": step_log,
        "steps": steps,
        "step_rewards_from": rewards_from,
        "verify": None
        if not verify
        else {
            "reward": verify.get("reward"),
            "components": verify.get("reward_components") or {},
            "failure_reason": verify.get("failure_reason"),
            "state_diff": state_diff,
            "answer": answer,
            "submitted": submitted,
            "evidence": verification,
            "step_rewards": verify.get("step_rewards"),
        },
        "lineage": x.queries.lineage(sid),
        "tables": tables,
        "datasette": x.datasette and present,
        "cli": {
            "steps": x.cli("sessions", "steps", sid, "--rows"),
            "show": x.cli("sessions", "show", sid),
            "diff": x.cli("sessions", "diff", sid, "--against", "gold"),
            "verify": x.cli("sessions", "verify", sid),
            "tree": x.cli("sessions", "tree", sid),
        },
    }


# --- one task: its runs side by side -----------------------------------------------------------
def task_page(x: Explorer, env_name: str, task_id: str, limit: int = 32) -> dict[str, Any]:
    if not 1 <= limit <= MAX_GROUP:
        raise BadRequest(f"limit must be from 1 to {MAX_GROUP}")
    ids, total = x.queries.task_runs(env_name, task_id, limit)
    if not ids:
        raise SessionNotFound(f"no runs of task {task_id!r} in environment {env_name!r}")
    records = [x.insp.record(i) for i in ids]
    env = x.insp.env_of(records[0])
    task = task_from_data(records[-1].task)
    gold = [(c.name, canonical(c.arguments)) for c in task.ground_truth]
    runs = []
    for record in records:
        calls = task_calls(x.insp, record) if x.insp.file_present(record) else None
        runs.append(
            {
                "id": record.id,
                "reward": record.reward,
                "status": record.status,
                "created_at": jsonable(record.created_at),
                "calls": calls,
            }
        )
    rewards = [r["reward"] for r in runs if r["reward"] is not None]
    mean = statistics.fmean(rewards) if rewards else None
    std = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0 if rewards else None
    for run in runs:
        seq = [(c["tool"], c["args"]) for c in run["calls"] or []]
        run["diverges_from_gold"] = (
            _first_divergence(seq, gold) if run["calls"] is not None else None
        )
        run["advantage"] = None if run["reward"] is None or mean is None else run["reward"] - mean
    seqs = [[(c["tool"], c["args"]) for c in r["calls"] or []] for r in runs]
    matrix = None
    if len(runs) <= MAX_MATRIX:
        matrix = [
            [None if i == j else _first_divergence(a, b) for j, b in enumerate(seqs)]
            for i, a in enumerate(seqs)
        ]
    depth = max([len(gold), *(len(s) for s in seqs)])
    return {
        "env": env_name,
        "task_id": task_id,
        "difficulty": records[-1].task.get("difficulty"),
        "family": records[-1].task.get("family"),
        "prompt": _messages(x.prompt(env, task_id)),
        "gold_calls": [{"tool": n, "args": a} for n, a in gold],
        "runs": runs,
        "total": total,
        "shown": len(runs),
        "stats": {
            "mean_reward": mean,
            "std_reward": std,
            "passed": sum(1 for r in rewards if r >= PASS),
            "verified": len(rewards),
        },
        "matrix": matrix,
        "depth": depth,
        "cli": x.cli("sessions", "list", "--env", env_name, "--task", task_id),
    }


def _first_divergence(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> int | None:
    """The first step (1-based) where two call sequences differ; None when they are equal."""
    for i, (p, q) in enumerate(zip(a, b, strict=False)):
        if p != q:
            return i + 1
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


# --- one table as of one step ------------------------------------------------------------------
def table_page(
    x: Explorer, session_id: str, table: str, step: int | None, offset: int, limit: int
) -> dict[str, Any]:
    record = x.insp.record(session_id)
    result = table_at_step(x.insp, record, table, step, offset, limit)
    sid = record.id
    return {
        "session": {
            "id": sid,
            "env": record.env,
            "task_id": record.task_id,
            "reward": record.reward,
            "status": record.status,
        },
        **result,
        "datasette": x.datasette,
        "cli": x.cli(
            "sessions", "show", sid, table, "--limit", str(limit), "--offset", str(offset)
        ),
    }
