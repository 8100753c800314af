"""Rewording a story's request as its environment declares (`Phrasing`, app/sdk/phrasing.py).

A family writes its request once (`Draft.prompt`); each draw rewrites it with some of the
environment's declared rewordings, on top of the voice (opener and closer, splits.py): the
request sentence and the consent in other words, the identifying greeting moved after the
request, an aside between two sentences. The framework holds no pattern of any environment's
prose: a part the environment leaves undeclared is drawn (so every environment's draws consume
the same random numbers) and never applied.

Every name, id, amount and date the prompt holds is kept verbatim (tested), so the gold stays
right; the wordings of train and test are disjoint pools. Left-out details the agent must look
up change the gold too: app/taskgen/details.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from app.sdk.phrasing import Phrasing
from app.taskgen.splits import Split

# Sentence ends: a period, ! or ? followed by a space and a capital (ids and amounts hold no
# space after their dots).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class Phrased:
    text: str
    tags: tuple[str, ...]  # which rewrites were applied, e.g. ("late-id1", "aside3")


def rephrase(prompt: str, split: Split, rng: random.Random, phrasing: Phrasing) -> Phrased:
    """Some of `phrasing`'s rewordings, drawn with `rng` from the split's pools."""
    text, tags = prompt, []
    words = phrasing.wordings
    if rng.random() < phrasing.share:
        n = rng.randrange(len(words.request[split]))
        if phrasing.request is not None:
            wording = words.request[split][n]
            asked = phrasing.request.sub(
                lambda m: (
                    m.group(0)
                    if _holds(m.group("x"), phrasing.keep_request)
                    else wording.format(x=m.group("x"))
                ),
                text,
                count=1,
            )
            if asked != text:
                text = asked
                tags.append(f"ask{n}")
    if rng.random() < phrasing.share:
        n = rng.randrange(len(words.consent[split]))
        if phrasing.consent is not None:
            replaced = phrasing.consent.sub(lambda _m: words.consent[split][n], text, count=1)
            if replaced != text:
                text = replaced
                tags.append(f"confirm{n}")
    if rng.random() < phrasing.share:
        n = rng.randrange(len(words.late_greeting[split]))
        if phrasing.greeting is not None:
            moved = _late_greeting(text, phrasing, words.late_greeting[split][n])
            if moved is not None:
                text = moved
                tags.append(f"late-id{n}")
    if rng.random() < phrasing.share:
        n = rng.randrange(len(words.asides[split]))
        if phrasing.asides:
            sentences = _SENTENCE_END.split(text)
            at = rng.randrange(1, len(sentences) + 1)  # never before the first sentence
            sentences.insert(at, words.asides[split][n])
            text = " ".join(sentences)
            tags.append(f"aside{n}")
    return Phrased(text, tuple(tags))


def _holds(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _late_greeting(text: str, phrasing: Phrasing, template: str) -> str | None:
    """The greeting (first sentence) moved after the request (before a closing sentence)."""
    assert phrasing.greeting is not None
    match = phrasing.greeting.match(text)
    if match is None:
        return None
    rest = text[match.end() :].strip()
    if not rest:
        return None
    late = template.format(who=match.group("who"))
    sentences = _SENTENCE_END.split(rest)
    last = sentences[-1]
    if len(sentences) > 1 and _holds(last, phrasing.closing):
        return " ".join([*sentences[:-1], late, last])
    return f"{rest} {late}"


def pools(split: Split, phrasing: Phrasing) -> set[str]:
    """Every wording of a split (to show train and test share none)."""
    return phrasing.wordings.pool(split)
