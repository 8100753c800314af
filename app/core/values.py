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
import json
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
    "expected_currency",
    "in_other_currency",
    "parse_answer",
    "parse_value",
    "tokens",
]

KINDS = ("amount", "number", "id", "date", "time", "datetime", "email", "name", "text", "boolean")
# What a task's `answer_kind` may name: the kinds, and refusal (a legacy keyword kind, read as
# text by app/verify/answers/text.py).
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
LIST_SEPARATORS = re.compile(r"\s*(?:[,;/|\n]|\band\b|\bor\b|&)\s*", re.I)
# A doubt mark makes an answer a question: `Yara Mansour?` is not a claim that it is her.
_DOUBT = re.compile(r"[?¿]")
# A list written as a list: every line led by a bullet (`-`, `*`, `•`, `+`) or a number (`1.`,
# `2)`); the markers are dropped before the items are read.
_MARKER = re.compile(r"^\s*(?:[-*•+]|[0-9]{1,3}[.)])\s+")


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


def parse_value(kind: str, raw: object, *, currency: str | None = None) -> Any:
    """The one value of `kind` that the whole `raw` (a JSON scalar) spells; else NotOneValue.

    Values: amount/number -> Decimal, date -> date, time -> time, datetime -> datetime,
    boolean -> bool, id/email/name/text -> normalised str. With `currency`, an amount whose
    spelling names another currency (`€72.99` for USD) is NotOneValue: another amount."""
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
            value = g.read_value(kind, text)
            named = g.read_currency(text) if kind == "amount" else None
        except g.Unreadable as e:
            raise NotOneValue(str(e)) from None
        if currency and named and named != currency:
            raise NotOneValue(f"'{text}' is an amount in {named}; the answer is in {currency}")
        return value
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
    if kind in ("time", "datetime") and _OTHER_ZONE.search(text):
        return f"'{text}' is not {_a(kind)} in {g.ZONE}, the environment's clock"
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


_OTHER_ZONE = re.compile(
    r"(?:[0-9]\s?[+-][0-9]{2}:?[0-9]{2}|\b(?:UTC|GMT)\s?[+-]\s?[0-9]{1,2}(?::?[0-9]{2})?"
    r"|\b[A-Z]{1,4}[SD]?T)\)?\s*$"
)


def _token_is(kind: str, t: Token) -> bool:
    if kind == "amount":
        return t.kind in ("amount", "number")
    if kind == "id":
        return t.kind in ("id", "number")
    return t.kind == kind


def _count(n: int) -> str:
    return {2: "two", 3: "three"}.get(n, str(n))


def parse_answer(kind: str, raw: object, *, many: bool, currency: str | None = None) -> Any:
    """One value (`many=False`) or a frozenset of values (`many=True`: a JSON list, or a
    string listing values; see the module docstring)."""
    if not many:
        return parse_value(kind, raw, currency=currency)
    if isinstance(raw, str):
        raw = _split(kind, raw)
    if not isinstance(raw, list | tuple):
        raise NotOneValue(f"a list of {_PLURAL.get(kind, kind + 's')} is expected")
    values = set()
    for item in raw:
        if isinstance(item, list | tuple | dict):
            raise NotOneValue("a list item is itself a list or an object")
        try:
            values.add(parse_value(kind, item, currency=currency))
        except NotOneValue as e:
            raise NotOneValue(f"list item {item!r}: {e.reason}") from None
    return frozenset(values)


_TYPED = ("amount", "number", "date", "time", "datetime", "email")
_GAP = re.compile(r"\s*(?:[,;&|/]|\band\b)?\s*(?:\n\s*(?:[-*•]\s+)?)?", re.I)
# Between items of the other kinds: newlines, `;`, `,`, ` and `, `|`, ` / ` and ` & ` (an id
# never holds a slash, so ids split on a bare `/` too).
_ITEM_SEP = re.compile(r"\s*(?:\n|;|,|\||\band\b|\s/\s|\s&\s)\s*", re.I)
_ID_SEP = re.compile(r"\s*(?:\n|;|,|\||/|\band\b|\s&\s)\s*", re.I)


def _json_list(text: str) -> list[Any] | None:
    """A JSON array written inside the string (`'["E1", "E2"]'`), read the same way for every
    kind; None when the string is not one."""
    s = text.strip()
    if not (s.startswith("[") and s.endswith("]")):
        return None
    try:
        items = json.loads(s)
    except ValueError:
        return None
    return items if isinstance(items, list) else None


def _unmark(text: str) -> str:
    """A markdown or numbered list's lines without their markers (only when every line of two
    or more has one: a lone `- 5` stays a negative number)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not all(_MARKER.match(line) for line in lines):
        return text
    return "\n".join(_MARKER.sub("", line, count=1) for line in lines)


def _split(kind: str, text: str) -> list[Any]:
    """A string listing values: a JSON array, or items on lines (markers dropped) or between
    separators; typed kinds by the tokenizer (only separators between them), other kinds split
    on the separators above. 'or' never separates items."""
    inner = _json_list(text)
    if inner is not None:
        return inner
    if re.search(r"\bor\b", text, re.I):
        raise NotOneValue("'or' does not separate list items: it offers alternatives")
    text = _unmark(text)
    if kind not in _TYPED:
        items = (_ID_SEP if kind == "id" else _ITEM_SEP).split(text.strip())
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
    doubt = _doubtful(submitted)
    if doubt is not None and not _doubtful(expected):
        return Verdict(False, f"'{doubt}' is a question, not an answer: a doubt mark is a mismatch")
    try:
        got = parse_answer(kind, submitted, many=many, currency=expected_currency(kind, expected))
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


def _doubtful(raw: object) -> str | None:
    """The submitted string (or list item) that carries a doubt mark, if any."""
    items = raw if isinstance(raw, list | tuple) else [raw]
    return next((str(i) for i in items if isinstance(i, str) and _DOUBT.search(i)), None)


def in_other_currency(text: str, currency: str) -> bool:
    """Whether an amount's spelling names a currency other than `currency` (or two)."""
    try:
        named = g.read_currency(text)
    except g.Unreadable:
        return True
    return named is not None and named != currency


def expected_currency(kind: str, expected: object) -> str | None:
    """The currency an expected amount is in: the one its spelling names, else the
    environment's (g.DEFAULT_CURRENCY). None for other kinds."""
    if kind != "amount":
        return None
    items = expected if isinstance(expected, list) else [expected]
    for item in items:
        if isinstance(item, str):
            try:
                named = g.read_currency(item)
            except g.Unreadable:
                named = None
            if named:
                return named
    return g.DEFAULT_CURRENCY


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
