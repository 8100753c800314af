"""The protocol layer's JSON (app/jsonio.py) gives the stdlib's answers: the same values
parsed, the same errors refused, the same JSON sent; orjson only makes it faster."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.responses import JSONResponse

from app import jsonio
from app.registry import environment_names, load_environment
from app.server.api import json_body

REPO = Path(__file__).resolve().parents[2]


def _stdlib_loads(raw: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    return json.loads(raw, parse_constant=refuse)


def _fixture_rows() -> list[bytes]:
    """Every shipped task row, as a client would send it (seed bodies, the verify echo)."""
    rows: list[bytes] = []
    for name in environment_names():
        path = load_environment(name).tasks_path
        rows += [line.encode() for line in path.read_text().splitlines() if line.strip()]
    return rows


EDGE_BODIES = [
    b'{"a": 1}',
    b"[]",
    b"0",
    b"-0",
    b"-0.0",
    b"1.5e-7",
    b"1E+2",
    b'"\\u00e9\\ud83d\\ude00"',  # an escaped surrogate pair
    '{"k": "é 😀 \\n \\t \\" \\\\ \\/"}'.encode(),
    b'{"a": 1, "a": 2}',  # duplicate keys: the last wins in both
    b"9223372036854775807",  # 2**63 - 1: 19 digits, exact in both
    b"18446744073709551615",  # 2**64 - 1
    b'{"id": 123456789012345678901234567890}',  # orjson would make this a float
    b'{"id": -123456789012345678901234567890}',
    b'{"s": "1234567890123456789012345"}',  # a long digit run inside a string
    b'{"f": 12345678901234567890.5}',
    b"1e400",  # json: inf (refused later, where the value is used)
    b'\xef\xbb\xbf{"a": 1}',  # a UTF-8 byte-order mark
    '{"a": "x"}'.encode("utf-16"),  # json detects UTF-16
    b'  \n\t{"a": [1, 2.5, true, false, null]}\r\n ',
]

REFUSED_BODIES = [
    b'{"x": NaN}',
    b'{"x": Infinity}',
    b"-Infinity",
    b"{",
    b'{"a": 1,}',
    b"[1 2]",
    b"\xff\xfe\xfd",
    b"",
    b"[" * 5000 + b"]" * 5000,
]


@pytest.mark.parametrize("raw", EDGE_BODIES + _fixture_rows())
def test_loads_gives_the_stdlib_value(raw: bytes) -> None:
    expected = _stdlib_loads(raw)
    got = jsonio.loads(raw)
    assert got == expected or (_is_nan(got) and _is_nan(expected))
    assert _types(got) == _types(expected)  # an int stays an int, a float a float


def test_a_long_integer_is_echoed_exactly() -> None:
    raw = b'{"response": {"id": 123456789012345678901234567890, "n": -99999999999999999999}}'
    value = jsonio.loads(raw)
    assert value["response"]["id"] == 123456789012345678901234567890
    assert jsonio.dumps(value) == raw.replace(b": ", b":").replace(b", ", b",")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"response": {"x": "\\ud800"}}',
        b'["ok", "\\udfff tail"]',
        b'{"\\udc00": 1}',  # in a key
        b'"\xed\xa0\x80"',  # encoded as UTF-8 (json decodes bytes with surrogatepass)
    ],
)
def test_an_unpaired_surrogate_is_refused_with_a_message(raw: bytes) -> None:
    """json accepts it; no UTF-8 answer, step-log row or database can hold it."""
    with pytest.raises(ValueError, match="unpaired UTF-16 surrogate"):
        jsonio.loads(raw)


@pytest.mark.parametrize("raw", REFUSED_BODIES)
def test_loads_refuses_what_the_stdlib_refuses_with_its_message(raw: bytes) -> None:
    with pytest.raises((ValueError, RecursionError)) as ours:
        jsonio.loads(raw)
    with pytest.raises((ValueError, RecursionError)) as theirs:
        _stdlib_loads(raw)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


VALUES: list[Any] = [
    {"reward": 1.0, "evidence": [{"table": "orders", "diff": {"status": ["a", "b"]}}]},
    {"output": [1, 2.5, -3, None, True, "é 😀 \u2028 \x00 <tag>"]},
    {"nested": {"a": {"b": {"c": []}}}},
    {1: "int key", "s": "str key"},  # orjson refuses non-str keys: json renders them
    {"big": 2**70, "neg": -(2**65)},  # beyond 64 bits: json
    {"tuple": (1, 2)},
    [],
    "text",
]


@pytest.mark.parametrize("value", VALUES + [_stdlib_loads(r) for r in _fixture_rows()[:40]])
def test_dumps_sends_the_json_starlette_sends(value: Any) -> None:
    ours = jsonio.dumps(value)
    starlette = JSONResponse(value).body
    assert json.loads(ours) == json.loads(starlette)
    if "e-0" not in starlette.decode():  # orjson spells 1.5e-07 as 1.5e-7: same number
        assert ours == starlette


def test_dumps_of_a_float_exponent_is_the_same_number() -> None:
    for x in (1.5e-7, 1e-5, 2.5e-300, 1e16, 1e22, 0.1 + 0.2, -0.0, 5e-324):
        assert json.loads(jsonio.dumps({"x": x}))["x"] == x


async def test_the_protocol_parses_bodies_with_jsonio() -> None:
    """json_body (every protocol route) goes through jsonio: a long integer survives."""

    class FakeRequest:
        headers = {"content-type": "application/json"}

        async def body(self) -> bytes:
            return b'{"id": 123456789012345678901234567890}'

    assert await json_body(FakeRequest()) == {"id": 123456789012345678901234567890}  # type: ignore[arg-type]


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


class _Tag(str):
    pass


STORED: list[Any] = [
    {"when": datetime(2026, 1, 2, 3, 4, 5), "day": date(2026, 1, 2), "price": Decimal("1.50")},
    {"ordered": OrderedDict(a=1), "tag": _Tag("x"), "n": 2**70, 1: "int key"},
    {"nan": "NaN as stored text stays text", "big": 123456789012345678901234567890},
    {"set": {1}, "bytes": b"\x00", "nested": [{"a": [1.5e-7, -0.0, None, True]}]},
]


@pytest.mark.parametrize("value", STORED + [_stdlib_loads(r) for r in _fixture_rows()[:20]])
def test_stored_json_reads_back_as_the_stdlib_wrote_it(value: Any) -> None:
    """The control database's task and verify columns: dumps_text/loads_text give what
    json.dumps(default=str)/json.loads gave, so rows written before and after read the same."""
    ours, theirs = jsonio.dumps_text(value), json.dumps(value, default=str)
    assert jsonio.loads_text(ours) == json.loads(theirs)
    assert jsonio.loads_text(theirs) == json.loads(theirs)


def test_stored_nan_written_by_the_stdlib_still_reads() -> None:
    text = json.dumps({"x": float("nan"), "y": float("inf")})
    value = jsonio.loads_text(text)
    assert math.isnan(value["x"]) and value["y"] == float("inf")
