"""control: index sessions by creation time, env + creation time, and env + task + reward

The run explorer (`stategym browse`) pages sessions newest first and sums rewards per task;
without these a page at 100,000 sessions scans the whole table (bench/README.md).

Revision ID: e5a1c3f7b9d2
Revises: c4d2a7e9f1b3
Create Date: 2026-11-27 15:10:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "e5a1c3f7b9d2"
down_revision: str | Sequence[str] | None = "c4d2a7e9f1b3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])
    op.create_index("ix_sessions_env_created_at", "sessions", ["env", "created_at"])
    op.create_index("ix_sessions_env_task_reward", "sessions", ["env", "task_id", "reward"])


def downgrade() -> None:
    op.drop_index("ix_sessions_env_task_reward", table_name="sessions")
    op.drop_index("ix_sessions_env_created_at", table_name="sessions")
    op.drop_index("ix_sessions_created_at", table_name="sessions")
