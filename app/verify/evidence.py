"""A size cap on verify evidence: what /verify returns and what control.sqlite stores.

Evidence quotes rows the agent wrote, and the agent chooses their size. Long strings are cut to
`max_chars` (with how much was cut); if the JSON is still over `max_bytes`, lists are shortened,
and as a last resort the evidence is replaced by a note saying how large it was. Scoring never
reads the capped copy: it is only what is shown and stored (docs/durability.md).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

MAX_EVIDENCE_BYTES = 256 * 1024
MAX_EVIDENCE_CHARS = 500

# Capped parts known to be what capping them again gives, by id: (the part, its size bound).
Known = MutableMapping[int, tuple[Any, int]]


def cap_evidence(
    value: Any,
    max_bytes: int = MAX_EVIDENCE_BYTES,
    max_chars: int = MAX_EVIDENCE_CHARS,
    *,
    known: Known | None = None,
) -> Any:
    """`value` (JSON-able) at most `max_bytes` as JSON; never raises.

    `known`: parts of `value` an earlier `cap_evidence(..., known=...)` capped (under the
    default limits) with nothing cut, and that nobody changed since: capping them again gives
    them back, so they are not walked again. Filled here with such parts of the result when
    `value` is a dict: the values of its items (never the dict itself, which callers extend).
    """
    if known is not None and isinstance(value, dict):
        found = _cap_items(value, max_bytes, max_chars, known)
        if found is not None:
            return found
    size = 0
    for chars, items in ((max_chars, None), (max(20, max_chars // 5), 5), (20, 1)):
        bound = [0, 0]
        capped = _cut(value, chars, items, bound, known if items is None else None)
        if bound[0] <= max_bytes:  # the usual case: no JSON encoding just to measure it
            return capped
        size = len(json.dumps(capped, default=str))
        if size <= max_bytes:
            return capped
    return {"truncated": True, "note": f"evidence of {size:,} bytes is over the {max_bytes:,} cap"}


def _cap_items(value: dict, max_bytes: int, max_chars: int, known: Known) -> Any | None:
    """`cap_evidence(value)` when its first pass fits (None: the caller caps it), walked item
    by item to tell which items' values came out unchanged by a cut: those go into `known`."""
    if max_bytes != MAX_EVIDENCE_BYTES or max_chars != MAX_EVIDENCE_CHARS:
        return None
    bound = [2, 0]
    out, fixed = {}, []
    for k, v in value.items():
        key = _cut(str(k), max_chars, None, bound, known)
        before, cuts = bound[0], bound[1]
        out[key] = _cut(v, max_chars, None, bound, known)
        if bound[1] == cuts and isinstance(out[key], dict | list):
            fixed.append((out[key], bound[0] - before))
    if bound[0] > max_bytes:
        return None
    for part, size in fixed:
        known[id(part)] = (part, size)
    return out


def _cut(
    value: Any, chars: int, items: int | None, bound: list[int], known: Known | None = None
) -> Any:
    """`value` with long strings cut to `chars` and lists to `items`; adds to `bound[0]` an upper
    bound of the result's JSON size (a code point takes at most 12 bytes: an escaped surrogate
    pair), and to `bound[1]` how many values were cut or replaced. A part of `known` is given
    back as it is (capped already, with nothing cut: capping it again changes nothing)."""
    if isinstance(value, str):
        if len(value) <= chars:
            bound[0] += 12 * len(value) + 3
            return value
        cut = f"{value[:chars]}... [{len(value) - chars} more]"
        bound[0] += 12 * len(cut) + 3
        bound[1] += 1
        return cut
    if isinstance(value, bytes | bytearray):
        shown = f"<{len(value)} bytes>"
        bound[0] += len(shown) + 3
        bound[1] += 1
        return shown
    if known is not None and isinstance(value, dict | list):
        hit = known.get(id(value))
        if hit is not None and hit[0] is value:
            bound[0] += hit[1]
            return value
    if isinstance(value, dict):
        bound[0] += 2
        return {
            _cut(str(k), chars, items, bound, known): _cut(v, chars, items, bound, known)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        bound[0] += 2
        kept = [_cut(v, chars, items, bound, known) for v in value[:items]]
        if items is not None and len(value) > items:
            more = f"... [{len(value) - items} more]"
            bound[0] += len(more) + 3
            kept.append(more)
        return kept
    bound[0] += 12 * len(str(value)) + 3  # numbers, booleans, None; anything else as str()
    return value
