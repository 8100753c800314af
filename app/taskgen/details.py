"""Missing details: a draw may leave out a fact the request states; the gold then looks it up.

A family lists the facts its prompt states that the agent could find on its own (`Omission`):
the customer's email (they give name and zip instead), an order number ("my most recent
order"), ... Each says what replaces the fact in the prompt (one pool of wordings per split,
disjoint) and how the gold changes (lookup calls inserted, calls replaced). A family declares
one only when what is left still determines the fact uniquely, distractors included.
`draw` (app/taskgen/draw.py) turns it on with `leaving_out(split, rng)`; `build_row` applies at
most one omission before the story's self-check, so the gold that is checked, validated and
written has the lookups. Shipped sets and distractor stories are built without it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.taskgen.splits import Split

if TYPE_CHECKING:
    from app.taskgen.kit import Draft

# Share of draws (with at least one omission declared) that leave one out.
OMIT_SHARE = 0.4


@dataclass(frozen=True)
class Omission:
    """A fact the prompt states (`text`, verbatim, once) that a draw may leave out."""

    tag: str  # "email", "order" ...: the phrasing tag is "omit-<tag><n>"
    text: str
    instead: Mapping[Split, tuple[str, ...]]  # what the prompt says in its place, per split
    # Gold calls inserted before gold call `before` (the lookups that find the fact).
    lookup: tuple[dict[str, Any], ...] = ()
    before: int = 0
    # Gold call index -> the call made instead (e.g. find by name and zip, not by email).
    swap: Mapping[int, dict[str, Any]] = field(default_factory=dict)


_plan: ContextVar[tuple[Split, random.Random] | None] = ContextVar("taskgen_omit", default=None)


@contextmanager
def leaving_out(split: Split, rng: random.Random) -> Iterator[None]:
    """Let the drafts built inside leave out a detail (drawn with `rng`, from `split`'s pools)."""
    token = _plan.set((split, rng))
    try:
        yield
    finally:
        _plan.reset(token)


@contextmanager
def stating_everything() -> Iterator[None]:
    """Build inside with every detail stated (a distractor's story: only its seed is used)."""
    token = _plan.set(None)
    try:
        yield
    finally:
        _plan.reset(token)


def omit(draft: Draft) -> tuple[Draft, str | None]:
    """The draft with at most one of its omissions applied, and the phrasing tag (None: none)."""
    plan = _plan.get()
    if plan is None or not draft.omissions:
        return draft, None
    split, rng = plan
    if rng.random() >= OMIT_SHARE:
        return draft, None
    o = draft.omissions[rng.randrange(len(draft.omissions))]
    n = rng.randrange(len(o.instead[split]))
    if draft.prompt.count(o.text) != 1:
        return draft, None  # a rewording made it ambiguous: state it
    prompt = draft.prompt.replace(o.text, o.instead[split][n])
    gold = [o.swap.get(i, call) for i, call in enumerate(draft.gold)]
    gold[o.before : o.before] = list(o.lookup)
    return replace(draft, prompt=prompt, gold=gold, omissions=()), f"omit-{o.tag}{n}"


def pools(split: Split, omissions: list[Omission]) -> set[str]:
    """Every wording `omissions` offer for a split (to show train and test share none)."""
    return {w for o in omissions for w in o.instead[split]}
