"""control: lineage (forked and restored sessions: parent, step, kind)

Revision ID: c4d2a7e9f1b3
Revises: b7e3c1d9a4f2
Create Date: 2026-11-24 01:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4d2a7e9f1b3"
down_revision: str | Sequence[str] | None = "b7e3c1d9a4f2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lineage",
        sa.Column("session_id", sa.String(length=32), nullable=False),
        sa.Column("parent_id", sa.String(length=32), nullable=False),
        sa.Column("parent_step", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_lineage")),
    )
    op.create_index("ix_lineage_parent_id", "lineage", ["parent_id"])


def downgrade() -> None:
    op.drop_index("ix_lineage_parent_id", table_name="lineage")
    op.drop_table("lineage")
