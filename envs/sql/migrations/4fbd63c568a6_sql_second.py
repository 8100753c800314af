"""sql: department cost centres, backfilled from department codes

Revision ID: 4fbd63c568a6
Revises: c8779d6160e4
Create Date: 2026-11-21 23:44:36.026121
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4fbd63c568a6"
down_revision: str | Sequence[str] | None = "c8779d6160e4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Add nullable, backfill with the rule the model's default applies to new rows, then make
    # it required: one transaction, so a failure leaves the database as it was.
    with op.batch_alter_table("departments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cost_center", sa.String(length=12), nullable=True))
    op.execute("UPDATE departments SET cost_center = 'CC-' || code")
    with op.batch_alter_table("departments", schema=None) as batch_op:
        batch_op.alter_column("cost_center", existing_type=sa.String(length=12), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("departments", schema=None) as batch_op:
        batch_op.drop_column("cost_center")
