"""The runs page's query parameters, parsed once: every bad value is a 400 saying what to send.

Filters are bound as SQL parameters (app/explorer/queries.py); nothing here reaches a path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal
from urllib.parse import urlencode

from app.errors import BadRequest
from app.runtime.inspection import parse_since

SORTS = ("created", "reward", "task", "env", "status")
STATUSES = ("open", "verified", "closed")
MAX_LIMIT = 500
MAX_TEXT = 200  # task ids and failure text: the control column holds 200 characters
_ENV_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_AFTER_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?)~([0-9a-f]{32})$")
# The fields that choose the runs (not their order or page).
_FILTERS = (
    "env",
    "task",
    "status",
    "reward_min",
    "reward_max",
    "failure",
    "since",
    "until",
    "family",
    "difficulty",
)
_KNOWN = frozenset((*_FILTERS, "sort", "order", "limit", "offset", "after", "format"))


@dataclass(frozen=True)
class RunFilter:
    """What the runs page lists: filters, sort and the page (offset, or a keyset cursor)."""

    env: str | None = None
    task: str | None = None
    status: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    failure: str | None = None  # the failure reason starts with this text
    since: datetime | None = None
    until: datetime | None = None
    family: str | None = None
    difficulty: str | None = None
    sort: str = "created"
    order: Literal["asc", "desc"] = "desc"
    limit: int = 50
    offset: int = 0
    # Keyset cursor of the default sort (newest first): the last row shown, (created_at, id).
    after: tuple[datetime, str] | None = None

    @property
    def keyset(self) -> bool:
        """Pages follow a cursor (stays fast at any depth) on the default sort."""
        return self.sort == "created" and self.order == "desc"

    def params(self, **changes: object) -> str:
        """This filter as a query string, with `changes` applied (links to other pages)."""
        f = replace(self, **changes)  # type: ignore[arg-type]  # field names checked by replace
        out: dict[str, str] = {}
        for name in ("env", "task", "status", "failure", "family", "difficulty"):
            value = getattr(f, name)
            if value:
                out[name] = str(value)
        for name in ("reward_min", "reward_max"):
            value = getattr(f, name)
            if value is not None:
                out[name] = f"{value:g}"
        for name in ("since", "until"):
            value = getattr(f, name)
            if value is not None:
                out[name] = value.isoformat()
        if f.sort != "created":
            out["sort"] = f.sort
        if f.order != "desc":
            out["order"] = f.order
        if f.limit != 50:
            out["limit"] = str(f.limit)
        if f.offset:
            out["offset"] = str(f.offset)
        if f.after is not None:
            out["after"] = f"{f.after[0].isoformat()}~{f.after[1]}"
        return urlencode(out)

    def summary_key(self) -> tuple[object, ...]:
        """The fields that choose the runs (not their order or page)."""
        return tuple(getattr(self, n) for n in _FILTERS)

    def active(self) -> bool:
        return any(getattr(self, n) not in (None, "") for n in _FILTERS)


def _text(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    if len(value) > MAX_TEXT or any(ord(ch) < 32 for ch in value):
        raise BadRequest(f"{name}: at most {MAX_TEXT} printable characters")
    return value


def _float(params: Mapping[str, str], name: str) -> float | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name}={raw[:40]!r} is not a number; use e.g. 0.5") from None
    if not math.isfinite(value):
        raise BadRequest(f"{name} must be a finite number")
    return value


def _int(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or len(raw) > 12 or not low <= int(raw) <= high:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def _time(params: Mapping[str, str], name: str) -> datetime | None:
    raw = _text(params, name)
    if raw is None:
        return None
    try:
        return parse_since(raw)
    except OverflowError:
        raise BadRequest(f"{name}: {raw[:40]!r} is out of range") from None


def parse_filter(params: Mapping[str, str]) -> RunFilter:
    """The runs page's filter from its query parameters; BadRequest on any bad value."""
    unknown = sorted(set(params) - _KNOWN)
    if unknown:
        known = ", ".join(sorted(_KNOWN))
        raise BadRequest(f"unknown parameter {unknown[0][:40]!r}; known: {known}")
    env = _text(params, "env")
    if env is not None and not _ENV_RE.fullmatch(env):
        raise BadRequest(f"env {env[:40]!r} is not an environment name")
    status = _text(params, "status")
    if status is not None and status not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(STATUSES)}")
    sort = params.get("sort", "created") or "created"
    if sort not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}")
    order = params.get("order", "desc") or "desc"
    if order not in ("asc", "desc"):
        raise BadRequest("order must be asc or desc")
    reward_min, reward_max = _float(params, "reward_min"), _float(params, "reward_max")
    if reward_min is not None and reward_max is not None and reward_min > reward_max:
        raise BadRequest(f"reward_min {reward_min:g} is above reward_max {reward_max:g}")
    after = None
    raw_after = params.get("after", "")
    if raw_after:
        match = _AFTER_RE.fullmatch(raw_after)
        if not match:
            raise BadRequest("after must be a cursor from a 'next page' link")
        try:
            after = (datetime.fromisoformat(match.group(1)), match.group(2))
        except ValueError:
            raise BadRequest("after must be a cursor from a 'next page' link") from None
    f = RunFilter(
        env=env,
        task=_text(params, "task"),
        status=status,
        reward_min=reward_min,
        reward_max=reward_max,
        failure=_text(params, "failure"),
        since=_time(params, "since"),
        until=_time(params, "until"),
        family=_text(params, "family"),
        difficulty=_text(params, "difficulty"),
        sort=sort,
        order=order,  # type: ignore[arg-type]  # checked just above
        limit=_int(params, "limit", 50, 1, MAX_LIMIT),
        # SQLite's OFFSET is a 64-bit integer; a page past every session is simply empty.
        offset=_int(params, "offset", 0, 0, 10**9),
        after=after,
    )
    if f.after is not None and not f.keyset:
        raise BadRequest("after pages the default sort only; use offset with other sorts")
    return f
