"""sql: the framework's conversation tables, from the framework branch

Revision ID: dc86d4399b5e
Revises: ba53397712b8
Create Date: 2026-12-06 20:45:00.000000

Creates nothing itself: the tables are the framework branch's
(migrations/versions/framework/7c5d2e8f1a36_framework_conversation_tables.py), reached
through `depends_on`. Kept so that databases stamped with this revision still resolve.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "dc86d4399b5e"
down_revision: str | Sequence[str] | None = "ba53397712b8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = "7c5d2e8f1a36"


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
