"""airline: airport labels, backfilled from city and IATA code

Revision ID: 900abb45f6f9
Revises: 8354eabc1e48
Create Date: 2026-11-21 23:44:48.178937
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "900abb45f6f9"
down_revision: str | Sequence[str] | None = "8354eabc1e48"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Add nullable, backfill with the rule the model's default applies to new rows, then make
    # it required: one transaction, so a failure leaves the database as it was.
    with op.batch_alter_table("airports", schema=None) as batch_op:
        batch_op.add_column(sa.Column("label", sa.String(length=70), nullable=True))
    op.execute("UPDATE airports SET label = city || ' (' || code || ')'")
    with op.batch_alter_table("airports", schema=None) as batch_op:
        batch_op.alter_column("label", existing_type=sa.String(length=70), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("airports", schema=None) as batch_op:
        batch_op.drop_column("label")
