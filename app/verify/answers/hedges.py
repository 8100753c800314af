"""Hedged submissions: the expected answer plus a rival, as a policy would try to win with.

`tasks check` submits each of them in place of the gold's answer and requires reward 0: an answer
that names two values is no answer. A rival is another value of the same kind, near the expected
one (the next amount, the next day, another id of the same shape).
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

from app.core import values


def rival(kind: str, value: Any) -> Any:
    """Another value of `kind` than `value` (a raw JSON scalar), spelled plainly."""
    try:
        parsed = values.parse_value(kind, value)
    except values.NotOneValue:
        parsed = None
    if kind in ("amount", "number") and isinstance(parsed, Decimal):
        bumped = parsed + 1
        return format(bumped.quantize(Decimal("0.01")), "f") if kind == "amount" else str(bumped)
    if kind == "datetime" and isinstance(parsed, dt.datetime):
        return (parsed + dt.timedelta(days=1)).isoformat(sep=" ", timespec="minutes")
    if kind == "date" and isinstance(parsed, dt.date):
        return (parsed + dt.timedelta(days=1)).isoformat()
    if kind == "time" and isinstance(parsed, dt.time):
        return parsed.replace(hour=(parsed.hour + 1) % 24).isoformat(timespec="minutes")
    if kind == "boolean":
        return "no" if parsed else "yes"
    text = str(value)
    if kind == "id":
        digits = re.search(r"(\d+)(?!.*\d)", text)
        if digits:
            n = digits.group(1)
            bumped_id = str(int(n) + 1).zfill(len(n))
            return text[: digits.start()] + bumped_id + text[digits.end() :]
        return text + "X"
    if kind == "email":
        return "other." + text
    if kind == "name":
        return "Alex Rival"
    return "not " + text


def hedges(kind: str, expected: Any) -> list[Any]:
    """Submissions naming the expected answer and a rival: as a list, and as "A or B"."""
    items = expected if isinstance(expected, list) else [expected]
    other = rival(kind, items[0])
    for _ in range(len(items)):  # a rival already in a list answer would be no rival
        if str(other) not in {str(i) for i in items}:
            break
        other = rival(kind, other)
    return [[*items, other], " or ".join(str(i) for i in [*items, other])]
