"""Names both backends share: a task's seeded snapshot and the session id format.

Snapshot images are SQLite on both backends (gold replays and seed dumps run on them), so the
`Snapshot` record lives here, apart from either backend's package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from app.errors import SessionNotFound

# Session ids are 32 lowercase hex characters; anything else never becomes a path or a schema.
SESSION_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def check_session_id(session_id: str) -> str:
    """Session ids are 32 lowercase hex characters; anything else never becomes a path."""
    if not SESSION_ID_RE.fullmatch(session_id):
        raise SessionNotFound(f"{session_id!r} is not a session id (32 hex characters)")
    return session_id


@dataclass
class Snapshot:
    key: str
    image: bytes
    now: datetime
