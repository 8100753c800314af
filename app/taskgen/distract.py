"""Distractors: a second customer of the same kind of story, with a similar name, in the seed.

The distractor is the same family built again for another story index (its own id block) with
names that share a last name with the task's people. It is merged only if the gold calls return
exactly the same results with and without it: then the gold, its expected answers and every
decision it encodes stay right, and the agent must tell the two people apart.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, TypeVar

from app.sdk.seed_builder import STORY_ID_FLOOR  # rows below it update base rows
from app.taskgen.gold_run import gold_outcomes
from app.taskgen.kit import TaskGenerator, run_seed, without_self_check

T = TypeVar("T")
# Stories pop their people from the end of a names list, a handful at most (sql's up to ten):
# only that many end places need to be random.
SHUFFLED_TAIL = 64


def shuffle_tail(rng: random.Random, items: list[T], k: int = SHUFFLED_TAIL) -> None:
    """Fill the last k places of `items` with a uniform draw without replacement, in random
    order: the last k steps of `rng.shuffle` (the whole shuffle when k >= len - 1, with the
    same draws), so a draw costs O(k), not O(len) for a pool of thousands of names."""
    n = len(items)
    for i in range(n - 1, max(n - 1 - k, 0), -1):
        j = rng.randrange(i + 1)
        items[i], items[j] = items[j], items[i]


def similar_names(
    people: list[str], pool: list[tuple[str, str]], avoid: set[tuple[str, str]], rng: random.Random
) -> list[tuple[str, str]]:
    """Names a story pops from the end: (another first name, the same last name), then the pool."""
    firsts = sorted({f for f, _ in pool})
    similar = []
    for person in people:
        first, _, last = person.partition(" ")
        options = [f for f in firsts if f != first and (f, last) not in avoid]
        if options:
            similar.append((rng.choice(options), last))
    rest = [p for p in pool if p not in avoid]
    shuffle_tail(rng, rest)
    return rest + similar[::-1]


def gold_results(gen: TaskGenerator, task: dict[str, Any]) -> str | None:
    """The gold calls' outputs on base + the task's seed (the self-check's run when the seed is
    the story's own: app/taskgen/gold_run.py), or None when a call or the seed fails."""
    try:
        outcomes, _changed = gold_outcomes(gen.env, run_seed(task), task["ground_truth"])
    except Exception:  # the merged seed breaks a constraint (a unique name): no distractor
        return None
    if any("error" in outcome for outcome in outcomes):
        return None  # a gold that fails here is the validator's to report
    return json.dumps([outcome["output"] for outcome in outcomes])


def updates_base(task: dict[str, Any]) -> bool:
    return any(
        not isinstance(r.get("id"), int) or r["id"] < STORY_ID_FLOOR
        for rows in task["seed"].get("rows", {}).values()
        for r in rows
    )


def merged_seed(task: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    rows = {t: list(r) for t, r in task["seed"].get("rows", {}).items()}
    for table, extra in other["seed"].get("rows", {}).items():
        rows.setdefault(table, []).extend(extra)
    return {**task["seed"], "rows": rows}


def add_distractor(
    gen: TaskGenerator, task: dict[str, Any], build_other: Callable[[], dict[str, Any]]
) -> list[str]:
    """Merge a distractor story into `task` (in place) when it leaves the gold's results
    unchanged; returns the distractor's people (empty: none was added)."""
    try:
        with without_self_check():  # the merged task is what gets checked
            other = build_other()
    except (AssertionError, LookupError, ValueError, IndexError):
        return []
    if updates_base(other):  # its base-row updates (balances, stock) assume the base alone;
        # a distractor never brings those
        return []
    seed = merged_seed(task, other)
    before = gold_results(gen, task)
    after = gold_results(gen, {**task, "seed": seed})
    if before is None or before != after:
        return []
    task["seed"] = seed
    return people_of(gen, other)


def people_of(gen: TaskGenerator, task: dict[str, Any]) -> list[str]:
    """The people of a story's seed ("First Last"), where its environment says they are."""
    return gen.people.of(task["seed"])
