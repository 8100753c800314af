"""The step log of a session schema a migration changed, made whole again in its transaction.

A migration adds, recreates (a copy-and-move batch: a new table under the old name) and drops
tables; PostgreSQL drops a table's triggers with it, and nothing in a migration creates the step
log's. So after the migration steps of an upgrade to the branch head (app/storage/postgres/
migrate.py, in the same transaction, under the session's lock), the schema's step-log triggers
are re-made from the models exactly as a clone of their template has them (app/storage/postgres/
db.py: `step_logged`, `Ddl.triggers`, calling the prefix's one function): every step-log trigger
of the schema is dropped (and a release's own per-schema function, as recycling drops it), then
one is created per table of the models with a primary key. A dropped table took its trigger
along.

`_stategym_step_cols` (what undo checks a table's columns against) records the table's columns
as they now are, but for a table the log holds changes of: those were logged with the columns
the record names, so when a migration changed them, undo stays refused for the session (docs/
steps.md, "Limits"). The log's values are JSON keyed by column name, so a table's later changes
read back whatever its columns.

The migration's own writes (a backfill) are no step: the step triggers are silenced while it runs
(`stategym.quiet`, as an undo silences them), or they would be logged as the next tool call's.
A schema without a step log (built before it existed) is left without one, as its forks are.

After any migration that moves a schema's revision (app/storage/postgres/migrate.py):

- `mark_migrated` records the step its log is at (meta `migrated_at_step`, as SQLite's): the
  row images of the steps up to it predate the migration, so no undo goes back before it
  (app/storage/steplog.py);
- `make_foreign_keys_deferrable`: a foreign key a migration created (`op.create_table`,
  `create_foreign_key`, a recreated table's) is NOT DEFERRABLE, where a clone's are `DEFERRABLE
  INITIALLY IMMEDIATE` (db.py: `schema_ddl`). An undo defers every key (`SET CONSTRAINTS ALL
  DEFERRED`), as it puts rows back in the log's reverse order: a child may come back before its
  parent (a statement that deleted both). So every key of the schema is made as a clone's:
  checked at each statement's end as before, deferred by an undo.
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
