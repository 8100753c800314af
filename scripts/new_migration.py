"""Write a new Alembic revision for one target by comparing its models with its branch head.

    python scripts/new_migration.py retail "add loyalty points"

Same as `stategym migrate revision --env retail -m "add loyalty points"`. The first revision of a
target starts its branch (branch label = target name).
"""

from __future__ import annotations

import sys

from app.storage.migrations import new_revision

if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(new_revision(sys.argv[1], sys.argv[2]))
