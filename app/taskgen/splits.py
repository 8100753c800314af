"""Train and test draw from disjoint pools, so a test score measures generalisation.

Kept apart (and tested): the person names of the stories (even positions of an environment's
name pool go to train, odd to test), the voices wrapping a request (opener and closer), and for
every family with two or more variants its last variant (test only; the others are train only).
Families with a single variant appear in both splits, always with other names and voices.
"""

from __future__ import annotations

import re
from typing import Literal

Split = Literal["train", "test"]
SPLITS: tuple[Split, ...] = ("train", "test")

# (opener, closer) around the story's own request; the request itself is not rewritten.
VOICES: dict[Split, tuple[tuple[str, str], ...]] = {
    "train": (
        ("", ""),
        ("Hello. ", ""),
        ("", " Thanks!"),
        ("Hi there! ", " Thank you so much."),
        ("Good morning. ", " Thanks in advance."),
        ("Quick request: ", ""),
    ),
    "test": (
        ("Hey, hope you can help. ", " Cheers."),
        ("Good afternoon! ", " Much appreciated."),
        ("Sorry to bother you. ", " Have a good day."),
    ),
}


def split_names(names: list[tuple[str, str]], split: Split) -> list[tuple[str, str]]:
    return names[0::2] if split == "train" else names[1::2]


def split_variants(variants: int, split: Split) -> list[int]:
    """A family's variants in this split: the last one is test-only when there are several."""
    if variants < 2:
        return [0]
    return [variants - 1] if split == "test" else list(range(variants - 1))


def voice(split: Split, n: int) -> tuple[str, str, str]:
    """(phrasing id, opener, closer) of voice n of a split."""
    opener, closer = VOICES[split][n]
    return f"{split}-v{n}", opener, closer


# A request that opens with its own greeting ("Hi, I'm ...", "Hello! Is ..."): the word and its
# punctuation, and what follows.
_GREETING = re.compile(r"^(?:Hi|Hello|Hey|Good (?:morning|afternoon|evening))(?: there)?[,!.]?\s+")
# Openers that already greet: the request's own greeting after one would be a second one.
_GREETS = re.compile(r"^(?:Hi|Hello|Hey|Good (?:morning|afternoon|evening))\b")
_FIRST_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_THANKS = re.compile(r"\b(?:thanks|thank you|cheers|much appreciated)\b", re.IGNORECASE)


def in_voice(opener: str, request: str, closer: str) -> str:
    """The request wrapped in a voice, without seams: after a greeting opener the request's own
    greeting word goes ("Good morning. I'm Mia ..." rather than "Good morning. Hi, I'm Mia ...");
    any other opener ("Quick request: ") follows the request's greeting sentence, or replaces the
    greeting word when the request is one sentence; a closer that thanks is left out when the
    request's last sentence already thanks."""
    text = request
    greeting = _GREETING.match(text)
    if opener and greeting:
        rest = text[greeting.end() :]
        if _GREETS.match(opener):
            text = f"{opener}{rest[:1].upper()}{rest[1:]}"
        else:
            parts = _FIRST_SENTENCE.split(text, maxsplit=1)
            if len(parts) == 2:
                text = f"{parts[0]} {opener}{parts[1]}"
            else:
                text = f"{opener}{rest[:1].upper()}{rest[1:]}"
    else:
        text = f"{opener}{text}"
    if closer and _THANKS.search(closer):
        last = _FIRST_SENTENCE.split(text)[-1]
        if _THANKS.search(last):
            closer = ""
    return f"{text}{closer}"
