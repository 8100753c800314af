"""Validate a generated task before it is written, through the real tool runner and verifier.

A task passes (what `stategym tasks check` checks, app/cli/tasks.py) when its gold, replayed
through `run_tool`, reaches reward 1 in `verify_state`; a second replay reaches the same state;
a no-op earns 0; and its seed's rows do not collide (story ids from STORY_ID_FLOOR up, base
data below it, checked once per run; a seed row with a base row's key updates it; no two seed
rows share a key). The first run is the story's own (app/taskgen/gold_run.py); the second is
made here, on a clone of the seeded image. The seeded state is dumped once, on that clone, by
patching the template's dump with the seed's rows; the gold's and the second run's dumps patch
it (app/verify/state/dump.py), diffs compare the patched rows (app/verify/state/diff.py),
nothing touches the disk, and the seeded database is the no-op's final state (verify only reads).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

from app.core.tasks import TaskSpec, task_from_data
from app.errors import StateGymError
from app.sdk.environment import Environment
from app.sdk.seed_builder import STORY_ID_FLOOR
from app.storage.images import image_connection
from app.storage.seeding import SeedError
from app.taskgen.gold_run import bound, gold_run, run_calls, tracked_base
from app.verify.gold import GoldCache, GoldState
from app.verify.session_verify import verify_state
from app.verify.state.diff import diff_states
from app.verify.state.dump import DbState, dump_state

# Every environment's Story allocates ids from 100000 + 100 * index.


def content_key(task: dict[str, Any]) -> str:
    """A digest of everything but bookkeeping: two tasks with equal keys are the same task.
    (The tool schemas enter by their own digest, computed once per list.)"""
    body = {k: v for k, v in task.items() if k not in ("task_id", "split")}
    params = body.get("responses_create_params")
    if isinstance(params, dict) and "tools" in params:
        body["responses_create_params"] = {**params, "tools": _digest_of(params["tools"])}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


_tools_digest: list[tuple[Any, str]] = []  # (the last tool list seen, its digest)


def _digest_of(tools: Any) -> str:
    if _tools_digest and _tools_digest[0][0] is tools:
        return _tools_digest[0][1]
    digest = "tools:" + hashlib.sha256(json.dumps(tools, sort_keys=True).encode()).hexdigest()
    _tools_digest[:] = [(tools, digest)]
    return digest


class _OneTaskGold:
    """What `verify_state` asks a GoldCache for (`get`, `seed_state`), for the one task being
    validated: its gold and seed states computed here, on the tracked base, not read from files."""

    def __init__(self, gold: GoldState) -> None:
        self._gold = gold

    def get(self, task: TaskSpec) -> GoldState:
        return self._gold

    def seed_state(self, task: TaskSpec) -> DbState:
        return self._gold.seed_state


def _gold_answer(task: TaskSpec) -> dict[str, Any]:
    text = "Done. " + " ".join(task.expected_outputs)  # what `tasks check` answers
    message = {"type": "message", "role": "assistant"}
    return {"output": [{**message, "content": [{"type": "output_text", "text": text}]}]}


class Validator:
    """One per generation run (per worker process); holds the tracked base's keys."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        # The template with change tracking installed, nothing written (dumped whole once).
        with bound(tracked_base(env)) as c, c.begin():
            self.base_keys = {
                name: {tuple(r) for r in c.exec_driver_sql(_pk_query(table)).fetchall()}
                for name, table in env.metadata.tables.items()
            }
        for name, keys in self.base_keys.items():
            high = [k for k in keys if isinstance(k[0], int) and k[0] >= STORY_ID_FLOOR]
            if high:  # the base grew into the stories' ids: every generated task would be wrong
                raise ValueError(f"{env.name} base table {name} has ids >= {STORY_ID_FLOOR}")

    def problem(self, task: dict[str, Any]) -> str | None:
        """Why the task must be dropped (a short reason, counted in the summary), or None.

        Duplicates are the caller's to find (content_key), in the order tasks are kept."""
        collision = self._collision(task)
        if collision:
            return collision
        try:
            return self._check(task_from_data(task), task.get("kind"))
        except (StateGymError, SeedError) as exc:
            return f"invalid: {type(exc).__name__}"

    def _check(self, spec: TaskSpec, kind: str | None) -> str | None:
        env = self.env
        tables, compare = env.metadata.tables, env.compare
        gold_calls = [{"name": c.name, "arguments": c.arguments} for c in spec.ground_truth]
        # The first run: the story's self-check's when it ran in this process (gold_run.py).
        first = gold_run(env, spec.seed, gold_calls)
        tracked_base(env)  # the template's dump kept: the seeded state's dump patches it
        with bound(first.seeded) as again:
            with again.begin():  # first: the dumps below patch it
                seed_state = dump_state(again, tables, compare)
            with first.final.begin():
                state = dump_state(first.final, tables, compare)
            failures = first.failures
            seed_to_gold = diff_states(seed_state, state, compare, exact=True)
            gold = GoldState(seed_state, state, seed_to_gold, failures)
            cache = cast(GoldCache, _OneTaskGold(gold))  # the two methods verify_state calls
            if failures:
                return "gold below 1"  # verify masks such a task; tasks check reports it
            # The story's own check counted rows written; this is the same in verify's terms.
            if kind == "write" and not gold.seed_to_gold:
                return "gold changed nothing"
            if kind in ("read", "refusal") and gold.seed_to_gold:
                return "gold changed the state"
            raw = image_connection(again)
            written = raw.total_changes
            noop = verify_state(
                env=env,
                gold=cache,
                engine=again,  # type: ignore[arg-type]  # a Connection binds a Session too
                task=spec,
                response={"output": []},
                diff_limit=0,
                with_steps=False,  # step rewards are no check here (the base has no step log)
                # The seeded image's, as the self-check evaluated them (same bytes, read only).
                invariant_violations=first.seeded_violations,
            )
            # Verify only reads: the database is still the seeded one for the second run.
            assert raw.total_changes == written, "verify wrote to the database"
            run_calls(env, again, gold_calls, first.now)  # the second run: always run here
            result = verify_state(
                env=env,
                gold=cache,
                engine=again,  # type: ignore[arg-type]
                task=spec,
                response=_gold_answer(spec),
                diff_limit=3,
                with_steps=False,
            )
        if result["verification"]["state_diff"]:
            return "not deterministic"
        if result["reward"] != 1.0:
            return "gold below 1"
        if noop["reward"] != 0.0:
            return "no-op above 0"
        return None

    def _collision(self, task: dict[str, Any]) -> str | None:
        tables = self.env.metadata.tables
        for name, rows in (task.get("seed") or {}).get("rows", {}).items():
            table = tables[name]
            pk = [c.name for c in table.primary_key.columns]
            mine: set[tuple[Any, ...]] = set()
            for row in rows:
                if not all(c in row for c in pk):
                    continue  # a key the database assigns cannot collide
                key = tuple(row[c] for c in pk)
                if key in mine:
                    return f"id collision in {name}"
                mine.add(key)
                if isinstance(key[0], int) and key[0] >= STORY_ID_FLOOR:
                    continue  # a new entity: above every base id (checked in __init__)
                if key not in self.base_keys[name] and isinstance(key[0], int):
                    return (
                        f"new {name} row below the story id floor {STORY_ID_FLOOR:,} (a story's "
                        "new rows take ids from app.sdk.taskgen.STORY_ID_FLOOR up)"
                    )
        return None


def _pk_query(table: Any) -> str:
    cols = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
    return f'SELECT {cols} FROM "{table.name}"'
