"""How an environment's requests may be reworded, declared by the environment (`Phrasing`).

A family writes its request once; each draw may reword it (app/taskgen/phrasing.py applies the
declaration), never changing a fact: the `request` sentence in other words (one holding a word
of `keep_request`, the consent, is left alone), the `consent` sentence, the identifying
`greeting` moved after the request (before a `closing` sentence), irrelevant `asides` between
sentences. Sentences are named in words (`sentence_starting("Please")`, `sentence_with(...)`,
`opening(...)`) or by compiled patterns; a part left None is never reworded. Every draw draws
every part, so a seed's rewordings do not depend on which parts apply; train's and test's
wordings share none (`Wordings.pool`). A leaf of the SDK: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SPLITS = ("train", "test")


def _per_split(train: tuple[str, ...], test: tuple[str, ...]) -> Mapping[str, tuple[str, ...]]:
    return {"train": train, "test": test}


@dataclass(frozen=True)
class Wordings:
    """The replacements a draw picks from, per split (train and test disjoint)."""

    # "{x}" is the request after its lead word ("cancel order #W9001000").
    request: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: _per_split(
            ("Could you {x}, please?", "Can you {x}?", "I need you to {x}."),
            ("Would you {x} for me?", "I'd like you to {x}."),
        )
    )
    consent: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: _per_split(
            (
                "Yes, I confirm: go ahead.",
                "I confirm, please do it.",
                "Consider this my confirmation, go ahead.",
            ),
            ("You can take this as my explicit yes, go ahead.", "Confirmed on my side, proceed."),
        )
    )
    # "{who}" is the greeting's who group ("I'm Name (...)", "this is Name, ...").
    late_greeting: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: _per_split(
            ("By the way, {who}.", "Oh, and {who}.", "For the record, {who}."),
            ("Forgot to say: {who}.", "In case you need it, {who}."),
        )
    )
    asides: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: _per_split(
            (
                "I'm writing from my phone, so sorry for any typos.",
                "It's been a long week.",
                "My neighbour recommended you, by the way.",
                "I tried the website first but gave up.",
                "I'm in a bit of a hurry today.",
                "I've been a customer for years.",
                # Details that sound relevant and are not: nothing in them is to be acted on,
                # and none states a fact about the data (a look-alike the story may not hold).
                "I hope I've come to the right place for this.",
                "A colleague asked me about something similar last week; that's a separate matter.",
            ),
            (
                "The coffee machine at work is broken again.",
                "I'm between two meetings right now.",
                "My sister had a similar question last month.",
                "It's raining here, so I'm staying in today.",
                "Sorry if I'm repeating something I asked before.",
            ),
        )
    )

    def pool(self, split: str) -> set[str]:
        """Every wording of a split (to show train and test share none)."""
        parts = (self.request, self.consent, self.late_greeting, self.asides)
        return {w for part in parts for w in part[split]}


@dataclass(frozen=True)
class Phrasing:
    """Which sentences of an environment's requests a draw may reword (None: never)."""

    request: re.Pattern[str] | None = None  # group `x`: the request after its lead word
    keep_request: tuple[str, ...] = ()
    consent: re.Pattern[str] | None = None
    greeting: re.Pattern[str] | None = None  # matched at the start; group `who`
    closing: tuple[str, ...] = ()
    asides: bool = True
    wordings: Wordings = field(default_factory=Wordings)
    # Share of draws that get each rewording.
    share: float = 0.4


def sentence_starting(lead: str) -> re.Pattern[str]:
    """A sentence '<lead> <lower-case words>.'; group `x` is what follows the lead word."""
    return re.compile(rf"(?:^|(?<=\s)){re.escape(lead)} (?P<x>[a-z][^.!?]*)\.(?=\s|$)")


def sentence_with(word: str) -> re.Pattern[str]:
    """A sentence (capital first) holding `word`."""
    return re.compile(rf"(?:^|(?<=\s))[A-Z][^.!?]*\b{re.escape(word)}\b[^.!?]*[.!?]")


def opening(greetings: Sequence[str], introductions: Sequence[str]) -> re.Pattern[str]:
    """A first sentence '<greeting>[,!] <introduction> ....'; group `who` from the introduction
    on ("Hi, I'm Mia Chen (mia@example.org)." -> "I'm Mia Chen (mia@example.org)")."""
    hi = "|".join(re.escape(g) for g in greetings)
    intro = "|".join(re.escape(i) for i in introductions)
    return re.compile(rf"^(?:{hi})[,!]? (?P<who>(?:{intro}) .*?)\.(?=\s+[A-Z]|$)")
