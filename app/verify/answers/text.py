"""The text answer path: the expected value is in the final message, and no rival of its kind.

Used for rows that ask for it (`answer_via: "text"`), legacy `expected_outputs`, and the judge.
ONE tokenizer (`app.core.values.tokens`) decides both what is a candidate and whether the
expected value is present: values are whole tokens, compared by value (`$1,234.50` is `1234.5`).
Any other candidate of the expected kind is a hedge; an `opaque` token is never a match, and one
carrying digits is a rival of every digit-bearing kind. An answer over MAX_ANSWER_CHARS fails.
Kinds come from `answer_kind`, else `infer_kind`. The candidates per kind, and the limits of a
path that cannot know intent (the answer tools have none of them), are in docs/verification.md
("Answers that hedge").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.core import value_grammar as g
from app.core.values import ANSWER_KINDS as KINDS
from app.core.values import (
    NotOneValue,
    Token,
    check_answer_kind,
    describe,
    parse_value,
    tokens,
)
from app.verify.answers.answer_names import (
    _MAX_VALUE_CHARS,
    _WORD,
    Hedge,
    _norm,
    _vocabulary,
    name_hedges,
    name_words,
)
from app.verify.state.dump import DbState

__all__ = [
    "KINDS",
    "MAX_ANSWER_CHARS",
    "_MAX_VALUE_CHARS",
    "_WORD",
    "Hedge",
    "_norm",
    "_vocabulary",
    "hedged_outputs",
    "id_families",
    "infer_kind",
    "missing_outputs",
    "text_answer",
]

MAX_ANSWER_CHARS = 4000
MAX_READ_CHARS = 16 * MAX_ANSWER_CHARS  # longer answers fail on length; reading stops here
_DIGIT_KINDS = ("amount", "number", "id", "date", "time", "datetime")
# Ids that read as numbers: digits between letters (`X66Y`), digit groups (`2-3`, `66_67`).
_NUMBERISH_ID = re.compile(r"[A-Za-z][0-9]+[A-Za-z]|^#?[0-9]+(?:[-_][0-9]+)+$")


def id_families(token: str) -> set[tuple[str, ...]]:
    """Which ids `token` is of the same kind as: one letter/digit pattern ("a9", "a-9-9") and
    length, or one letter prefix before digits ("E90110" and "E1001" are both employee ids)."""
    pattern = re.sub(r"[0-9]+", "9", re.sub(r"[a-z]+", "a", token))
    families: set[tuple[str, ...]] = {("shape", pattern, "" if "-" in token else str(len(token)))}
    prefix = re.fullmatch(r"([a-z]+)[0-9]+", token)
    if prefix:
        families.add(("prefix", prefix.group(1)))
    if token.isdigit():
        families.add(("digits",))
    return families


def _run(run: str) -> str:
    if run.isalpha():
        return f"[a-z]{{{len(run)}}}"
    return f"[0-9]{{{len(run)}}}" if run.isdigit() else re.escape(run)


def _inside_pattern(token: str) -> re.Pattern[str]:
    """An id of `token`'s exact letter/digit runs, or its prefix and digits, found anywhere."""
    runs = "".join(
        f"[a-z]{{{len(r)}}}"
        if r.isalpha()
        else f"[0-9]{{{len(r)}}}"
        if r.isdigit()
        else re.escape(r)
        for r in re.findall(r"[a-z]+|[0-9]+|[^a-z0-9]+", token)
    )
    prefix = re.fullmatch(r"([a-z]+)[0-9]+", token)
    return re.compile(runs + (f"|{prefix.group(1)}[0-9]" if prefix else ""))


def _parses(kind: str, text: str) -> bool:
    try:
        parse_value(kind, text)
    except NotOneValue:
        return False
    return True


def infer_kind(expected: str) -> str:
    """The kind of a legacy expected output: email, datetime, date, time, amount (a fraction
    or a currency), number (up to 5 digits), id (letters and digits, or 6+ digits), else name."""
    e = _norm(expected).lstrip("#")
    for kind in ("email", "datetime", "date", "time"):
        if _parses(kind, e) and not e.isdigit():
            return kind
    number = re.fullmatch(r"([$€£]\s?)?([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(\.[0-9]+)?", e.lstrip("-"))
    if number and not (number.group(3) is None and len(e) >= 6 and not number.group(1)):
        return "amount" if number.group(3) or number.group(1) else "number"
    if re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", e) and any(c.isdigit() for c in e):
        if any(c.isalpha() for c in e) or len(e) >= 6:
            return "id"
    return "name"


def _kinds(expected: Sequence[str], declared: Any) -> list[str]:
    if declared is None:
        return [infer_kind(e) for e in expected]
    return check_answer_kind(declared, len(expected))


@dataclass(frozen=True)
class _Reading:
    """The answer read once: its tokens, its clean words (None where an opaque token breaks
    them) for presence, and every word (glued ones split out) for naming rivals."""

    toks: tuple[Token, ...]
    clean: tuple[str | None, ...]
    loose: tuple[str, ...]

    @staticmethod
    @functools.lru_cache(maxsize=16)  # missing_outputs and hedged_outputs read the same text
    def of(text: str) -> _Reading:
        toks = tokens(text[:MAX_READ_CHARS])
        clean: list[str | None] = []
        loose: list[str] = []
        for t in toks:
            if t.kind == "opaque":
                clean.append(None)
                loose.extend(re.findall(r"[^\W\d_]+", t.value))
            else:
                words = _WORD.findall(t.text.casefold())
                clean.extend(words)
                loose.extend(words)
        return _Reading(tuple(toks), tuple(clean), tuple(loose))


def _value(kind: str, expected: str) -> tuple[str, Any]:
    """The expected output's kind and value: its declared kind, else its inferred kind, else
    text (whole words)."""
    kind = "text" if kind == "refusal" else kind
    if kind in ("name", "text"):
        return kind, name_words(expected)
    for each in (kind, infer_kind(expected)):  # a declared "date" holding a datetime, say
        if each not in ("name", "text"):
            try:
                return each, parse_value(each, expected)
            except NotOneValue:
                pass
    return "text", name_words(expected)


def _contains(words: Sequence[str | None], wanted: tuple[str, ...]) -> bool:
    n = len(wanted)
    return n > 0 and any(tuple(words[i : i + n]) == wanted for i in range(len(words) - n + 1))


def _present(kind: str, value: Any, r: _Reading) -> bool:
    if kind in ("name", "text"):
        return _contains(r.clean, value)
    for t in r.toks:
        if kind in ("amount", "number") and t.kind in ("amount", "number") and t.value == value:
            return True
        if kind == "id" and t.kind in ("id", "number") and t.text.lstrip("#").casefold() == value:
            return True
        if t.kind == kind and t.value == value:
            return True
        if t.kind == "datetime" and kind in ("date", "time"):
            if (t.value.date() if kind == "date" else t.value.time()) == value:
                return True
        if kind == "boolean" and t.kind == "word" and g.BOOLEANS.get(t.value) == value:
            return True
    if kind == "datetime":
        return _present("date", value.date(), r) and _present("time", value.time(), r)
    return False


def _rival(kind: str, t: Token, wanted: set[Any], ids: list[re.Pattern[str]]) -> bool:
    """Whether token `t` is a candidate of `kind` that is not an expected value."""
    if t.kind == "opaque":
        if kind in _DIGIT_KINDS:
            return any(c.isdigit() for c in t.value)
        return kind == "email" and "@" in t.text
    if kind in ("amount", "number"):
        if t.kind in ("amount", "number"):
            return t.value not in wanted
        if t.kind == "word":
            return any(w in g.NUMBER_WORDS for w in re.split(r"[-'’.]", t.value))
        return t.kind == "id" and bool(_NUMBERISH_ID.search(t.text))
    if kind == "id":
        if t.kind not in ("id", "number"):
            return False
        v = t.text.lstrip("#").casefold()
        if v in wanted or (t.kind == "number" and not (v.isdigit() and len(v) >= 6)):
            return False
        families = set().union(*(id_families(w) for w in wanted))
        return bool(id_families(v) & families) or any(p.search(v) for p in ids)
    if kind in ("date", "time", "datetime"):
        if t.kind == "monthday":  # "May 8": a day of the kind, its year unsaid
            if kind == "time":
                return False
            days = wanted if kind == "date" else {w.date() for w in wanted}
            return t.value not in {(d.month, d.day) for d in days}
        values = _parts(t)
        if kind == "datetime":
            dates, times = {w.date() for w in wanted}, {w.time() for w in wanted}
            own = {"datetime": wanted, "date": dates, "time": times}
            return any(v not in own[k] for k, v in values)
        return any(v not in wanted for k, v in values if k == kind)
    if kind == "email":
        return t.kind == "email" and t.value not in wanted
    if kind == "boolean":
        return t.kind == "word" and t.value in g.BOOLEANS and g.BOOLEANS[t.value] not in wanted
    return False


def _parts(t: Token) -> list[tuple[str, Any]]:
    if t.kind == "datetime":
        return [("datetime", t.value), ("date", t.value.date()), ("time", t.value.time())]
    return [(t.kind, t.value)] if t.kind in ("date", "time") else []


def _show(t: Token) -> str:
    if t.kind in ("amount", "number", "date", "time", "datetime"):
        return describe(t.kind, t.value)
    return t.text.casefold()


def missing_outputs(expected: Sequence[str], answer: str, declared: Any = None) -> list[str]:
    """Expected outputs the answer does not state as a whole token of their kind, by value."""
    reading = _Reading.of(answer)
    missing = []
    for e, kind in zip(expected, _kinds(expected, declared), strict=True):
        kind, value = _value(kind, e)
        if not _present(kind, value, reading):
            missing.append(e)
    return missing


def hedged_outputs(
    expected: Sequence[str], answer: str, declared: Any = None, seed_state: DbState | None = None
) -> list[Hedge]:
    """The kinds whose candidates in `answer` are more than the expected values (or, for an
    answer over MAX_ANSWER_CHARS, one 'length' entry). Missing values are `missing_outputs`'."""
    if not expected:
        return []
    if len(answer) > MAX_ANSWER_CHARS:
        return [Hedge("length", [f"<= {MAX_ANSWER_CHARS} chars"], [f"{len(answer)} chars"])]
    reading = _Reading.of(answer)
    stated = {_norm(e) for e in expected}  # an expected output is never another one's rival
    by_kind: dict[str, list[str]] = {}
    for e, kind in zip(expected, _kinds(expected, declared), strict=True):
        by_kind.setdefault(_value(kind, e)[0], []).append(e)
    hedges = []
    for kind, values in by_kind.items():
        if kind == "text":
            continue
        if kind == "name":
            if seed_state is not None:
                hedges.extend(name_hedges(values, reading.loose, seed_state))
            continue
        wanted = {_value(kind, e)[1] for e in values}
        ids = [_inside_pattern(w) for w in wanted] if kind == "id" else []
        extra = sorted(
            {
                _show(t)
                for t in reading.toks
                if t.text.casefold() not in stated and _rival(kind, t, wanted, ids)
            }
        )
        if extra:
            hedges.append(Hedge(kind, list(values), extra[:20]))
    return hedges


@dataclass(frozen=True)
class TextAnswer:
    """The text path's verdict on one expected answer: ok, and why not."""

    ok: bool
    reason: str
    missing: list[str]
    hedges: list[Hedge]


def text_answer(
    kind: str, value: Any, answer: str, seed_state: DbState | None = None
) -> TextAnswer:
    """Score an `expected_answer` ({kind, value}; value a scalar or a list) against free text:
    every expected value present as a whole token, and no rival of its kind."""
    items = value if isinstance(value, list) else [value]
    expected = [describe(kind, parse_value(kind, v)) if kind != "name" else str(v) for v in items]
    missing = missing_outputs(expected, answer, [kind] * len(expected))
    hedges = hedged_outputs(expected, answer, [kind] * len(expected), seed_state)
    if missing:
        reason = f"the answer does not state {', '.join(missing)} as one whole value"
    elif hedges:
        reason = f"the answer also names {', '.join(hedges[0].also_named[:5])}"
    else:
        reason = "stated, and nothing else of its kind"
    return TextAnswer(not missing and not hedges, reason, missing, hedges)
