"""framework: the conversation tables (message_user writes one row per message)

Revision ID: 7c5d2e8f1a36
Revises: 3f1e0c7a9b24
Create Date: 2026-12-07 00:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7c5d2e8f1a36"
down_revision: str | Sequence[str] | None = "3f1e0c7a9b24"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The tables app/sdk/user.py adds to every environment's MetaData; one an environment's own
    # revisions made before this branch existed is kept.
    existing = sa.inspect(op.get_bind())
    if existing.has_table("stategym_user") and existing.has_table("stategym_conversation"):
        return
    op.create_table(
        "stategym_user",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("script", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stategym_user")),
    )
    op.create_table(
        "stategym_conversation",
        sa.Column("turn", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("reply", sa.Text(), nullable=False),
        sa.Column("act", sa.Text(), nullable=False),
        sa.Column("confirms", sa.Text(), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("simulator", sa.Text(), nullable=False),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.Column("sent_at", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("turn", name=op.f("pk_stategym_conversation")),
    )


def downgrade() -> None:
    op.drop_table("stategym_conversation")
    op.drop_table("stategym_user")
