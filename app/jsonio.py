"""JSON in and out (request bodies, answers, the control database's task and verify columns):
orjson where it gives the stdlib's answer, else json.

Invariant: every body parses and every answer encodes as the stdlib would
(tests/project/test_jsonio.py), except text with an unpaired surrogate, refused. Cases and
figures: docs/storage.md#json-in-and-out.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# orjson turns integers of 20+ digits into floats without a word; 19 digits may pass 2**63.
# Found by mapping every digit to "0" and looking for 19 of them: 13 us on an 18 KB body,
# where the regex \d{19} took 160 us.
_DIGITS_TO_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x2E for byte in range(256))
_LONG_DIGIT_RUN = b"0" * 19


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity, which JSON does not (and an echo could not send).
    raise ValueError(f"{name} is not a JSON number")


def loads(raw: bytes) -> Any:
    """The JSON value of `raw`. ValueError (json's own message) or RecursionError when it is
    not valid JSON; NaN and Infinity are refused."""
    if _LONG_DIGIT_RUN not in raw.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # json says what is wrong, in the words clients already get
    value = json.loads(raw, parse_constant=_no_constant)
    _refuse_unpaired_surrogates(value)
    return value


def _refuse_unpaired_surrogates(value: Any) -> None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        message = f"text holds an unpaired UTF-16 surrogate ({bad}); send valid Unicode"
        raise ValueError(message) from None
    except ValueError:  # 1e400 reads as inf, which json.dumps refuses: not this check's job
        pass


def dumps(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON, as Starlette's JSONResponse renders it."""
    try:
        return orjson.dumps(value)
    except TypeError:  # a non-str key, an integer beyond 64 bits: json handles both
        return json.dumps(
            value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
        ).encode("utf-8")


# Dates, times and dataclasses go to `default` as json would send them: orjson's own renderings
# differ (2026-01-01T00:00:00 where str() gives 2026-01-01 00:00:00). Subclasses of str, int,
# dict and list stay what they are, as in json.
_AS_JSON_WOULD = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps_text(value: Any) -> str:
    """`value` as JSON text for storage, anything JSON has no type for as its str() (what
    `json.dumps(value, default=str)` stored before; loads() reads both back the same)."""
    try:
        return orjson.dumps(value, default=str, option=_AS_JSON_WOULD).decode()
    except TypeError:  # a non-str key, an integer beyond 64 bits
        return json.dumps(value, default=str)


def dumps_canonical_text(value: Any) -> str:
    """`value` as `dumps_text` stores it, keys sorted at every level: one text per value, so
    stored rows can be addressed by its digest (the control database's task rows)."""
    try:
        return orjson.dumps(
            value, default=str, option=_AS_JSON_WOULD | orjson.OPT_SORT_KEYS
        ).decode()
    except TypeError:  # a non-str key, an integer beyond 64 bits
        try:
            return json.dumps(value, default=str, sort_keys=True)
        except TypeError:  # keys of mixed types cannot be sorted: their given order
            return json.dumps(value, default=str)


def loads_text(text: str) -> Any:
    """Stored JSON text read back as json.loads reads it (NaN included, as older rows may hold
    it; no request checks: this is our own data)."""
    raw = text.encode()
    if _LONG_DIGIT_RUN not in raw.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
