"""Draw one candidate task: attempt i of (environment, split, seed) is a pure function of those.

Every draw is its own world (`own_world`, app/sdk/seed_builder.py): the ids and business
numbers its story's `SeedBuilder` hands out are drawn from the draw's seed, so no two tasks share
the entities a policy could memorise. The story is index STORY_INDEX and a distractor's story
index STORY_INDEX + 1: their ids differ in parity, so they never collide.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from app.sdk.seed_builder import own_world
from app.taskgen.details import leaving_out, stating_everything
from app.taskgen.distract import add_distractor, people_of, shuffle_tail, similar_names
from app.taskgen.kit import (
    InvalidRow,
    StoryFailed,
    TaskGenerator,
    answer_kind,
    difficulty,
    kind,
    read_back,
    validated,
)
from app.taskgen.phrasing import rephrase
from app.taskgen.splits import VOICES, Split, in_voice, split_names, split_variants, voice
from app.taskgen.validate import content_key

STORY_INDEX = 1
# Share of draws that try a distractor (kept only when the gold's results do not change): by
# default nearly every task holds a look-alike story a policy that skips a lookup acts on (a
# family whose distractor can change its gold's results gets none). 0.9 leaves some tasks
# without one, so "a namesake is always there" is no rule to learn either (4-10% more CPU a
# task than at 0.35: one more gold run when a distractor is tried).
DISTRACTOR_SHARE = 0.9
OTHER: dict[Split, Split] = {"train": "test", "test": "train"}


@dataclass(frozen=True)
class Choice:
    family: str
    fn: Any
    variant: int


def choices(gen: TaskGenerator, split: Split, families: list[str] | None) -> list[Choice]:
    known = gen.families()
    unknown = sorted(set(families or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {', '.join(sorted(known))}")
    return [
        Choice(name, fn, k)
        for name, (fn, n) in known.items()
        if not families or name in families
        for k in split_variants(n, split)
    ]


@dataclass
class Candidate:
    attempt: int
    task: dict[str, Any] | None  # None: the story could not be built (reason says why)
    key: str = ""
    reason: str = ""


def draw(
    gen: TaskGenerator, split: Split, seed: int, attempt: int, pool: list[Choice]
) -> Candidate:
    env = gen.env.name
    rng = random.Random(f"{env}/{split}/{seed}/{attempt}")
    choice = pool[rng.randrange(len(pool))]
    phrasing, opener, closer = voice(split, rng.randrange(len(VOICES[split])))
    names = split_names(gen.names, split)
    shuffle_tail(rng, names)  # the story pops its people from the end
    story_rng = random.Random(rng.getrandbits(64))
    # Its own stream: the stories, voices and rewordings draw what they drew before details.
    omit_rng = random.Random(f"{env}/{split}/{seed}/{attempt}/omit")
    world = random.Random(f"{env}/{split}/{seed}/{attempt}/world")
    try:
        with leaving_out(split, omit_rng), own_world(world):
            built = gen.build(STORY_INDEX, choice.fn, choice.variant, story_rng, names)
    except InvalidRow as exc:  # the family itself is wrong, not this draw: stop, saying which
        raise StoryFailed(_invalid(choice, exc)) from None
    except Exception as exc:  # the story's self-check failed (or its tools refused): drop it
        return Candidate(attempt, None, reason=f"self-check: {type(exc).__name__}")
    omitted = built.get("omitted")
    built = {k: v for k, v in built.items() if k not in ("difficulty", "family", "omitted")}
    people = people_of(gen, built)
    distractors: list[str] = []
    if rng.random() < DISTRACTOR_SHARE:
        d_rng = random.Random(rng.getrandbits(64))
        avoid = set(split_names(gen.names, OTHER[split])) | {_pair(p) for p in people}
        d_names = similar_names(people, split_names(gen.names, split), avoid, d_rng)
        distractors = add_distractor(gen, built, lambda: _build_plain(gen, choice, d_rng, d_names))
    key = content_key(built)  # before the voice: the same story in two voices is a duplicate
    user = built["responses_create_params"]["input"][-1]
    phrased = rephrase(user["content"], split, random.Random(rng.getrandbits(64)), gen.phrasing)
    user["content"] = in_voice(opener, phrased.text, closer)
    phrasing = "+".join((phrasing, *phrased.tags, *([omitted] if omitted else [])))
    gold = built["ground_truth"]
    expected = built.get("expected_outputs") or []
    task: dict[str, Any] = {
        "task_id": "",
        "env": env,
        "split": split,
        "family": choice.family,
        "variant": choice.variant,
        "phrasing": phrasing,
        "difficulty": difficulty(gen, gold, choice.family, distractor=bool(distractors)),
        "kind": kind(gen, gold, choice.family),
    }
    # Legacy text answers carry their kinds; answers as state carry theirs in expected_answer.
    answer = answer_kind(choice.family, expected) if expected else None
    if answer:
        task["answer_kind"] = answer
    task["entities"] = people
    task["distractors"] = distractors
    task.update((k, v) for k, v in built.items() if k not in ("task_id", "env"))
    # Read back as it will be: JSON keeps the seed's parent-first table order.
    try:
        return Candidate(attempt, validated(read_back(task)), key)
    except InvalidRow as exc:
        raise StoryFailed(_invalid(choice, exc)) from None


def _invalid(choice: Choice, exc: InvalidRow) -> str:
    where = f"{getattr(choice.fn, '__module__', '?')}.{getattr(choice.fn, '__name__', '?')}"
    return f"story {choice.family} (variant {choice.variant}) wrote {exc} -- fix {where}"


def _build_plain(
    gen: TaskGenerator, choice: Choice, rng: random.Random, names: list[tuple[str, str]]
) -> dict[str, Any]:
    """A distractor's story: every detail stated (only its seed and people are used)."""
    with stating_everything(), own_world(random.Random(rng.getrandbits(64))):
        return gen.build(STORY_INDEX + 1, choice.fn, choice.variant, rng, names)


def _pair(person: str) -> tuple[str, str]:
    first, _, last = person.partition(" ")
    return first, last
