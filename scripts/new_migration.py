"""Write a new Alembic revision for one target by comparing its models with its branch head.

    python scripts/new_migration.py retail "add loyalty points"

The first revision of a target starts its branch (branch label = target name).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from alembic import command

from app.storage.migrations import (
    MIGRATIONS_DIR,
    alembic_config,
    connection_to,
    head_revision,
    targets,
    upgrade_file,
)


def main(target: str, message: str) -> None:
    head = head_revision(target)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "autogen.sqlite"
        sqlite3.connect(path).close()
        if head:
            upgrade_file(path, target)
        # Autogenerate insists the database sits at every head of the script directory, so
        # record the other branches' heads too (their tables are not compared).
        conn = sqlite3.connect(path)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
        for other in targets():
            other_head = head_revision(other)
            if other != target and other_head:
                conn.execute("INSERT INTO alembic_version VALUES (?)", (other_head,))
        conn.commit()
        conn.close()
        with connection_to(path) as conn:
            cfg = alembic_config(target)
            cfg.attributes["connection"] = conn
            version_path = MIGRATIONS_DIR / "versions" / target
            version_path.mkdir(parents=True, exist_ok=True)
            command.revision(
                cfg,
                message=message,
                autogenerate=True,
                head=f"{target}@head" if head else "base",
                branch_label=None if head else target,
                version_path=str(version_path),
            )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
