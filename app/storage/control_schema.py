"""The control database's tables: one row per session, its task rows, the typed-seed claims.

Apart from app/storage/control.py (the queries) so that migrations (app/storage/migrations.py
and the control branch's revisions) can name the metadata and the task rows' digest without
importing the queries that open a control database.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from app import jsonio
from app.sdk.environment import NAMING_CONVENTION

control_metadata = MetaData(naming_convention=NAMING_CONVENTION)

# Each task a session was seeded with, stored once: the 8 rollouts of a GRPO group and every
# re-seed of a task share one row (3 KB of a retail task, against ~1 KB of the session's own).
# Addressed by `task_digest`: rows are only ever inserted if absent and deleted once no session
# names them (ControlDB.prune_dropped, ControlDB.delete); the sessions' foreign key makes a
# seed that names a row deleted meanwhile fail, and retry writing it.
task_rows_table = Table(
    "task_rows",
    control_metadata,
    Column("digest", String(64), primary_key=True),
    Column("env", String(64), nullable=False),
    Column("task_json", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)


def task_digest(env: str, task_json: str) -> str:
    """The task row's key: sha256 of the environment and the task's canonical JSON."""
    return hashlib.sha256(f"{env}\n{task_json}".encode()).hexdigest()


def task_text(task: Any) -> str:
    """A task as its row stores it: canonical JSON (keys sorted), one text per value."""
    return jsonio.dumps_canonical_text(task)


sessions_table = Table(
    "sessions",
    control_metadata,
    Column("id", String(32), primary_key=True),
    Column("env", String(64), nullable=False),
    Column("task_id", String(200)),
    Column("snapshot_key", String(32), nullable=False),
    Column("resources_session_id", String(200)),
    Column("status", String(16), nullable=False),  # open | verified | closed
    Column("created_at", DateTime, nullable=False),
    Column("verified_at", DateTime),
    Column("closed_at", DateTime),
    Column("reward", Float),
    Column("file", Text, nullable=False),
    Column("task_digest", String(64), ForeignKey("task_rows.digest"), nullable=False),
    Column("verify_json", Text),
    # When the close deleted the session's database (retention). Set by the close that deletes
    # it, so a record whose database is known to be gone is one the bound on closed records
    # (`session_records_max`) may prune; NULL for every record whose database a user may still
    # open (open sessions, `keep`, `keep_failed`'s failures, and records closed before this
    # column existed, whose files nobody recorded).
    Column("dropped_at", DateTime),
    Index("ix_sessions_resources_session_id", "resources_session_id"),
    Index("ix_sessions_env_task", "env", "task_id"),
    # Live-session counts (capacity limit) and the idle reaper filter on these.
    Index("ix_sessions_env_status", "env", "status"),
    # The run explorer (app/explorer/): newest-first pages, with or without an env filter, and
    # reward sums per task read from the index alone.
    Index("ix_sessions_created_at", "created_at"),
    Index("ix_sessions_env_created_at", "env", "created_at"),
    Index("ix_sessions_env_task_reward", "env", "task_id", "reward"),
    # Task rows no session names any more are found through this (and the foreign key's checks
    # on a task row's delete read it).
    Index("ix_sessions_task_digest", "task_digest"),
    # The pruner: an environment's dropped records, newest first, to the bound.
    Index("ix_sessions_env_dropped_at", "env", "dropped_at", "id"),
)

# The ids typed (NeMo Gym 0.7.0) seeds and closes name, per environment. The primary key makes
# a claim atomic across workers: two racing seeds of one id make one database. A close of an id
# nobody seeded leaves a tombstone (state `closed`, no session) so a late seed is refused.
resources_ids_table = Table(
    "resources_ids",
    control_metadata,
    Column("env", String(64), primary_key=True),
    Column("resources_session_id", String(200), primary_key=True),
    Column("episode", Text),  # EpisodeId.key() of the seed (or close) that made the row
    Column("session_id", String(32)),  # None for a tombstone
    Column("state", String(16), nullable=False),  # seeding | open | closed
    Column("updated_at", DateTime, nullable=False),
)

CLAIM_SEEDING, CLAIM_OPEN, CLAIM_CLOSED = "seeding", "open", "closed"

# Where a session came from when it was not seeded: forked from a parent as of one of its steps,
# or restored from an export (app/storage/lineage.py).
lineage_table = Table(
    "lineage",
    control_metadata,
    Column("session_id", String(32), primary_key=True),
    Column("parent_id", String(32), nullable=False),
    Column("parent_step", Integer, nullable=False),
    Column("kind", String(16), nullable=False),  # fork | restore
    Column("created_at", DateTime, nullable=False),
    Index("ix_lineage_parent_id", "parent_id"),
)
