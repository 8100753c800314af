"""sql: the framework's answer table (submit_answer / decline_request write its one row)

Revision ID: ba53397712b8
Revises: 4fbd63c568a6
Create Date: 2026-11-27 15:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ba53397712b8"
down_revision: str | Sequence[str] | None = "4fbd63c568a6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
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
