"""Typed answer values: parse a raw answer as exactly one value of a kind, compare by value.

Minimal implementation of the values contract (docs/verification.md), pure functions, no DB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation

KINDS: tuple[str, ...] = (
    "amount",
    "number",
    "id",
    "date",
    "time",
    "datetime",
    "email",
    "name",
    "text",
    "boolean",
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ID = re.compile(r"#?[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_AMOUNT = re.compile(r"-?\$?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d{1,2})?")
_BOOL = {"yes": True, "true": True, "no": False, "false": False}


class NotOneValue(ValueError):
    """The raw answer is not exactly one value of the kind; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Token:
    kind: str
    value: object
    text: str


def _words(text: str) -> str:
    return " ".join(text.split()).casefold()


def parse_value(kind: str, raw: object) -> object:
    """The whole `raw` as one value of `kind`, normalised; NotOneValue otherwise."""
    if kind not in KINDS:
        raise NotOneValue(f"unknown kind {kind!r}")
    if isinstance(raw, bool):
        if kind == "boolean":
            return raw
        raise NotOneValue(f"a boolean is not one {kind}")
    if isinstance(raw, int | float) and kind in ("amount", "number"):
        value = Decimal(str(raw))
        return value.quantize(Decimal("0.01")) if kind == "amount" else value.normalize()
    if not isinstance(raw, str):
        raise NotOneValue(f"not one {kind}: {raw!r}")
    text = raw.strip()
    try:
        if kind == "amount":
            m = _AMOUNT.fullmatch(text)
            if not m:
                raise NotOneValue(f"not one amount: {text[:60]!r}")
            return Decimal(text.replace("$", "").replace(",", "").replace(" ", "")).quantize(
                Decimal("0.01")
            )
        if kind == "number":
            if not _NUMBER.fullmatch(text.replace(",", "")):
                raise NotOneValue(f"not one number: {text[:60]!r}")
            return Decimal(text.replace(",", "")).normalize()
        if kind == "id":
            if not _ID.fullmatch(text):
                raise NotOneValue(f"not one id: {text[:60]!r}")
            return text.lstrip("#").casefold()
        if kind == "date":
            return date.fromisoformat(text)
        if kind == "time":
            return time.fromisoformat(text)
        if kind == "datetime":
            return datetime.fromisoformat(text)
        if kind == "email":
            if not _EMAIL.fullmatch(text):
                raise NotOneValue(f"not one email: {text[:60]!r}")
            return text.casefold()
        if kind == "boolean":
            if text.casefold() not in _BOOL:
                raise NotOneValue(f"not yes or no: {text[:60]!r}")
            return _BOOL[text.casefold()]
    except (ValueError, InvalidOperation) as exc:
        if isinstance(exc, NotOneValue):
            raise
        raise NotOneValue(f"not one {kind}: {text[:60]!r}") from None
    if not text:
        raise NotOneValue(f"an empty {kind}")
    return _words(text)


def parse_answer(kind: str, raw: object, *, many: bool) -> object | frozenset[object]:
    """One value of `kind`, or with `many` a JSON list of them (a set)."""
    if not many:
        if isinstance(raw, list):
            raise NotOneValue(f"a list of {len(raw)} values, not one {kind}")
        return parse_value(kind, raw)
    if not isinstance(raw, list):
        raise NotOneValue(f"one value, not a list of {kind} values")
    return frozenset(parse_value(kind, item) for item in raw)


def answers_equal(kind: str, expected: object, submitted: object) -> bool:
    return expected == submitted


def describe(kind: str, value: object) -> str:
    if isinstance(value, frozenset):
        return "[" + ", ".join(sorted(describe(kind, v) for v in value)) + "]"
    return str(value)


def tokens(text: str) -> list[Token]:
    return []
