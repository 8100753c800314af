"""Gold end states: the task's reference solution replayed on a fresh clone of its snapshot.

Replays go through the same runner as live tool calls, on the process's shared SQLAlchemy engine
(compiled statements reused from task to task). The result (the state, what the gold changed
relative to the seed, any gold call that failed) is cached per task in memory, bounded by bytes
(`gold_cache_mb`). No gold database is written to disk: it is a pure function of the snapshot and
the task, and inspection (`sessions diff --against gold`) replays it in memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from app.core.lru import LRU
from app.core.tasks import TaskSpec
from app.errors import InvalidTask
from app.sdk.environment import Environment, ToolContext
from app.storage import images
from app.storage.images import Snapshot, Store
from app.storage.runner import run_tool
from app.verify.state.diff import StateDiff, change_units, diff_states
from app.verify.state.dump import DbState, dump_state, pristine_dump, remember_template_dump
from app.verify.state.patching import Pristine, keep_again, remembered
from app.verify.state.table_state import ENTRY_BYTES, ROW_BYTES, TableState, state_bytes

log = logging.getLogger("stategym.gold")
GOLD_CACHE_BYTES = 128 * 2**20  # default of `gold_cache_mb`


@dataclass(frozen=True)
class GoldState:
    seed_state: DbState
    state: DbState
    seed_to_gold: StateDiff
    # Gold calls that returned an error: a task whose reference solution cannot be reproduced.
    failed_calls: tuple[dict[str, Any], ...]
    # `change_units(seed_to_gold)`, what every state of a verify is scored against: counted
    # once per gold state, not once per state scored.
    units: Counter[tuple[Any, ...]] = field(init=False, repr=False, compare=False)
    # The kept dump `seed_state` is (app/verify/state/patching.py): put back in its cache at
    # each use.
    pristine: Pristine | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "units", change_units(self.seed_to_gold))


@dataclass(frozen=True)
class WorkBudget:
    """Wall-clock and CPU budgets of one replay of calls (a gold build, a rollout's replay):
    `start()` a meter before the first call, ask it before each one."""

    wall_ms: int
    cpu_ms: int

    def start(self) -> BudgetMeter:
        return BudgetMeter(self, time.monotonic(), time.thread_time())


@dataclass(frozen=True)
class BudgetMeter:
    budget: WorkBudget
    wall0: float
    cpu0: float

    def over(self) -> str | None:
        """Why the budget is spent, None while it is not (CPU: this thread's time)."""
        wall = (time.monotonic() - self.wall0) * 1000
        cpu = (time.thread_time() - self.cpu0) * 1000
        if wall > self.budget.wall_ms:
            return f"{wall:.0f} ms of wall-clock time, past the {self.budget.wall_ms} ms budget"
        if cpu > self.budget.cpu_ms:
            return f"{cpu:.0f} ms of CPU time, past the {self.budget.cpu_ms} ms budget"
        return None

    def call_limit_ms(self, tool_limit_ms: int | None) -> int:
        """A call's time limit: what is left of the wall-clock budget (and the tool's own)."""
        left = max(1, int(self.budget.wall_ms - (time.monotonic() - self.wall0) * 1000))
        return min(left, tool_limit_ms) if tool_limit_ms else left


class GoldOverBudget(Exception):
    """The task's ground truth ran past the gold budget: no gold state, the task unscorable."""


def check_ground_truth(task: TaskSpec, max_calls: int) -> None:
    """422 when the task's ground truth holds more calls than a gold build may replay."""
    if len(task.ground_truth) > max_calls:
        raise InvalidTask(
            f"the task's ground_truth holds {len(task.ground_truth)} calls; the limit is "
            f"{max_calls} (STATEGYM_GROUND_TRUTH_MAX_CALLS)",
            hint="Shorten the reference solution, or raise the limit for this deployment.",
        )


def replay(env: Environment, snapshot: Snapshot, task: TaskSpec, session_id: str = "gold"):
    """Replay the ground truth on an in-memory clone; returns (connection, engine, failures)."""
    conn = images.memory_from_image(snapshot.image)
    engine = images.bind_engine(conn)
    failures = _run_gold(env, engine, snapshot, task, session_id)
    return conn, engine, failures


def _run_gold(
    env: Environment,
    bind: Engine | Connection,
    snapshot: Snapshot,
    task: TaskSpec,
    session_id: str,
    budget: WorkBudget | None = None,
) -> list[dict[str, Any]]:
    """Run the task's ground-truth calls on `bind`; the ones that failed. GoldOverBudget
    when they run past `budget` (each call is cut at what is left of it)."""
    ctx = ToolContext(now=snapshot.now, session_id=session_id, task_id=task.task_id)
    meter = budget.start() if budget is not None else None
    failures = []
    for i, call in enumerate(task.ground_truth):
        tool = env.tool_named(call.name)
        if tool is None:
            failures.append({"index": i, "name": call.name, "error": "unknown tool"})
            continue
        limit = meter.call_limit_ms(None) if meter is not None else None
        outcome = run_tool(bind, tool, call.arguments, ctx, limit)
        if "error" in outcome:
            failures.append({"index": i, "name": call.name, "error": outcome["error"]})
        spent = meter.over() if meter is not None else None
        if spent is not None:
            raise GoldOverBudget(
                f"the task's ground truth took {spent} after {i + 1} of "
                f"{len(task.ground_truth)} calls"
            )
    return failures


def state_of_image(env: Environment, image: bytes) -> DbState:
    return pristine_of_image(env, image)[0]


def pristine_of_image(env: Environment, image: bytes) -> tuple[DbState, Pristine | None]:
    """The dump of an unwritten image, and the kept entry sessions of its snapshot patch."""
    conn = images.memory_from_image(image)
    try:
        return _pristine_on(env, conn)
    finally:
        conn.close()


def _pristine_on(env: Environment, conn: images.ImageConnection) -> tuple[DbState, Pristine | None]:
    """`pristine_of_image` on a clone nothing has written yet (left open, no transaction)."""
    bind = images.bind_connection(conn, begin="BEGIN")
    try:
        return pristine_dump(bind, env.metadata.tables, env.compare)
    finally:
        bind.close()


@dataclass(frozen=True)
class _Seeded:
    """A snapshot's seed state, and the kept dump it is (None: its image tracks no changes)."""

    state: DbState
    pristine: Pristine | None


def _table_ids(state: DbState) -> frozenset[int]:
    return frozenset(id(t) for t in state.values() if isinstance(t, TableState))


# Tasks whose gold ran past its budget, remembered (by gold key) so their verifies answer at
# once instead of building again: a task row is data the client controls.
OVER_BUDGET_KEPT = 1024


class GoldCache:
    def __init__(
        self,
        store: Store,
        capacity: int,
        *,
        max_bytes: int = GOLD_CACHE_BYTES,
        budget: WorkBudget | None = None,
    ):
        """At most `capacity` gold states and as many seed states, `max_bytes` each; a build
        past `budget` is GoldOverBudget (and remembered as such)."""
        self.budget = budget
        self._over_budget: LRU[str, str] = LRU(OVER_BUDGET_KEPT)
        self.store = store
        self.env = store.env
        self._shared: frozenset[int] = frozenset()  # the template dump's tables
        self._gold: LRU[str, GoldState] = LRU(
            capacity, max_bytes=max_bytes, size_of=self._gold_bytes
        )
        self._seed_states: LRU[str, _Seeded] = LRU(
            capacity, max_bytes=max_bytes, size_of=self._seeded_bytes
        )
        self._lock = threading.Lock()
        self._building: dict[str, threading.Event] = {}  # gold keys being built

    def _seeded_bytes(self, seeded: _Seeded) -> int:
        if seeded.pristine is not None:  # weighed without the template's tables and indexes
            return seeded.pristine.bytes
        return ENTRY_BYTES + state_bytes(seeded.state, self._shared)

    def _gold_bytes(self, gold: GoldState) -> int:
        # Its seed state is weighed in the seed-state cache.
        shared = self._shared | _table_ids(gold.seed_state)
        # The diff from the seed and its change units: a row each, twice.
        changes = 2 * ROW_BYTES * sum(d.count for d in gold.seed_to_gold.values())
        return ENTRY_BYTES + state_bytes(gold.state, shared) + changes

    @property
    def cached_bytes(self) -> int:
        return self._gold.bytes + self._seed_states.bytes

    def gold_path(self, task: TaskSpec) -> Path:
        """Where releases before in-memory gold kept the task's gold database (read by
        inspection when present; nothing writes it now)."""
        return self.store.data_dir / "gold" / self.env.name / f"{task.gold_key}.sqlite"

    def seed_state(self, task: TaskSpec) -> DbState:
        return self._seeded(task).state

    def _seeded(self, task: TaskSpec, clone: images.ImageConnection | None = None) -> _Seeded:
        """The snapshot's seed state; its kept dump put back in the process's cache of dumps if
        that cache let it go (it is bounded apart from this one), so the verify about to run
        patches it rather than reading every table whole. Read on `clone` (an unwritten clone of
        the snapshot, left open) when given, else on a clone of its own."""
        key = task.snapshot_key
        seeded = self._seed_states.get(key)
        if seeded is None:
            self._remember_template()
            if clone is not None:
                seeded = _Seeded(*_pristine_on(self.env, clone))
            else:
                conn = self.store.clone(self.store.snapshot(task))
                try:
                    seeded = _Seeded(*_pristine_on(self.env, conn))
                finally:
                    conn.close()
            with self._lock:
                self._seed_states.put(key, seeded)
        elif seeded.pristine is not None:
            keep_again(seeded.pristine)
        return seeded

    def _remember_template(self) -> None:
        """Dump the template once: each snapshot's seed state is then that dump patched with
        the rows its seed wrote (a few rows), not a read of every base row per task. Checked
        each time: the process's cache of dumps may have let it go."""
        key, compare = f"{self.store.fingerprint}:", self.env.compare
        kept = remembered(key, compare)
        if kept is None:
            conn = images.memory_from_image(self.store.template_image())
            bind = images.bind_connection(conn, begin="BEGIN")
            try:
                tables = self.env.metadata.tables
                remember_template_dump(bind, tables, compare, self.store.fingerprint)
            finally:
                bind.close()
                conn.close()
            kept = remembered(key, compare)
        if kept is not None:
            self._shared = _table_ids(kept.state)

    def cached(self, task: TaskSpec) -> bool:
        return task.gold_key in self._gold

    def get(self, task: TaskSpec) -> GoldState:
        """The task's gold state; one build per task at a time (a verify arriving while the
        gold built at seed is under way waits for it instead of building it twice)."""
        key = task.gold_key
        cached = self._gold.get(key)
        if cached is not None:
            if cached.pristine is not None:  # as in `_seeded`
                keep_again(cached.pristine)
            return cached
        spent = self._over_budget.get(key)
        if spent is not None:
            raise GoldOverBudget(spent)
        with self._lock:
            cached = self._gold.get(key)
            if cached is not None:
                return cached
            building = self._building.get(key)
            if building is None:
                self._building[key] = threading.Event()
        if building is not None:
            building.wait()
            spent = self._over_budget.get(key)
            if spent is not None:
                raise GoldOverBudget(spent)
            cached = self._gold.get(key)
            return cached if cached is not None else self._put(key, self._built(key, task))
        try:
            return self._put(key, self._built(key, task))
        finally:
            with self._lock:
                self._building.pop(key).set()

    def _built(self, key: str, task: TaskSpec) -> GoldState:
        try:
            return self._build(task)
        except GoldOverBudget as exc:
            with self._lock:
                self._over_budget.put(key, str(exc))
            raise

    def _put(self, key: str, gold: GoldState) -> GoldState:
        with self._lock:
            self._gold.put(key, gold)
        return gold

    def _build(self, task: TaskSpec) -> GoldState:
        snapshot = self.store.snapshot(task)
        # One clone for both (the snapshot's own build when the task is new): the seed state
        # first, read before the gold writes; the gold dump then re-reads only what it wrote.
        conn = self.store.clone(snapshot)
        try:
            seeded = self._seeded(task, conn)
            seed_state = seeded.state
            bind = images.bind_connection(conn)
            try:
                failures = _run_gold(self.env, bind, snapshot, task, "gold", self.budget)
            finally:
                bind.close()
            bind = images.bind_connection(conn, begin="BEGIN")
            try:
                state = dump_state(bind, self.env.metadata.tables, self.env.compare)
            finally:
                bind.close()
        finally:
            conn.close()
        return GoldState(
            seed_state=seed_state,
            state=state,
            seed_to_gold=diff_states(seed_state, state, self.env.compare, exact=True),
            failed_calls=tuple(failures),
            pristine=seeded.pristine,
        )
