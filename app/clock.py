"""The one clock the control database's timestamps come from."""

from __future__ import annotations

from datetime import UTC, datetime


def naive_utcnow() -> datetime:
    """Now in UTC without tzinfo: the control database stores naive UTC timestamps."""
    return datetime.now(UTC).replace(tzinfo=None)


def created_now() -> datetime:
    """A session's creation stamp: naive UTC to the second, so the cookie's `issued` (below)
    and the control row agree exactly."""
    return naive_utcnow().replace(microsecond=0)


def issued_at(created_at: datetime) -> int:
    """The Unix time a session's cookie carries for its (naive UTC) creation stamp."""
    return int(created_at.replace(tzinfo=UTC).timestamp())
