"""A deleted session's schema reset to the base template and put back in the schema pool.

Invariant: a recycled schema holds what a fresh clone of the base holds
(tests/storage/test_pg_recycle.py), or it is dropped; one transaction under the session's
lock: the step log undone to 0 (as seeded), then the seed rows written back to the base's
(app/storage/postgres/seed_rows.py).
Steps and costs: docs/storage.md#recycled-schemas-postgresql.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
from sqlalchemy import Connection, Engine, MetaData
from sqlalchemy.exc import DBAPIError

from app.storage.postgres.changes import PgChangeReader
from app.storage.postgres.db import (
    META_TABLE,
    SEED_TABLE,
    STEP_TRIGGER_FUNCTION,
    VERSION_TABLE,
    in_schema,
    legacy_step_function_sql,
    quoted,
    results,
    schema_ddl,
    serial_columns,
    session_connection,
    step_rows_sequence_sql,
)
from app.storage.postgres.pool import SchemaPool
from app.storage.postgres.seed_rows import revert_script
from app.storage.postgres.steplog import PgStepLog
from app.storage.steplog import UndoUnavailable

log = logging.getLogger("stategym.postgres")


# (conn, template schema) -> the template's SERIAL maxima and row counts per table: a template
# never changes once built, so its store reads them once.
TemplateFacts = Callable[[Connection, str], tuple[dict[str, int], dict[str, int]]]


class _Mismatch(Exception):
    """The reset schema does not hold the base template's row counts."""


def recycle(
    engine: Engine,
    schema: str,
    metadata: MetaData,
    changes: PgChangeReader,
    pool: SchemaPool,
    facts: TemplateFacts,
    base: str,
    before_reset: Callable[[Connection, str], list[str]] | None = None,
) -> bool:
    """Reset session schema `schema` to base template `base` and add it to `pool`; False when
    it cannot be (the caller drops or keeps it). Nothing is changed then. `before_reset(conn,
    base)` gives statements run first in the same transaction (archiving a kept session:
    app/storage/postgres/archive.py), so they are undone with the reset when that fails.

    Four round trips: BEGIN (with the session's pin and lock), everything the reset checks and
    the undo reads (one simple query), the archive, the undo, the revert, the meta, the
    sequences, the row counts and the rename (one script), COMMIT; a count that is not the
    base's raises after the script and rolls it all back."""
    if any(not table.primary_key.columns for table in metadata.tables.values()):
        return False  # its rows are not in the log (no identity): the undo cannot reset it
    if not pool.has_room(base):
        return False
    name = pool.new_name()
    s, t = quoted(schema), quoted(base)
    try:
        with session_connection(engine, schema) as conn, conn.begin() as transaction:
            steps = PgStepLog(conn, schema, metadata)
            own_function = f"to_regprocedure('{s}.{STEP_TRIGGER_FUNCTION}()') IS NOT NULL"
            try:
                ((meta, intact),), seeded_rows, ((legacy,),), *reads = results(
                    conn,
                    [
                        changes.trust_sql(schema, metadata.tables),
                        f"SELECT tbl FROM {s}.{SEED_TABLE}",
                        f"SELECT {own_function}",
                        *steps.undo_reads(0),
                    ],
                )
            except psycopg.errors.UndefinedTable:  # an older release's schema: no seed rows
                transaction.rollback()
                return False
            # Seeded under the running models (else untracked), with its seed rows recorded.
            seeded = [row[0] for row in seeded_rows]
            if changes.trusts(meta, intact, metadata.tables) is None or any(
                table not in metadata.tables for table in seeded
            ):
                transaction.rollback()
                return False
            undo, _ = steps.undo_script(0, reads)
            maxima, counts = facts(conn, base)
            script = [
                *(before_reset(conn, base) if before_reset is not None else []),
                undo,
                revert_script(schema, base, metadata, seeded),
                f"DELETE FROM {s}.{META_TABLE}",
                f"INSERT INTO {s}.{META_TABLE} SELECT * FROM {t}.{META_TABLE}",
                f"DELETE FROM {s}.{VERSION_TABLE}",
                f"INSERT INTO {s}.{VERSION_TABLE} SELECT * FROM {t}.{VERSION_TABLE}",
                step_rows_sequence_sql(schema),
            ]
            # Each sequence as a clone sets it (clone_sql): after the base's largest id, or as
            # new when the base's table is empty.
            for table, column in serial_columns(metadata):
                sequence = f"pg_get_serial_sequence('{s}.{quoted(table.name)}', '{column}')"
                top = int(maxima.get(table.name) or 0)
                script.append(
                    f"SELECT setval({sequence}, {top})"
                    if top > 0
                    else f"SELECT setval({sequence}, 1, false)"
                )
            if legacy:  # its triggers call the schema's own function: re-made to call the shared
                script += [
                    legacy_step_function_sql(schema),
                    in_schema(schema_ddl(metadata).triggers, schema),
                ]
            found = ", ".join(f"(SELECT count(*) FROM {s}.{quoted(n)})" for n in metadata.tables)
            script += [f"SELECT {found}", f"ALTER SCHEMA {s} RENAME TO {quoted(name)}"]
            (found_counts,) = results(conn, script)[-2]  # (the rename's is the last)
            if list(found_counts) != [counts.get(n) for n in metadata.tables]:
                raise _Mismatch
    except (_Mismatch, UndoUnavailable, DBAPIError, psycopg.Error) as exc:
        log.warning("session schema %s not reset into the pool (%s)", schema, exc)
        return False
    if not pool.put(base, name):  # filled meanwhile: not needed
        pool.drop_quietly(name)
    return True
