"""workplace: company websites, backfilled from their domains

Revision ID: dd055a341725
Revises: 1d3c1bfaf1ab
Create Date: 2026-11-21 23:44:35.273248
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "dd055a341725"
down_revision: str | Sequence[str] | None = "1d3c1bfaf1ab"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Add nullable, backfill with the rule the model's default applies to new rows, then make
    # it required: one transaction, so a failure leaves the database as it was.
    with op.batch_alter_table("companies", schema=None) as batch_op:
        batch_op.add_column(sa.Column("website", sa.String(length=100), nullable=True))
    op.execute("UPDATE companies SET website = 'https://www.' || domain")
    with op.batch_alter_table("companies", schema=None) as batch_op:
        batch_op.alter_column("website", existing_type=sa.String(length=100), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("companies", schema=None) as batch_op:
        batch_op.drop_column("website")
