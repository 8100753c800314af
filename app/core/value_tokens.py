"""The one tokenizer of the text answer path: typed values found in free text as WHOLE tokens.

`tokens(text)` scans once, left to right, taking at each start the first kind that matches as a
whole token: email, datetime, date, monthday (`May 7`), time, amount, number (and ordinals), id,
word. A whole token is bounded by non-word characters; a joiner (`. - @ + '`) followed by a word
character glues (`E90110-x` is one id), a possessive `'s` does not. Anything else with word
characters is ONE `opaque` token (`q233.00q`, other scripts' digits, `2026-02-30`): never the
expected value, and a rival of the digit-bearing kinds when it carries digits
(app/verify/answers/text.py). Values are read by app/core/value_grammar.py, as `parse_value` reads
them. Invisible format characters are removed first (they glue, never separate); positions
index the text without them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from app.core import value_grammar as g

# A cheap test before the date patterns' month alternations: a year, or a day then a word, or
# a word (a weekday or month name) must start here.
_DAY_AHEAD = (
    r"(?=[0-9]{4}[-/]|[0-9]{1,2}/[0-9]{1,2}/[0-9]{4}"
    r"|[0-9]{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?[^\W\d_]{3}|[^\W\d_]{3})"
)
_SPECS: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(f"(?:{pattern}){g.END}", flags))
    for kind, pattern, flags in (
        ("email", g.EMAIL, 0),
        ("datetime", _DAY_AHEAD + g.DATETIME, re.I),
        ("date", _DAY_AHEAD + g.DATE, re.I),
        ("monthday", _DAY_AHEAD + f"(?:{g.MONTHDAY})", re.I),
        ("time", g.TIME, re.I),
        ("amount", g.AMOUNT, re.I),
        ("number", f"{g.ORDINAL}|{g.NUMBER}", re.I),
        ("id", g.ID, 0),
        ("word", g.WORD, 0),
    )
]
_OPAQUE = re.compile(r"[$€£¥₹#\-]?\w+(?:(?:[.'’\-@+]+|(?<=[0-9]):(?=[0-9]))\w+)*")
# Fast path: a plain word that cannot start a typed value (a month, weekday or currency code can).
_PLAIN_WORD = re.compile(f"(?:{g.WORD}){g.END}(?!\\$)")  # `US$5` is an amount
_VALUE_WORDS = frozenset([*g.MONTHS, *g.WEEKDAYS, *g.CURRENCY_CODES])
_POSSESSIVE = re.compile(r"['’]s(?!\w)")
_JOINERS = ".'’-@+"  # a slash separates: "SG160/SG150" names two ids
_STARTS = "$€£¥₹#-"


@dataclass(frozen=True)
class Token:
    """One whole token: its kind, its value (Decimal, date, time, datetime or casefolded str;
    an opaque token's value is its casefolded text with every digit read as 0-9), its span."""

    kind: str
    value: Any
    start: int
    end: int
    text: str


def _value(kind: str, text: str) -> Any:
    if kind in ("amount", "number") and re.fullmatch(g.ORDINAL, text, re.I):
        return g.read_decimal(text[:-2])
    return g.read_value(kind, text)


def ascii_digits(text: str) -> str:
    """`text` with every decimal digit of any script read as 0-9 (for opaque tokens only)."""
    return "".join(
        str(unicodedata.digit(c)) if c.isdigit() and unicodedata.digit(c, None) is not None else c
        for c in text
    )


def visible(text: str) -> str:
    """`text` without invisible format characters (zero-width space, joiners, BOM)."""
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _glued_left(text: str, pos: int) -> bool:
    if pos == 0:
        return False
    before = text[pos - 1]
    if before.isalnum() or before == "_":
        return True
    return before in _JOINERS and pos >= 2 and (text[pos - 2].isalnum() or text[pos - 2] == "_")


def tokens(text: str) -> list[Token]:
    """Every whole token of `text`, in order (see the module docstring)."""
    text = visible(text)
    out: list[Token] = []
    pos, n = 0, len(text)
    while pos < n:
        c = text[pos]
        if not (c.isalnum() or c == "_" or c in _STARTS):
            pos += 1
            continue
        token = None if _glued_left(text, pos) else _typed(text, pos)
        if token is None:
            m = _OPAQUE.match(text, pos)
            if m is None:  # a lone sign or symbol
                pos += 1
                continue
            raw = m.group(0)
            token = Token("opaque", ascii_digits(raw).casefold(), pos, m.end(), raw)
        out.append(token)
        pos = token.end
        possessive = _POSSESSIVE.match(text, pos)
        if possessive and token.kind != "opaque":
            pos = possessive.end()
    return out


def _typed(text: str, pos: int) -> Token | None:
    word = _PLAIN_WORD.match(text, pos)
    if word and word.group(0).casefold().rstrip(".") not in _VALUE_WORDS:
        return Token("word", word.group(0).casefold(), pos, word.end(), word.group(0))
    for kind, pattern in _SPECS:
        m = pattern.match(text, pos)
        if m is None:
            continue
        try:
            return Token(kind, _value(kind, m.group(0)), pos, m.end(), m.group(0))
        except g.Unreadable:
            return None  # the shape of a value that is none: opaque
    return None
