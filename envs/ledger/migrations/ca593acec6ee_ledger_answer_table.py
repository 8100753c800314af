"""ledger: the framework's answer table, from the framework branch

Revision ID: ca593acec6ee
Revises: 86dd6e895507
Create Date: 2026-11-27 15:30:00.000000

Creates nothing itself: the tables are the framework branch's
(migrations/versions/framework/3f1e0c7a9b24_framework_answer_table.py), reached
through `depends_on`. Kept so that databases stamped with this revision still resolve.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "ca593acec6ee"
down_revision: str | Sequence[str] | None = "86dd6e895507"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = "3f1e0c7a9b24"


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
