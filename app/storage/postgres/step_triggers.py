"""The step log of a session schema a migration changed, made whole again in its transaction.

Invariant: after a migration the schema's step-log triggers and foreign keys are as a clone of
its template has them, the migration's own writes are no step, and no undo goes back before it.
Details: docs/storage.md#the-step-log-after-a-migration-postgresql.
"""

from __future__ import annotations

from sqlalchemy import Connection, MetaData

from app.storage.postgres.db import (
    META_TABLE,
    STEP_TRIGGER_FUNCTION,
    ensure_step_function,
    functions_schema_of,
    in_schema,
    legacy_step_function_sql,
    quoted,
    schema_ddl,
    step_logged,
)
from app.storage.postgres.steplog import PG_STEP_LOG_VERSION
from app.storage.steplog import (
    MIGRATED_AT_STEP,
    STEP_COLS_TABLE,
    STEP_PREFIX,
    STEP_ROWS_TABLE,
    STEPS_TABLE,
)

# Transaction-local: the step triggers log nothing until the transaction ends.
QUIET = "SELECT set_config('stategym.quiet', 'on', true)"


def keeps_step_log(conn: Connection, schema: str) -> bool:
    s = quoted(schema)
    found = conn.exec_driver_sql(f"SELECT value FROM {s}.{META_TABLE} WHERE key = 'step_log'")
    return found.scalar() == PG_STEP_LOG_VERSION


def remake_step_triggers(conn: Connection, schema: str, metadata: MetaData) -> None:
    """In `conn`'s transaction: `schema`'s step-log triggers and column records as a clone of
    `metadata`'s template has them (see the module's docstring)."""
    s = quoted(schema)
    functions = functions_schema_of(schema)  # `<prefix>_fn`
    function = f"{quoted(functions)}.{STEP_TRIGGER_FUNCTION}()"
    if conn.exec_driver_sql("SELECT to_regprocedure(%(f)s)", {"f": function}).scalar() is None:
        # None yet if only older releases ran (`stategym migrate sessions`).
        ensure_step_function(conn, functions.removesuffix("_fn"))
    stale = conn.exec_driver_sql(
        "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_proc p ON p.oid = t.tgfoid WHERE c.relnamespace = to_regnamespace(%(s)s) "
        "AND NOT t.tgisinternal AND (starts_with(t.tgname, %(prefix)s) OR p.proname = %(fn)s)",
        {"s": s, "prefix": STEP_PREFIX, "fn": STEP_TRIGGER_FUNCTION},
    ).all()
    script = [legacy_step_function_sql(schema)]  # cascades to the triggers that call it
    script += [f"DROP TRIGGER IF EXISTS {quoted(t)} ON {s}.{quoted(r)}" for r, t in stale]
    script.append(in_schema(schema_ddl(metadata).triggers, schema))
    conn.exec_driver_sql(";\n".join(script))
    # Column records: the current columns (in the order undo compares them), but for tables
    # the log holds changes of.
    unlogged = f"NOT EXISTS (SELECT 1 FROM {s}.{STEP_ROWS_TABLE} r WHERE r.tbl = "
    conn.exec_driver_sql(f"DELETE FROM {s}.{STEP_COLS_TABLE} c WHERE {unlogged}c.tbl)")
    conn.exec_driver_sql(  # one statement: parameters make it a prepared one
        f"INSERT INTO {s}.{STEP_COLS_TABLE} (tbl, cols) SELECT n, (SELECT string_agg(a.attname, "
        "',' ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = to_regclass(%(s)s || '.' "
        "|| quote_ident(n)) AND a.attnum > 0 AND NOT a.attisdropped) "
        f"FROM unnest(%(names)s::text[]) n WHERE {unlogged}n)",
        {"s": s, "names": list(step_logged(metadata))},
    )


def mark_migrated(conn: Connection, schema: str) -> None:
    """Record that a migration ran after the log's last step (none yet: nothing to record)."""
    s = quoted(schema)
    conn.exec_driver_sql(
        f"INSERT INTO {s}.{META_TABLE} (key, value) SELECT %(key)s, max(idx)::text "
        f"FROM {s}.{STEPS_TABLE} HAVING max(idx) > 0 "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        {"key": MIGRATED_AT_STEP},
    )


def make_foreign_keys_deferrable(conn: Connection, schema: str) -> None:
    """Every foreign key of `schema` DEFERRABLE INITIALLY IMMEDIATE, as a clone's."""
    s = quoted(schema)
    keys = conn.exec_driver_sql(
        "SELECT t.relname, c.conname FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
        "WHERE c.contype = 'f' AND c.connamespace = to_regnamespace(%(s)s) "
        "AND NOT c.condeferrable ORDER BY 1, 2",
        {"s": s},
    ).all()
    if keys:
        conn.exec_driver_sql(
            ";\n".join(
                f"ALTER TABLE {s}.{quoted(table)} ALTER CONSTRAINT {quoted(name)} "
                "DEFERRABLE INITIALLY IMMEDIATE"
                for table, name in keys
            )
        )
