"""Answer values by kind: a submitted answer is exactly one value (or one set) of a kind, or not.

Pure functions, no database. `parse_value(kind, raw)` reads the WHOLE raw JSON scalar as one
value of `kind` (amount, number, id, date, time, datetime, email, name, text, boolean) and
raises `NotOneValue(reason)` otherwise. Values are normalised (Decimal, datetime, casefolded
text) and compare with `==`, never rounded: `233` = `$233.00`, `233.004` is another amount.
Other scripts' digits and spelled-out numbers are never values. A list answer (`many=True`) is
compared as a set. The free-text path uses `tokens(text)`, the one tokenizer, on the same
grammar (app/core/value_grammar.py). Accepted and refused spellings per kind:
docs/verification.md ("Answers are state").
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.core import value_grammar as g
from app.core.value_tokens import Token, tokens
from app.errors import InvalidTask

__all__ = [
    "ANSWER_KINDS",
    "KINDS",
    "NotOneValue",
    "Token",
    "Verdict",
    "answers_equal",
    "check",
    "check_answer_kind",
    "describe",
    "parse_answer",
    "parse_value",
    "tokens",
]

KINDS = ("amount", "number", "id", "date", "time", "datetime", "email", "name", "text", "boolean")
# What a task's `answer_kind` may name: the kinds, and refusal (a legacy keyword kind, read as
# text by app/verify/answers.py).
ANSWER_KINDS = (*KINDS, "refusal")
_NAMES = {"amount": "an amount", "id": "an id", "email": "an email address"}
_PLURAL = {"datetime": "datetimes", "text": "texts", "boolean": "booleans"}

_WHOLE = {
    "amount": re.compile(rf"{g.AMOUNT}|{g.NUMBER}", re.I),
    "number": re.compile(g.NUMBER),
    "id": re.compile(g.ID_WHOLE),
    "date": re.compile(g.DATE, re.I),
    "time": re.compile(g.TIME, re.I),
    "datetime": re.compile(g.DATETIME, re.I),
    "email": re.compile(g.EMAIL),
}
_WRAPPERS = (("**", "**"), ("*", "*"), ("`", "`"), ('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"))
LIST_SEPARATORS = re.compile(r"\s*(?:[,;/\n]|\band\b|\bor\b|&)\s*", re.I)


class NotOneValue(ValueError):
    """The raw answer is not exactly one value of the kind; `reason` says why, readably."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _a(kind: str) -> str:
    return _NAMES.get(kind, f"a {kind}")


def _unwrap(text: str) -> str:
    """Drop what may surround ONE value: whitespace, one trailing period, quotes, emphasis."""
    s = text.strip()
    for _ in range(4):
        before = s
        if s.endswith(".") and not s.endswith(".."):
            s = s[:-1].rstrip()
        for left, right in _WRAPPERS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : -len(right)].strip()
        if s == before:
            break
    return s


def parse_value(kind: str, raw: object) -> Any:
    """The one value of `kind` that the whole `raw` (a JSON scalar) spells; else NotOneValue.

    Values: amount/number -> Decimal, date -> date, time -> time, datetime -> datetime,
    boolean -> bool, id/email/name/text -> normalised str."""
    if kind not in KINDS:
        raise NotOneValue(f"unknown answer kind {kind!r}: one of {', '.join(KINDS)}")
    if isinstance(raw, bool):
        if kind == "boolean":
            return raw
        raise NotOneValue(f"{str(raw).lower()} is a boolean, not {_a(kind)}")
    if isinstance(raw, int | float):
        return _from_number(kind, raw)
    if not isinstance(raw, str):
        what = "a list" if isinstance(raw, list | tuple) else type(raw).__name__
        raise NotOneValue(f"{what} is not one value: {_a(kind)} is expected")
    text = _unwrap(raw)
    if not text:
        raise NotOneValue(f"an empty answer is not {_a(kind)}")
    if kind in ("name", "text"):
        return _words(text, kind)
    if kind == "boolean":
        if text.casefold() in g.BOOLEANS:
            return g.BOOLEANS[text.casefold()]
        raise NotOneValue(f"'{text}' is not yes/no/true/false")
    if _WHOLE[kind].fullmatch(text):
        try:
            return g.read_value(kind, text)
        except g.Unreadable as e:
            raise NotOneValue(str(e)) from None
    raise NotOneValue(_why_not(kind, text))


def _from_number(kind: str, raw: int | float) -> Any:
    if isinstance(raw, float) and not math.isfinite(raw):
        raise NotOneValue(f"{raw} is not {_a(kind)}")
    if kind in ("amount", "number"):
        return Decimal(repr(raw)) if isinstance(raw, float) else Decimal(raw)
    if kind == "id" and isinstance(raw, int):
        return str(raw)
    if kind in ("text", "name"):
        return _words(repr(raw), kind)
    raise NotOneValue(f"the number {raw} is not {_a(kind)}")


def _words(text: str, kind: str) -> str:
    value = " ".join(text.split()).casefold().strip(" \t\"'“”‘’`*.,;:!?()[]{}")
    if kind == "name" and not any(c.isalpha() for c in value):
        raise NotOneValue(f"'{text}' is not a name: it has no letters")
    if not value:
        raise NotOneValue(f"'{text}' is not {_a(kind)}")
    return value


def _why_not(kind: str, text: str) -> str:
    """A readable reason, from what the tokenizer reads in `text`."""
    found = tokens(text)
    same = [t for t in found if _token_is(kind, t)]
    if len(same) >= 2:
        shown = " and ".join(t.text for t in same[:3]) + (" and more" if len(same) > 3 else "")
        return f"{_count(len(same))} {_PLURAL.get(kind, kind + 's')}: {shown}"
    if any(c.isdigit() and not "0" <= c <= "9" for c in text):
        return f"'{text}' is not {_a(kind)}: only the digits 0-9 are read"
    glued = [t for t in found if t.kind == "opaque"]
    if glued:
        return f"'{glued[0].text}' is not {_a(kind)}: a value glued to other characters"
    if same:
        return f"'{text}' is not {_a(kind)}: {same[0].text} with other text around it"
    if len(found) == 1 and found[0].kind in (*_TYPED, "id"):
        return f"'{text}' is {_a(found[0].kind)}, not {_a(kind)}"
    return f"'{text}' is not {_a(kind)}"


def _token_is(kind: str, t: Token) -> bool:
    if kind == "amount":
        return t.kind in ("amount", "number")
    if kind == "id":
        return t.kind in ("id", "number")
    return t.kind == kind


def _count(n: int) -> str:
    return {2: "two", 3: "three"}.get(n, str(n))


def parse_answer(kind: str, raw: object, *, many: bool) -> Any:
    """One value (`many=False`) or a frozenset of values (`many=True`: a JSON list, or a
    string listing values; see the module docstring)."""
    if not many:
        return parse_value(kind, raw)
    if isinstance(raw, str):
        raw = _split(kind, raw)
    if not isinstance(raw, list | tuple):
        raise NotOneValue(f"a list of {_PLURAL.get(kind, kind + 's')} is expected")
    values = set()
    for item in raw:
        if isinstance(item, list | tuple | dict):
            raise NotOneValue("a list item is itself a list or an object")
        try:
            values.add(parse_value(kind, item))
        except NotOneValue as e:
            raise NotOneValue(f"list item {item!r}: {e.reason}") from None
    return frozenset(values)


_TYPED = ("amount", "number", "date", "time", "datetime", "email")
_GAP = re.compile(r"\s*(?:[,;&]|\band\b)?\s*(?:\n\s*(?:[-*•]\s+)?)?", re.I)


def _split(kind: str, text: str) -> list[str]:
    """A string listing values: typed kinds by the tokenizer (only separators between them),
    other kinds split on newlines, `;`, `,` and ` and `. 'or' never separates items."""
    if re.search(r"\bor\b", text, re.I):
        raise NotOneValue("'or' does not separate list items: it offers alternatives")
    if kind not in _TYPED:
        items = re.split(r"\s*(?:\n|;|,|\band\b)\s*", text.strip(), flags=re.I)
        return [item for item in items if item.strip()]
    found = [t for t in tokens(text) if _token_is(kind, t)]
    if not found:
        raise NotOneValue(f"'{text}' lists no {_PLURAL.get(kind, kind + 's')}")
    gaps = [text[a.end : b.start] for a, b in zip(found, found[1:], strict=False)]
    for gap in gaps:
        if not _GAP.fullmatch(gap):
            raise NotOneValue(f"'{gap.strip()}' between values is not a list separator")
    for edge in (text[: found[0].start], text[found[-1].end :]):
        if _unwrap(edge).strip(" ,;-*•\n"):
            raise NotOneValue(f"'{edge.strip()}' is not {_a(kind)}")
    return [t.text for t in found]


def answers_equal(kind: str, expected: object, submitted: object) -> bool:
    """Whether two parsed answers (values or frozensets of values) are the same answer."""
    if isinstance(expected, frozenset) != isinstance(submitted, frozenset):
        return False
    return expected == submitted


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str


def check(kind: str, expected: object, submitted: object) -> Verdict:
    """Compare the raw expected answer (a scalar or list) with the raw submitted one, with a
    readable reason. A submitted name holding a list separator the expected name lacks is a
    list of names, not one."""
    many = isinstance(expected, list)
    want = parse_answer(kind, expected, many=many)
    try:
        got = parse_answer(kind, submitted, many=many)
    except NotOneValue as e:
        return Verdict(False, e.reason)
    if kind == "name" and not many and isinstance(submitted, str):
        seps = set(LIST_SEPARATORS.findall(_unwrap(submitted)))
        extra = {s.strip().lower() for s in seps} - {
            s.strip().lower() for s in LIST_SEPARATORS.findall(str(expected))
        }
        if extra:
            return Verdict(False, f"a list of names, not one name: '{_unwrap(submitted)}'")
    if answers_equal(kind, want, got):
        return Verdict(True, "equal")
    return Verdict(False, f"submitted {describe(kind, got)}, expected {describe(kind, want)}")


def describe(kind: str, value: object) -> str:
    """A value as a person reads it (sets sorted, comma-separated)."""
    if isinstance(value, frozenset):
        return "[" + ", ".join(sorted(describe(kind, v) for v in value)) + "]"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Decimal):
        if kind == "amount" and value == value.quantize(Decimal("0.01")):
            return format(value.quantize(Decimal("0.01")), "f")
        return format(value.normalize(), "f")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="minutes" if not value.second else "seconds")
    if isinstance(value, dt.time):
        return value.isoformat(timespec="minutes" if not value.second else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def check_answer_kind(declared: Any, outputs: int) -> list[str]:
    """A task's `answer_kind`, one kind per expected output; InvalidTask (422) if malformed."""
    kinds = [declared] * outputs if isinstance(declared, str) else declared
    if (
        not isinstance(kinds, list)
        or len(kinds) != outputs
        or not all(k in ANSWER_KINDS for k in kinds)
    ):
        raise InvalidTask(
            f"answer_kind must be one of {', '.join(ANSWER_KINDS)}, or a list of them, one per "
            "expected output"
        )
    return list(kinds)
