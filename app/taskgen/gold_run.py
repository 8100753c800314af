"""One run of a story's gold on base + seed, shared by every check of the story in this process.

A story is checked three times on the same (seed, gold): its self-check (`kit.check_task`), the
distractor test (`distract`) and the validator (`validate`). The seed is applied and the gold
run once, through the framework's runner (`run_tool`), on the **tracked base**: the template
with a snapshot's change-tracking triggers installed before any seed, whose rows the seeded
image records, so the validator dumps the seeded state by patching the template's dump and
the gold's by patching that (app/verify/state/dump.py). The run (seeded image, final database, each
call's outcome) is kept in a small LRU for the next check of the same (seed, gold), and its
outcomes longer (`gold_outcomes`: a story drawn again, checked again); the validator's second
run never comes from here. The tracked base has no step log: step rewards
are not among the checks (docs/generating_tasks.md).
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from app.core.lru import LRU
from app.core.tasks import task_from_data
from app.sdk.answer import RESERVED_TOOL_NAMES
from app.sdk.environment import Environment, ToolContext
from app.sdk.user import MESSAGE_USER
from app.storage import images
from app.storage.runner import run_tool
from app.storage.seeding import apply_seed, parse_seed_now
from app.verify.state.dump import remember_template_dump
from app.verify.state.patching import remembered


@dataclass
class GoldRun:
    """Base + seed (`seeded`, an image to clone), then the gold calls: the database they left
    (`final`, open: read it; whoever writes it must `forget` the run) and each call's
    `run_tool` outcome (`{"output": ...}` or `{"error": ...}`; every call runs, as verify's gold
    replay does)."""

    seeded: bytes  # records the rows its seed wrote; its tracking starts here
    final: Connection
    names: tuple[str, ...]  # the calls' tool names
    outcomes: tuple[dict[str, Any], ...]
    # SQLite counted rows written by the calls (triggers fire only on writes), the answer row
    # of the framework's answer tools aside.
    changed: bool
    now: datetime
    # The environment's invariant violations in the seeded state, once the self-check evaluated
    # them (kit.check_task, on a clone of `seeded`): the validator's no-op verify, on another
    # clone of `seeded`, reads them instead of evaluating them again.
    seeded_violations: list[str] | None = None

    @property
    def failures(self) -> tuple[dict[str, Any], ...]:
        """The failed calls, as verify's GoldState records them."""
        return tuple(
            {"index": i, "name": name, "error": outcome["error"]}
            for i, (name, outcome) in enumerate(zip(self.names, self.outcomes, strict=True))
            if "error" in outcome
        )

    def close(self) -> None:
        raw = images.image_connection(self.final)
        self.final.close()
        raw.close()


_tracked: dict[str, tuple[bytes, str]] = {}  # env -> (image, its template)
_runs: LRU[tuple[str, str], GoldRun] = LRU(4, on_evict=lambda _key, run: run.close())
# (the calls' outcomes pickled, whether they wrote) of the last runs, by a digest of (env, seed,
# gold): what the self-check and the distractor test read of a run, kept for a story drawn again
# (the same story recurs: ~6% of retail's draws, ~25% of sql's) after its run left `_runs`.
_outcomes: LRU[str, tuple[bytes, bool]] = LRU(4096)


def tracked_base(env: Environment) -> bytes:
    """The environment's template with change tracking installed, nothing seeded (built once
    per process), its template's dump kept: dumped again if the verify cache let it go (every
    seeded state patches it; without it each would be read whole)."""
    found = _tracked.get(env.name)
    if found is None:
        key = "taskgen-" + task_from_data({"seed": None, "ground_truth": []}).snapshot_key
        template = images.template_image(env)
        built = images.snapshot_image(env, template, None, key, env.default_now, step_log=False)
        image = images.as_legacy_image(built)
        with bound(image) as c:
            found = _tracked[env.name] = (image, images.template_of(c))
    image, fingerprint = found
    if remembered(f"{fingerprint}:", env.compare) is None:
        with bound(image) as c, c.begin():  # nothing written yet: the template's rows
            remember_template_dump(c, env.metadata.tables, env.compare, fingerprint)
    return image


def _open(image: bytes) -> Connection:
    """A SQLAlchemy Connection (the process-wide engine: statements compiled once) on a clone."""
    return images.bind_connection(images.clone(image), begin="BEGIN")


@contextmanager
def bound(image: bytes) -> Iterator[Connection]:
    """`_open(image)`, closed (the database dropped) on exit."""
    c = _open(image)
    raw = images.image_connection(c)
    try:
        yield c
    finally:
        c.close()
        raw.close()


def run_calls(
    env: Environment, c: Connection, calls: Sequence[Mapping[str, Any]], now: datetime
) -> list[dict[str, Any]]:
    """Each call through `run_tool` on `c`, as verify's gold replay runs them (an unknown tool
    is an error outcome, and the next calls still run)."""
    ctx = ToolContext(now=now, session_id="gold")
    outcomes = []
    for call in calls:
        tool = env.tool_named(call["name"])
        if tool is None:
            outcomes.append({"error": "unknown tool"})
            continue
        outcomes.append(run_tool(c, tool, call["arguments"], ctx))
    return outcomes


def run_on_copy(
    env: Environment, run: GoldRun, calls: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`run_calls` on a clone of the run's final state: what the calls would do after the
    gold, the kept run left as it was."""
    with bound(images.serialize(run.final)) as copy:
        return run_calls(env, copy, calls, run.now)


def forget(env: Environment, seed: Any, gold: Sequence[Mapping[str, Any]]) -> None:
    """Drop the kept run of (seed, gold), if any (its database was written after the gold)."""
    run = _runs.pop(_key(env, seed, gold))
    if run is not None:
        run.close()


def _key(env: Environment, seed: Any, gold: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    return env.name, json.dumps([seed, gold], ensure_ascii=False)


def gold_outcomes(
    env: Environment, seed: Mapping[str, Any] | None, gold: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], bool]:
    """(each call's `run_tool` outcome, whether the calls wrote) of the run of `gold` on base +
    `seed`: `gold_run`'s, or, for a (seed, gold) run before in this process, its recorded
    outcomes (a run is a function of them: the validator checks a second run reaches the same
    state). Fresh objects on every call. Raises what `gold_run` raises."""
    digest = hashlib.sha256("\0".join(_key(env, seed, gold)).encode()).hexdigest()
    found = _outcomes.get(digest)
    if found is None:
        run = gold_run(env, seed, gold)
        found = (pickle.dumps(run.outcomes), run.changed)
        _outcomes.put(digest, found)
    return list(pickle.loads(found[0])), found[1]


def gold_run(
    env: Environment, seed: Mapping[str, Any] | None, gold: Sequence[Mapping[str, Any]]
) -> GoldRun:
    """The run of `gold` on base + `seed` (this process's last few are kept). Raises what
    seeding raises (SeedError, a constraint the seed breaks)."""
    key = _key(env, seed, gold)
    cached = _runs.get(key)
    if cached is not None:
        return cached
    now = parse_seed_now((seed or {}).get("now"), env.default_now)
    c = _open(tracked_base(env))
    raw = images.image_connection(c)
    try:
        with Session(bind=c) as db, db.begin():
            apply_seed(db, env.metadata, seed)
        with c.begin():
            # The seed's rows recorded, not dumped: only the validator dumps the seeded state
            # (by patching the template's dump with them), and only for the run it validates
            # (a distractor's trial, a story kept with one, a duplicate are never validated). From
            # here on the database (and each clone of its image) tracks only what the calls
            # write, so its dumps patch the seeded one with those few rows.
            seeded_key = "taskgen-seed-" + hashlib.sha256(key[1].encode()).hexdigest()[:32]
            images.mark_seeded(c, seeded_key)
        seeded = raw.serialize()
        outcomes, env_writes = [], 0
        for call in gold:
            written = raw.total_changes
            outcomes += run_calls(env, c, [call], now)
            # The answer row submit_answer/decline_request write, and the conversation row
            # message_user writes, are no change of the state.
            if call["name"] not in RESERVED_TOOL_NAMES and call["name"] != MESSAGE_USER:
                env_writes += raw.total_changes - written
    except BaseException:
        c.close()
        raw.close()
        raise
    names = tuple(str(call["name"]) for call in gold)
    changed = env_writes > 0
    run = GoldRun(seeded, c, names, tuple(outcomes), changed, now)
    _runs.put(key, run)
    return run
