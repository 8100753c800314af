"""depot: SKUs in upper case (a data migration: no table changes shape)

Revision ID: d0a3c0ffee03
Revises: d0a2c0ffee02
Create Date: 2026-12-01 10:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "d0a3c0ffee03"
down_revision: str | Sequence[str] | None = "d0a2c0ffee02"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # What a backfill does to rows a session's earlier steps may have logged images of.
    op.execute("UPDATE items SET sku = upper(sku) WHERE sku <> upper(sku)")


def downgrade() -> None:
    pass  # the original case is not kept
