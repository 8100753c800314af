"""cap_evidence skips encoding evidence to JSON when an upper bound of its size is under the cap:
the result must be exactly what measuring every time gives (app/verify/evidence.py)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from app.verify.evidence import cap_evidence


def _measured(value: Any, max_bytes: int, max_chars: int) -> Any:
    """The cap as it was: every tier's result encoded to JSON to measure it."""

    def cut(v: Any, chars: int, items: int | None) -> Any:
        if isinstance(v, str):
            return v if len(v) <= chars else f"{v[:chars]}... [{len(v) - chars} more]"
        if isinstance(v, bytes | bytearray):
            return f"<{len(v)} bytes>"
        if isinstance(v, dict):
            return {cut(str(k), chars, items): cut(x, chars, items) for k, x in v.items()}
        if isinstance(v, list | tuple):
            kept = [cut(x, chars, items) for x in v[:items]]
            if items is not None and len(v) > items:
                kept.append(f"... [{len(v) - items} more]")
            return kept
        return v

    size = 0
    for chars, items in ((max_chars, None), (max(20, max_chars // 5), 5), (20, 1)):
        capped = cut(value, chars, items)
        size = len(json.dumps(capped, default=str))
        if size <= max_bytes:
            return capped
    return {"truncated": True, "note": f"evidence of {size:,} bytes is over the {max_bytes:,} cap"}


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["str", "num", "none", "bytes", "list", "dict"] if depth < 4 else ["str"])
    if kind == "str":
        alphabet = 'ab "\\\n\u00e9\u4e2d\U0001f600\x00'
        return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 3, 40, 700])))
    if kind == "num":
        return rng.choice([0, -7, 2**70, 1.5e308, float("nan"), True])
    if kind == "none":
        return None
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(50)))
    n = rng.choice([0, 2, 9, 30])
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(n)]
    return {f"k{i}": _random_value(rng, depth + 1) for i in range(n)}


@pytest.mark.parametrize(
    "max_bytes", [64, 2_000, pytest.param(40_000, marks=pytest.mark.slow), 256 * 1024]
)
def test_the_bounded_cap_equals_measuring_every_time(max_bytes: int) -> None:
    rng = random.Random(max_bytes)
    for _ in range(120):
        value = _random_value(rng)
        capped = cap_evidence(value, max_bytes=max_bytes, max_chars=500)
        # Compared as JSON: the same text, and NaN compares equal to itself there.
        expected = json.dumps(_measured(value, max_bytes, 500), default=str)
        assert json.dumps(capped, default=str) == expected
        if not (isinstance(capped, dict) and capped.get("truncated") is True):
            assert len(json.dumps(capped, default=str)) <= max_bytes
