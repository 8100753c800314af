"""Alembic environment: one branch per StateGym target (environments + the control database),
and the framework tables' branch each environment's `depends_on` (docs/migrations.md).

Programmatic use (`app.storage.migrations`) passes the target and an open connection in
`config.attributes`. From the `alembic` command line:

    alembic upgrade heads                      # every target's database in the data dir
    alembic -x env=retail -x db=PATH upgrade retail@head
"""

from __future__ import annotations

import os
from pathlib import Path

from alembic import context

from app.storage.migrations import connection_to, include_name, metadata_for, targets, upgrade_file

config = context.config


def _databases_for(target: str) -> list[Path]:
    """`-x db=PATH`, else the target's control/template/snapshot files in the data dir."""
    x_args = context.get_x_argument(as_dictionary=True)
    if x_args.get("db"):
        return [Path(x_args["db"])]
    from app.cli.migrate import database_files

    return database_files(Path(os.environ.get("STATEGYM_DATA_DIR", "var")), target)


def _run(connection, target: str) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata_for(target),
        render_as_batch=True,  # SQLite cannot ALTER most things: copy-and-move batches
        transactional_ddl=True,  # BEGIN is ours (see app.storage.migrations), so DDL rolls back too
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    target = config.attributes.get("target") or context.get_x_argument(as_dictionary=True).get(
        "env"
    )
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection, target)
        return
    if target is None:
        # `alembic upgrade heads`: upgrade each target's own database to its own branch head.
        for name in targets():
            for path in _databases_for(name):
                upgrade_file(path, name)
                print(f"{name}: upgraded {path}")
        return
    for path in _databases_for(target):
        with connection_to(path) as conn:
            _run(conn, target)


if context.is_offline_mode():
    raise SystemExit("offline (--sql) mode is not supported: StateGym migrates SQLite files")
main()
