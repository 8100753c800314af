"""The one clock the control database's timestamps come from."""

from __future__ import annotations

from datetime import UTC, datetime


def naive_utcnow() -> datetime:
    """Now in UTC without tzinfo: the control database stores naive UTC timestamps."""
    return datetime.now(UTC).replace(tzinfo=None)
