"""depot: stock moves (a new table), wider bin labels (the table recreated), notes dropped

Revision ID: d0a2c0ffee02
Revises: d0a1c0ffee01
Create Date: 2026-12-01 10:05:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d0a2c0ffee02"
down_revision: str | Sequence[str] | None = "d0a1c0ffee01"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "moves",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("delta", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=50), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], name=op.f("fk_moves_item_id_items")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_moves")),
    )
    # Copy-and-move on every backend (SQLite needs it for a type change anyway).
    with op.batch_alter_table("bins", recreate="always") as batch_op:
        batch_op.alter_column(
            "label", existing_type=sa.String(length=40), type_=sa.String(length=60)
        )
    op.drop_table("notes")


def downgrade() -> None:
    op.create_table(
        "notes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notes")),
    )
    with op.batch_alter_table("bins", recreate="always") as batch_op:
        batch_op.alter_column(
            "label", existing_type=sa.String(length=60), type_=sa.String(length=40)
        )
    op.drop_table("moves")
