"""control: task rows stored once (sessions.task_json -> task_rows), sessions.dropped_at

Each session's task JSON moves to `task_rows` (one row per environment and canonical task text,
keyed by its sha256) and `sessions.task_digest` names it; `sessions.dropped_at` records when a
close deleted the session's database (NULL for the rows moved here: nobody recorded it). The
downgrade puts each session's task JSON back (as the task row stores it: keys sorted).

Revision ID: a9c4e2f6b8d1
Revises: e5a1c3f7b9d2
Create Date: 2026-12-02 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app import jsonio
from app.clock import naive_utcnow
from app.storage.control_schema import task_digest, task_text

revision: str = "a9c4e2f6b8d1"
down_revision: str | Sequence[str] | None = "e5a1c3f7b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FOREIGN_KEY = "fk_sessions_task_digest_task_rows"
BATCH = 2000  # sessions rows read and rewritten per round

sessions = sa.table(
    "sessions",
    sa.column("id", sa.String),
    sa.column("env", sa.String),
    sa.column("task_json", sa.Text),
    sa.column("task_digest", sa.String),
)
task_rows = sa.table(
    "task_rows",
    sa.column("digest", sa.String),
    sa.column("env", sa.String),
    sa.column("task_json", sa.Text),
    sa.column("created_at", sa.DateTime),
)


def upgrade() -> None:
    op.create_table(
        "task_rows",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("env", sa.String(length=64), nullable=False),
        sa.Column("task_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_task_rows")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("task_digest", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("dropped_at", sa.DateTime(), nullable=True))
    _move_tasks_out()
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.alter_column("task_digest", existing_type=sa.String(length=64), nullable=False)
        batch_op.create_foreign_key(FOREIGN_KEY, "task_rows", ["task_digest"], ["digest"])
        batch_op.drop_column("task_json")
        batch_op.create_index("ix_sessions_task_digest", ["task_digest"], unique=False)
        batch_op.create_index(
            "ix_sessions_env_dropped_at", ["env", "dropped_at", "id"], unique=False
        )


def _move_tasks_out() -> None:
    """Every session's task JSON into its task row (written once per digest), in rounds."""
    conn = op.get_bind()
    written: set[str] = set()
    now, after = naive_utcnow(), ""
    while True:
        rows = conn.execute(
            sa.select(sessions.c.id, sessions.c.env, sessions.c.task_json)
            .where(sessions.c.id > after)
            .order_by(sessions.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        after = rows[-1].id
        new_tasks, digests = [], []
        for row in rows:
            text = task_text(jsonio.loads_text(row.task_json))
            digest = task_digest(row.env, text)
            digests.append({"sid": row.id, "digest": digest})
            if digest not in written:
                written.add(digest)
                new_tasks.append(
                    {"digest": digest, "env": row.env, "task_json": text, "created_at": now}
                )
        if new_tasks:
            conn.execute(sa.insert(task_rows), new_tasks)
        conn.execute(
            sa.update(sessions)
            .where(sessions.c.id == sa.bindparam("sid"))
            .values(task_digest=sa.bindparam("digest")),
            digests,
        )


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("task_json", sa.Text(), nullable=True))
    conn = op.get_bind()
    conn.execute(
        sa.update(sessions).values(
            task_json=sa.select(task_rows.c.task_json)
            .where(task_rows.c.digest == sessions.c.task_digest)
            .scalar_subquery()
        )
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_env_dropped_at")
        batch_op.drop_index("ix_sessions_task_digest")
        batch_op.drop_constraint(FOREIGN_KEY, type_="foreignkey")
        batch_op.alter_column("task_json", existing_type=sa.Text(), nullable=False)
        batch_op.drop_column("dropped_at")
        batch_op.drop_column("task_digest")
    op.drop_table("task_rows")
