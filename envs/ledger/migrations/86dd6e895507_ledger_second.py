"""ledger: customer display names, backfilled from first and last name

Revision ID: 86dd6e895507
Revises: ba069af8a3e4
Create Date: 2026-11-21 23:44:34.466929
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "86dd6e895507"
down_revision: str | Sequence[str] | None = "ba069af8a3e4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Add nullable, backfill with the rule the model's default applies to new rows, then make
    # it required: one transaction, so a failure leaves the database as it was.
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("display_name", sa.String(length=130), nullable=True))
    op.execute("UPDATE customers SET display_name = first_name || ' ' || last_name")
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.alter_column("display_name", existing_type=sa.String(length=130), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.drop_column("display_name")
