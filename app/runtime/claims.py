"""Rules of a typed seed that meets an id someone already holds (NeMo Gym main's contract).

- A re-seed of an open id answers the existing session (and its cookie) only when it repeats the
  first seed's episode and task data: that is NeMo Gym's retry after a lost seed reply, whose
  body is the same bytes. Why that is safe to hand a cookie: the full task row (ground truth
  included) is the trainer's data, never in the policy's context, and the id and episode alone
  (which do appear in logs and trajectories) are not enough. Anything else is 409.
- A tombstone (a close of an id never seeded) keeps a racing seed of that id out, as Gym asks.
  It binds only the episode that closed it: a seed under another episode replaces it, so a
  stranger's close cannot squat an id forever. A tombstone no episode made (a legacy close by
  id) lapses after `tombstone_ttl_seconds`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from app.storage.control import ResourcesClaim


def _canonical(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def same_task_data(stored: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """The task row stored at seed and the one a re-seed carries, compared as JSON values."""
    return _canonical(stored) == _canonical(sent)


def tombstone_lapsed(held: ResourcesClaim, episode: str | None, ttl_seconds: int) -> bool:
    """A tombstone (`held`: closed, no session) that a seed by `episode` may replace."""
    if held.session_id is not None:
        return False
    if held.episode is not None:
        return episode is not None and episode != held.episode
    age = time.time() - held.updated_at.replace(tzinfo=UTC).timestamp()
    return age > ttl_seconds
