"""Phrasing a story's request: several wordings of one intent, none of which changes a fact.

A family writes its request once (`Draft.prompt`); each draw rewrites it with some of these, on
top of the voice (opener and closer, splits.py):

- **late identification** (order of facts): the sentence that says who the customer is
  ("Hi, I'm Mia Chen (mia.chen1@example.org).") moves after the request, reworded
  ("... I'm Mia Chen (mia.chen1@example.org), by the way.");
- **customer voice**: the request and the confirmation in the customer's own words
  ("Could you cancel order #W9001000, please?" for "Please cancel order #W9001000.",
  "Yes, I confirm: go ahead." for "You have my confirmation, please go ahead.");
- **an aside** (extra irrelevant detail) between two sentences ("I'm writing from my phone.",
  or one that sounds relevant and is not: "Someone else in my household has an account too,
  but this is only about mine.").

Every name, id, amount and date the prompt holds is kept verbatim (tested), so the gold stays
right; the wordings of train and test are disjoint pools (the test split's are never seen in
training). Left-out details the agent must look up change the gold too: app/taskgen/details.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from app.taskgen.splits import Split

# "Hi, I'm Name (email)." / "Hi, this is Name, zip code 12345." / "Hello! I'm ..." at the start.
_IDENT = re.compile(r"^(?:Hi|Hello|Hey)[,!]? (?P<who>(?:I'm|this is) .*?)\.(?=\s+[A-Z]|$)")
# The sentence giving consent; it holds no fact (checked: tests/test_taskgen_phrasing.py).
_CONFIRM = re.compile(r"(?:^|(?<=\s))[A-Z][^.!?]*\bconfirmation\b[^.!?]*[.!?]")
# Sentence ends: a period, ! or ? followed by a space and a capital (ids and amounts hold no
# space after their dots).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

# {who} is "I'm Name (...)" or "this is Name, ...".
LATE_ID: dict[Split, tuple[str, ...]] = {
    "train": ("By the way, {who}.", "Oh, and {who}.", "For the record, {who}."),
    "test": ("Forgot to say: {who}.", "In case you need it, {who}."),
}
CONFIRM: dict[Split, tuple[str, ...]] = {
    "train": (
        "Yes, I confirm: go ahead.",
        "I confirm, please do it.",
        "Consider this my confirmation, go ahead.",
    ),
    "test": ("You can take this as my explicit yes, go ahead.", "Confirmed on my side, proceed."),
}
ASIDES: dict[Split, tuple[str, ...]] = {
    "train": (
        "I'm writing from my phone, so sorry for any typos.",
        "It's been a long week.",
        "My neighbour recommended you, by the way.",
        "I tried the website first but gave up.",
        "I'm in a bit of a hurry today.",
        "I've been a customer for years.",
        # Details that sound relevant and are not: nothing in them is to be acted on.
        "Someone else in my household has an account too, but this is only about mine.",
        "A colleague asked me about something similar last week; that's a separate matter.",
    ),
    "test": (
        "The coffee machine at work is broken again.",
        "I'm between two meetings right now.",
        "My sister had a similar question last month.",
        "It's raining here, so I'm staying in today.",
        "My old address is still on some of my paperwork, but never mind that.",
    ),
}
# A request sentence "Please <verb> ...." in other words; {x} is "<verb> ...".
REQUEST: dict[Split, tuple[str, ...]] = {
    "train": ("Could you {x}, please?", "Can you {x}?", "I need you to {x}."),
    "test": ("Would you {x} for me?", "I'd like you to {x}."),
}
_REQUEST = re.compile(r"(?:^|(?<=\s))Please (?P<x>[a-z][^.!?]*)\.(?=\s|$)")
# Share of draws that get each rewrite.
REQUEST_SHARE = 0.4
LATE_ID_SHARE = 0.4
CONFIRM_SHARE = 0.4
ASIDE_SHARE = 0.4


@dataclass(frozen=True)
class Phrased:
    text: str
    tags: tuple[str, ...]  # which rewrites were applied, e.g. ("late-id1", "aside3")


def rephrase(prompt: str, split: Split, rng: random.Random) -> Phrased:
    """Some of the rewrites above, drawn with `rng` from the split's pools."""
    text, tags = prompt, []
    if rng.random() < REQUEST_SHARE:
        n = rng.randrange(len(REQUEST[split]))
        asked = _REQUEST.sub(lambda m: _ask(REQUEST[split][n], m.group("x")), text, count=1)
        if asked != text:
            text = asked
            tags.append(f"ask{n}")
    if rng.random() < CONFIRM_SHARE:
        n = rng.randrange(len(CONFIRM[split]))
        replaced = _CONFIRM.sub(lambda _m: CONFIRM[split][n], text, count=1)
        if replaced != text:
            text = replaced
            tags.append(f"confirm{n}")
    if rng.random() < LATE_ID_SHARE:
        n = rng.randrange(len(LATE_ID[split]))
        moved = _late_identification(text, LATE_ID[split][n])
        if moved is not None:
            text = moved
            tags.append(f"late-id{n}")
    if rng.random() < ASIDE_SHARE:
        n = rng.randrange(len(ASIDES[split]))
        sentences = _SENTENCE_END.split(text)
        at = rng.randrange(1, len(sentences) + 1)  # never before the first sentence
        sentences.insert(at, ASIDES[split][n])
        text = " ".join(sentences)
        tags.append(f"aside{n}")
    return Phrased(text, tuple(tags))


def _ask(template: str, request: str) -> str:
    if "go ahead" in request or "confirm" in request:
        return f"Please {request}."  # the consent sentence: CONFIRM's to reword
    return template.format(x=request)


def _late_identification(text: str, template: str) -> str | None:
    """The identifying first sentence moved after the request (before a closing confirmation)."""
    match = _IDENT.match(text)
    if match is None:
        return None
    rest = text[match.end() :].strip()
    if not rest:
        return None
    late = template.format(who=match.group("who"))
    sentences = _SENTENCE_END.split(rest)
    last = sentences[-1]
    if len(sentences) > 1 and ("confirm" in last or "go ahead" in last or "proceed" in last):
        return " ".join([*sentences[:-1], late, last])
    return f"{rest} {late}"


def pools(split: Split) -> set[str]:
    """Every wording of a split (to show train and test share none)."""
    return {*REQUEST[split], *LATE_ID[split], *CONFIRM[split], *ASIDES[split]}
