"""retail: product url slugs, backfilled from product names

Revision ID: 2e8a7961040f
Revises: fda363d0db30
Create Date: 2026-11-21 23:22:14.193889
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "2e8a7961040f"
down_revision: str | Sequence[str] | None = "fda363d0db30"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Add nullable, backfill from the name (same rule as envs/retail/data.py product_slug),
    # then make it required and unique.
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("slug", sa.String(length=100), nullable=True))
    op.execute("UPDATE products SET slug = lower(replace(name, ' ', '-'))")
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.alter_column("slug", existing_type=sa.String(length=100), nullable=False)
        batch_op.create_unique_constraint(batch_op.f("uq_products_slug"), ["slug"])


def downgrade() -> None:
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_products_slug"), type_="unique")
        batch_op.drop_column("slug")
