"""A size cap on verify evidence: what /verify returns and what control.sqlite stores.

Evidence quotes rows the agent wrote, and the agent chooses their size. Long strings are cut to
`max_chars` (with how much was cut); if the JSON is still over `max_bytes`, lists are shortened,
and as a last resort the evidence is replaced by a note saying how large it was. Scoring never
reads the capped copy: it is only what is shown and stored (docs/durability.md).
"""

from __future__ import annotations

import json
from typing import Any

MAX_EVIDENCE_BYTES = 256 * 1024
MAX_EVIDENCE_CHARS = 500


def cap_evidence(
    value: Any, max_bytes: int = MAX_EVIDENCE_BYTES, max_chars: int = MAX_EVIDENCE_CHARS
) -> Any:
    """`value` (JSON-able) at most `max_bytes` as JSON; never raises."""
    size = 0
    for chars, items in ((max_chars, None), (max(20, max_chars // 5), 5), (20, 1)):
        bound = [0]
        capped = _cut(value, chars, items, bound)
        if bound[0] <= max_bytes:  # the usual case: no JSON encoding just to measure it
            return capped
        size = len(json.dumps(capped, default=str))
        if size <= max_bytes:
            return capped
    return {"truncated": True, "note": f"evidence of {size:,} bytes is over the {max_bytes:,} cap"}


def _cut(value: Any, chars: int, items: int | None, bound: list[int]) -> Any:
    """`value` with long strings cut to `chars` and lists to `items`; adds to `bound[0]` an upper
    bound of the result's JSON size (a code point takes at most 12 bytes: an escaped surrogate
    pair)."""
    if isinstance(value, str):
        cut = value if len(value) <= chars else f"{value[:chars]}... [{len(value) - chars} more]"
        bound[0] += 12 * len(cut) + 3
        return cut
    if isinstance(value, bytes | bytearray):
        shown = f"<{len(value)} bytes>"
        bound[0] += len(shown) + 3
        return shown
    if isinstance(value, dict):
        bound[0] += 2
        return {
            _cut(str(k), chars, items, bound): _cut(v, chars, items, bound)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        bound[0] += 2
        kept = [_cut(v, chars, items, bound) for v in value[:items]]
        if items is not None and len(value) > items:
            more = f"... [{len(value) - items} more]"
            bound[0] += len(more) + 3
            kept.append(more)
        return kept
    bound[0] += 12 * len(str(value)) + 3  # numbers, booleans, None; anything else as str()
    return value
