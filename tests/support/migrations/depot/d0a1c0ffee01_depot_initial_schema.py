"""depot: initial schema (tests/support/depot_env.py)

Revision ID: d0a1c0ffee01
Revises:
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d0a1c0ffee01"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = ("depot",)
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sku", sa.String(length=32), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_items")),
        sa.UniqueConstraint("sku", name=op.f("uq_items_sku")),
    )
    op.create_table(
        "bins",
        sa.Column("code", sa.String(length=8), nullable=False),
        sa.Column("label", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("code", name=op.f("pk_bins")),
    )
    op.create_table(
        "notes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notes")),
    )


def downgrade() -> None:
    op.drop_table("notes")
    op.drop_table("bins")
    op.drop_table("items")
