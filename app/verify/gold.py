"""Gold end states: the task's reference solution replayed on a fresh clone of its snapshot.

Replays go through the same runner as live tool calls. The result (the state, what the gold
changed relative to the seed, and any gold call that failed) is cached per task in memory and
the gold database is kept on disk for inspection.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import StorageFull
from app.runtime.lru import LRU
from app.runtime.runner import run_tool
from app.runtime.tasks import TaskSpec
from app.sdk.environment import Environment, ToolContext
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Snapshot, Store
from app.verify.diff import StateDiff, diff_states
from app.verify.state import DbState, dump_state, remember_template_dump

log = logging.getLogger("stategym.gold")


@dataclass(frozen=True)
class GoldState:
    seed_state: DbState
    state: DbState
    seed_to_gold: StateDiff
    # Gold calls that returned an error: a task whose reference solution cannot be reproduced.
    failed_calls: tuple[dict[str, Any], ...]


def replay(env: Environment, snapshot: Snapshot, task: TaskSpec, session_id: str = "gold"):
    """Replay the ground truth on an in-memory clone; returns (connection, engine, failures)."""
    conn = sqlite_db.memory_from_image(snapshot.image)
    engine = sqlite_db.bind_engine(conn)
    ctx = ToolContext(now=snapshot.now, session_id=session_id, task_id=task.task_id)
    failures = []
    for i, call in enumerate(task.ground_truth):
        tool = env.tool_named(call.name)
        if tool is None:
            failures.append({"index": i, "name": call.name, "error": "unknown tool"})
            continue
        outcome = run_tool(engine, tool, call.arguments, ctx)
        if "error" in outcome:
            failures.append({"index": i, "name": call.name, "error": outcome["error"]})
    return conn, engine, failures


def state_of_image(env: Environment, image: bytes) -> DbState:
    conn = sqlite_db.memory_from_image(image)
    engine = sqlite_db.bind_engine(conn, begin="BEGIN")
    try:
        with engine.connect() as c:
            return dump_state(c, env.metadata.tables, env.compare)
    finally:
        engine.dispose()
        conn.close()


class GoldCache:
    def __init__(self, store: Store, capacity: int):
        self.store = store
        self.env = store.env
        self._gold: LRU[str, GoldState] = LRU(capacity)
        self._seed_states: LRU[str, DbState] = LRU(capacity)
        self._lock = threading.Lock()
        self._template_dumped = False

    def gold_path(self, task: TaskSpec) -> Path:
        return self.store.data_dir / "gold" / self.env.name / f"{task.gold_key}.sqlite"

    def seed_state(self, task: TaskSpec) -> DbState:
        key = task.snapshot_key
        state = self._seed_states.get(key)
        if state is None:
            self._remember_template()
            state = state_of_image(self.env, self.store.snapshot(task).image)
            with self._lock:
                self._seed_states.put(key, state)
        return state

    def _remember_template(self) -> None:
        """Dump the template once: each snapshot's seed state is then that dump patched with
        the rows its seed wrote (a few rows), not a read of every base row per task."""
        if self._template_dumped:
            return
        conn = sqlite_db.memory_from_image(self.store.template_image())
        engine = sqlite_db.bind_engine(conn, begin="BEGIN")
        try:
            with engine.connect() as c:
                tables = self.env.metadata.tables
                remember_template_dump(c, tables, self.env.compare, self.store.fingerprint)
        finally:
            engine.dispose()
            conn.close()
        self._template_dumped = True

    def get(self, task: TaskSpec) -> GoldState:
        cached = self._gold.get(task.gold_key)
        if cached is not None:
            return cached
        gold = self._build(task)
        with self._lock:
            self._gold.put(task.gold_key, gold)
        return gold

    def _build(self, task: TaskSpec) -> GoldState:
        snapshot = self.store.snapshot(task)
        # The seed state first: the gold dump then re-reads only the tables the gold wrote.
        seed_state = self.seed_state(task)
        conn, engine, failures = replay(self.env, snapshot, task)
        try:
            with engine.connect() as c:
                state = dump_state(c, self.env.metadata.tables, self.env.compare)
            try:
                sqlite_db.write_image(self.gold_path(task), sqlite_db.image_of(conn), wal=False)
            except StorageFull:
                # The file is only for inspection; verify goes on with the gold in memory.
                log.warning("disk full: gold state of %s kept in memory only", task.task_id)
        finally:
            engine.dispose()
            conn.close()
        return GoldState(
            seed_state=seed_state,
            state=state,
            seed_to_gold=diff_states(seed_state, state, self.env.compare, exact=True),
            failed_calls=tuple(failures),
        )
