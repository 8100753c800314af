"""framework: the answer table (submit_answer / decline_request write its one row)

Revision ID: 3f1e0c7a9b24
Revises:
Create Date: 2026-12-07 00:00:00.000000

The first revision of the framework branch: tables every environment's database has, created
once here; each environment's branch reaches them through `depends_on` (docs/migrations.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3f1e0c7a9b24"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = ("framework",)
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("stategym_answer"):
        return  # an environment whose own revisions made it before this branch existed
    # The table app/sdk/answer.py adds to every environment's MetaData.
    op.create_table(
        "stategym_answer",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("submitted_at", sa.Text(), nullable=True),
        sa.CheckConstraint("id = 1", name=op.f("ck_stategym_answer_single_row")),
        sa.CheckConstraint("kind IN ('answer', 'decline')", name=op.f("ck_stategym_answer_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stategym_answer")),
    )


def downgrade() -> None:
    op.drop_table("stategym_answer")
