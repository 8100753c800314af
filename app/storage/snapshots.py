"""Names both backends share: a task's seeded snapshot and the session id format.

Snapshot images are SQLite on both backends (gold replays and seed dumps run on them), so the
`Snapshot` record lives here, apart from either backend's package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# Session ids are 32 lowercase hex characters; anything else never becomes a path or a schema.
SESSION_ID_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Snapshot:
    key: str
    image: bytes
    now: datetime
    # The image, WAL-marked, as a file sessions are copied from (Store.seed_file); set on the
    # first seed of this snapshot in this process.
    seed_file: Path | None = None
