"""PostgreSQL plumbing: the engine, schema names, and the SQL that clones a schema.

Every schema name is built here from validated parts only (a 32-hex session id, hex digests,
a prefix checked by Settings), so nothing from a request reaches SQL unchecked. A connection
working for one session carries `schema_translate_map={None: schema}` (the ORM's unqualified
tables land in that schema) and every transaction on it starts with `SET LOCAL search_path`,
so raw SQL sees only that schema too.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, Engine, MetaData, Table, create_engine, event
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg
from sqlalchemy.exc import OperationalError
from sqlalchemy.schema import AddConstraint, CreateIndex, CreateTable

from app.storage.backend import sync_pg_url
from app.storage.snapshots import check_session_id
from app.storage.steplog import STEP_COLS_TABLE, STEP_PREFIX, STEP_ROWS_TABLE, STEPS_TABLE

_SCHEMA_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
META_TABLE = "_stategym_meta"
VERSION_TABLE = "alembic_version"
# Stands in for the schema name in DDL compiled once per environment.
_PLACEHOLDER = "sgschemaplaceholderzz"
# Stands in for the schema of the step log's trigger function (`functions_schema`).
_FN_PLACEHOLDER = "sgfunctionsplaceholderzz"
# The step log (app/storage/postgres/steplog.py): its tables, in every template and session.
STEP_LOG_TABLES = (STEPS_TABLE, STEP_ROWS_TABLE, STEP_COLS_TABLE)
STEP_TRIGGER_FUNCTION = "_stategym_step_log"
# What a session's seed wrote over its environment's base template: per table, the rows as the
# snapshot holds them (JSON, PostgreSQL's own text of each value). A session is the base plus
# these rows (app/storage/postgres/seed_rows.py); recycling takes them back, an archive keeps them.
SEED_TABLE = "_stategym_seed"


def checked_schema(name: str) -> str:
    if not _SCHEMA_RE.fullmatch(name):
        raise ValueError(f"not a StateGym schema name: {name!r}")
    return name


def quoted(name: str) -> str:
    """A checked identifier, double-quoted (names come from code and models, never requests)."""
    if not _IDENT_RE.fullmatch(name):
        raise ValueError(f"refusing identifier {name!r}")
    return f'"{name}"'


class SchemaNames:
    """Every schema StateGym creates, under one prefix (several deployments may share a db)."""

    def __init__(self, prefix: str):
        self.prefix = checked_schema(prefix)

    @property
    def control(self) -> str:
        return f"{self.prefix}_control"

    def session(self, session_id: str) -> str:
        return checked_schema(f"{self.prefix}_s_{check_session_id(session_id)}")

    def snapshot(self, fingerprint: str, snapshot_key: str) -> str:
        digest = hashlib.sha256(f"{fingerprint}:{snapshot_key}".encode()).hexdigest()[:32]
        return checked_schema(f"{self.prefix}_t_{digest}")

    def session_pattern(self) -> str:
        """LIKE pattern matching session schemas (underscores escaped)."""
        return f"{self.prefix}\\_s\\_%"


def schema_of(conn: Connection) -> str | None:
    mapping = conn.get_execution_options().get("schema_translate_map") or {}
    return mapping.get(None)


# An execution option: transactions on a connection carrying it are not pinned to a session
# (no search path, lock or status read), e.g. the control table's, mapped to its schema.
PLAIN = "stategym_plain"
# An execution option, and the Connection.info key where the answer goes: read the status of the
# session a transaction is pinned to under its lock, when the transaction begins.
STATUS = "stategym_status"
# An execution option for PLAIN connections whose every transaction is one statement (the control
# table's hot reads and writes): no BEGIN is sent, so the statement runs in autocommit, atomic on
# its own, in one round trip instead of three (BEGIN, it, COMMIT or ROLLBACK). Never on a
# connection that runs two statements in a transaction: each would commit alone.
ONE_STATEMENT = "stategym_one_statement"
# An execution option for PLAIN connections whose transaction is ONE script sent by the caller
# that begins with its own BEGIN (and may end with its own COMMIT): nothing is sent when
# SQLAlchemy begins, so the script is the transaction's only round trip. A COMMIT inside the
# script leaves the driver idle, and SQLAlchemy's commit then sends nothing (psycopg commits
# only an open transaction).
SCRIPTED_BEGIN = "stategym_scripted_begin"
MAX_OVERFLOW = 4
# A statement of the server's own work on a session schema (not a tool call's) is cancelled
# past this: a backstop against a runaway, far above any verify or close seen under load.
SERVER_WORK_TIMEOUT_MS = 60_000
_IDLE = TransactionStatus.IDLE


def make_engine(
    url: str,
    *,
    pool_size: int,
    statement_timeout_ms: int | None = None,
    max_age_s: int = 15,
) -> Engine:
    """A pooled psycopg engine; transactions of session-bound connections pin the search path.

    The driver connections run in psycopg's autocommit mode and every SQLAlchemy transaction
    sends its own BEGIN (`_begin`): a session's BEGIN then travels with its pin (search path,
    lock, status) in one round trip, where psycopg would send BEGIN alone first. SQLAlchemy
    begins a transaction before any statement (autobegin), so nothing runs outside one; COMMIT
    and ROLLBACK are psycopg's own (sent whenever a transaction is open). One round trip less
    per session transaction: ~6 a rollout (bench/history/rounds.md, round 8)."""
    # A few connections beyond the pool for bursts (the default pool has one per worker thread
    # already): per worker at most pool_size + 4 count against max_connections.
    engine = create_engine(
        sync_pg_url(url),
        pool_size=pool_size,
        max_overflow=min(pool_size, MAX_OVERFLOW),
        # A backend never evicts the plans and relation entries of the schemas it touched, and
        # every schema rename (two a rollout) walks them all: a young backend has few. 15 s: +13 %
        # rollouts, -23 % CPU a rollout in a soak against 1800 (bench/history/postgres.md).
        pool_recycle=max_age_s,
    )

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        raw = conn.connection.driver_connection
        assert raw is not None
        if not raw.autocommit and raw.info.transaction_status == _IDLE:
            raw.autocommit = True  # once per pooled connection (see the docstring)
        schema, options = schema_of(conn), conn.get_execution_options()
        if schema is None or options.get(PLAIN):
            if not options.get(ONE_STATEMENT) and not options.get(SCRIPTED_BEGIN):
                raw.execute(b"BEGIN")  # templates, the control table: plain transactions
            return
        parts = ["BEGIN", f"SET LOCAL search_path TO {quoted(checked_schema(schema))}"]
        if statement_timeout_ms:
            # The tool limit bounds a tool call's SQL (the transactions that read the status);
            # the server's own work on a session (verify, close, recycle, a fork's replay) is
            # bounded by the session's size, and only a backstop guards it: cancelling a
            # verify at a tool's limit under load lost a rollout (bench/history/postgres.md).
            limit = statement_timeout_ms if options.get(STATUS) else SERVER_WORK_TIMEOUT_MS
            parts.append(f"SET LOCAL statement_timeout = {int(limit)}")
        # The durability SQLite sessions have (WAL + synchronous=NORMAL): a killed StateGym
        # loses nothing (the server holds the commit); only a PostgreSQL crash or a power
        # loss can drop the last fraction of a second of tool calls (docs/postgres.md).
        parts.append("SET LOCAL synchronous_commit = off")
        # Calls on one session are serialised across every replica, as BEGIN IMMEDIATE does.
        parts.append(f"SELECT pg_advisory_xact_lock({advisory_key(schema)})")
        if options.get(STATUS):
            # The session's status, read once the lock is held (its own statement: a snapshot
            # taken after the lock), in the same round trip: a close by any replica is seen.
            parts.append(f"SELECT value FROM {META_TABLE} WHERE key = 'status'")
        cursor = raw.execute("; ".join(parts).encode())  # one simple query, several results
        if not options.get(STATUS):
            return
        while cursor.nextset():
            pass
        row = cursor.fetchone()
        conn.info[STATUS] = row[0] if row else "open"

    return engine


@contextmanager
def session_connection(
    engine: Engine, schema: str, *, status: bool = False
) -> Iterator[Connection]:
    """A pooled connection whose ORM statements and raw SQL address `schema` only; `status`:
    each transaction begins by reading the session's status into `conn.info[STATUS]`."""
    with engine.connect() as conn:
        conn.execution_options(schema_translate_map={None: checked_schema(schema)})
        if status:
            conn.execution_options(**{STATUS: True})
        yield conn


# --- DDL ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ddl:
    """The models' DDL in steps (schema left as a placeholder), compiled once per env."""

    tables: str  # CREATE TABLE without foreign keys, plus the framework's tables
    indexes: str
    foreign_keys: list[str]  # ALTER TABLE ... ADD CONSTRAINT ... FOREIGN KEY
    # The step log's row trigger per table, calling the prefix's one function
    # (`ensure_step_function`): created after the rows are in (a template's copy and a clone's
    # INSERT ... SELECT are no tool call).
    triggers: str
    step_cols: dict[str, list[str]]  # table -> its columns, as `_stategym_step_cols` records

    @property
    def full(self) -> str:
        """Tables, indexes and foreign keys (no triggers)."""
        return ";\n".join([self.tables, self.indexes, *self.foreign_keys])


_ddl_cache: dict[int, tuple[MetaData, Ddl]] = {}


def schema_ddl(metadata: MetaData) -> Ddl:
    cached = _ddl_cache.get(id(metadata))
    if cached is not None and cached[0] is metadata:
        return cached[1]
    dialect = pg_psycopg.dialect()
    target = MetaData(naming_convention=metadata.naming_convention)
    tables, indexes, fks = [], [], []
    for table in metadata.sorted_tables:
        copy = table.to_metadata(target, schema=_PLACEHOLDER)
        # Foreign keys come last: PostgreSQL needs a unique index under each (a key to a
        # `unique=True, index=True` column needs that index first; SQLite does not care), and
        # a clone adds them after its rows are in (see clone_sql).
        create = CreateTable(copy, include_foreign_key_constraints=[])
        tables.append(str(create.compile(dialect=dialect)).strip())
        for index in sorted(copy.indexes, key=lambda ix: ix.name or ""):
            indexes.append(str(CreateIndex(index).compile(dialect=dialect)).strip())
        # DEFERRABLE (INITIALLY IMMEDIATE: checked at each statement's end, as before): an undo
        # of the step log defers them (SET CONSTRAINTS ALL DEFERRED), as SQLite's
        # defer_foreign_keys does, so rows may come back in the log's reverse order.
        fks += [
            str(AddConstraint(fk).compile(dialect=dialect)).strip()
            + " DEFERRABLE INITIALLY IMMEDIATE"
            for fk in sorted(copy.foreign_key_constraints, key=lambda fk: str(fk.name or ""))
        ]
    tables.append(
        f"CREATE TABLE {_PLACEHOLDER}.{META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    )
    tables.append(
        f"CREATE TABLE {_PLACEHOLDER}.{VERSION_TABLE} (version_num VARCHAR(32) NOT NULL, "
        f"CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"
    )
    tables += _step_log_tables()
    tables.append(
        f"CREATE TABLE {_PLACEHOLDER}.{SEED_TABLE} (tbl TEXT PRIMARY KEY, rows JSON NOT NULL)"
    )
    logged = step_logged(metadata)
    ddl = Ddl(
        ";\n".join(tables),
        ";\n".join(indexes),
        fks,
        ";\n".join(_step_trigger(t, key) for t, key in logged.items()),
        {t: [c.name for c in metadata.tables[t].columns] for t in logged},
    )
    _ddl_cache[id(metadata)] = (metadata, ddl)
    return ddl


def _step_log_tables() -> list[str]:
    """The step log's tables, as SQLite's (app/storage/steplog.py); values as JSON."""
    p = _PLACEHOLDER
    return [
        f"CREATE TABLE {p}.{STEPS_TABLE} (idx INTEGER PRIMARY KEY, tool TEXT NOT NULL, "
        "args TEXT NOT NULL, outcome TEXT NOT NULL, output TEXT, output_digest TEXT NOT NULL, "
        "output_bytes INTEGER NOT NULL, duration_ms DOUBLE PRECISION NOT NULL)",
        f"CREATE TABLE {p}.{STEP_ROWS_TABLE} (seq BIGSERIAL PRIMARY KEY, step INTEGER NOT NULL, "
        "tbl TEXT NOT NULL, op TEXT NOT NULL, old_rid BIGINT, new_rid BIGINT, old_vals JSON, "
        "new_vals JSON)",
        f"CREATE TABLE {p}.{STEP_COLS_TABLE} (tbl TEXT PRIMARY KEY, cols TEXT NOT NULL)",
    ]


def step_logged(metadata: MetaData) -> dict[str, str | None]:
    """Every table with a primary key -> its integer key column (the row identity the log
    records as old_rid/new_rid, SQLite's rowid), or None when the key is not one integer."""
    logged: dict[str, str | None] = {}
    for table in metadata.sorted_tables:
        pk = list(table.primary_key.columns)
        if not pk:
            continue  # no identity to undo by: left untracked (undo refused, as on SQLite)
        try:
            integer = len(pk) == 1 and pk[0].type.python_type is int
        except NotImplementedError:  # a custom type that does not say
            integer = False
        logged[table.name] = pk[0].name if integer else None
    return logged


# ONE trigger function per prefix, in `<prefix>_fn`, for every session, pooled and template schema
# (not one per schema: PostgreSQL keeps a compiled copy of each function a backend ran, and every
# schema rename, two per rollout, resets every cached plan of every backend, so hundreds of
# per-schema copies made each rename cost every backend a walk over all of them, and each seed
# re-created the function, a recompile in every backend; bench/history/rounds.md, round 7). A row
# change is logged as the step being run, max(idx) + 1, as on SQLite; the row images are
# row_to_json(OLD/NEW), PostgreSQL's own text of every value (read back exactly by
# json_populate_record). Where the row's schema is the transaction's search path (every session
# transaction pins it: make_engine) the INSERT names the log unqualified, a plan PostgreSQL
# caches and re-plans when the search path changes; anywhere else (a migration, a script) it is
# addressed by the row's own schema, dynamically: the log row always lands beside the row. No
# percent sign anywhere (quote_ident, not format()): psycopg reads each one as a placeholder.
# PL/pgSQL compiles a copy of the function per TRIGGER (its hash key holds the trigger's OID),
# and every expression it runs is a cached plan that each rename resets: so a quiet write
# (`stategym.quiet`: seeding, undo, recycling) does not call the function at all (the trigger's
# WHEN clause), and the function runs three expressions (IF, INSERT, RETURN), not eight. The
# body keeps the quiet test (the INSERT's HAVING) for triggers of older schemas, which lack the
# WHEN clause; an INSERT's OLD and a DELETE's NEW are NULL (PostgreSQL 11+), so is their JSON.
_LOUD = "current_setting('stategym.quiet', true) IS DISTINCT FROM 'on'"
_STEP_FUNCTION_BODY = f"""
BEGIN
  IF current_schema() = TG_TABLE_SCHEMA THEN
    INSERT INTO {STEP_ROWS_TABLE}(step, tbl, op, old_rid, new_rid, old_vals, new_vals)
    SELECT coalesce(max(idx), 0) + 1, TG_TABLE_NAME, lower(left(TG_OP, 1)),
           (row_to_json(OLD) ->> TG_ARGV[0])::bigint, (row_to_json(NEW) ->> TG_ARGV[0])::bigint,
           row_to_json(OLD), row_to_json(NEW)
    FROM {STEPS_TABLE} HAVING {_LOUD};
  ELSIF {_LOUD} THEN
    EXECUTE 'INSERT INTO ' || quote_ident(TG_TABLE_SCHEMA) || '.{STEP_ROWS_TABLE}(step, tbl, op, '
            'old_rid, new_rid, old_vals, new_vals) SELECT coalesce(max(idx), 0) + 1, $1, $2, '
            '$3, $4, $5, $6 FROM ' || quote_ident(TG_TABLE_SCHEMA) || '.{STEPS_TABLE}'
    USING TG_TABLE_NAME, lower(left(TG_OP, 1)), (row_to_json(OLD) ->> TG_ARGV[0])::bigint,
          (row_to_json(NEW) ->> TG_ARGV[0])::bigint, row_to_json(OLD), row_to_json(NEW);
  END IF;
  RETURN NULL;
END
"""
_OWNED_SCHEMA_RE = re.compile(r"^(?P<prefix>[a-z][a-z0-9_]*)_[spt]_[0-9a-f]{32}$")


def functions_schema(prefix: str) -> str:
    """The schema of the step log's trigger function for every schema under `prefix`."""
    return checked_schema(f"{checked_schema(prefix)}_fn")


def functions_schema_of(schema: str) -> str:
    """`functions_schema` of a session (`_s_`), pooled (`_p_`) or template (`_t_`) schema."""
    match = _OWNED_SCHEMA_RE.fullmatch(checked_schema(schema))
    if match is None:
        raise ValueError(f"not a StateGym session, pooled or template schema: {schema!r}")
    return functions_schema(match["prefix"])


def ensure_step_function(conn: Connection, prefix: str) -> None:
    """Create (or bring up to date) `<prefix>_fn` and the step log's trigger function in it, in
    `conn`'s transaction, under a lock (replicas start together). Changed only when its body
    differs: re-creating it makes every backend compile it again."""
    schema = functions_schema(prefix)
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({advisory_key(schema)})")
    current = conn.exec_driver_sql(
        "SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure(%(f)s)",
        {"f": f"{quoted(schema)}.{STEP_TRIGGER_FUNCTION}()"},
    ).scalar()
    if current == _STEP_FUNCTION_BODY:
        return
    conn.exec_driver_sql(
        f"CREATE SCHEMA IF NOT EXISTS {quoted(schema)};\n"
        f"CREATE OR REPLACE FUNCTION {quoted(schema)}.{STEP_TRIGGER_FUNCTION}() "
        f"RETURNS trigger LANGUAGE plpgsql AS $fn${_STEP_FUNCTION_BODY}$fn$"
    )


def legacy_step_function_sql(schema: str) -> str:
    """SQL that drops `schema`'s own trigger function (releases before round 7 made one per
    schema) and with it the triggers calling it: the caller re-creates them (`Ddl.triggers`)."""
    function = f"{quoted(checked_schema(schema))}.{STEP_TRIGGER_FUNCTION}()"
    return f"DROP FUNCTION IF EXISTS {function} CASCADE"


def step_trigger_name(table: str) -> str:
    return f"{STEP_PREFIX}{table}"


def _step_trigger(table: str, key: str | None) -> str:
    argument = f"'{quoted(key)[1:-1]}'" if key else ""
    return (
        f"CREATE TRIGGER {quoted(step_trigger_name(table))} AFTER INSERT OR UPDATE OR DELETE "
        f"ON {_PLACEHOLDER}.{quoted(table)} FOR EACH ROW WHEN ({_LOUD}) "
        f"EXECUTE FUNCTION {_FN_PLACEHOLDER}.{STEP_TRIGGER_FUNCTION}({argument})"
    )


def in_schema(sql: str, schema: str) -> str:
    """`sql` compiled with placeholders, pointed at `schema` (and the trigger function of its
    prefix: `functions_schema_of`, which must exist: `ensure_step_function`)."""
    if f"{_FN_PLACEHOLDER}." in sql:
        sql = sql.replace(f"{_FN_PLACEHOLDER}.", f"{quoted(functions_schema_of(schema))}.")
    return sql.replace(f"{_PLACEHOLDER}.", f"{quoted(checked_schema(schema))}.")


def serial_columns(metadata: MetaData) -> list[tuple[Table, str]]:
    """(table, column) of every integer key PostgreSQL fills from a sequence (SERIAL)."""
    found = []
    for table in metadata.sorted_tables:
        column = table.autoincrement_column
        if column is not None:
            found.append((table, column.name))
    return found


def clone_sql(
    metadata: MetaData,
    source: str,
    target: str,
    maxima: dict[str, int],
    *,
    step_log: bool = True,
    seed_rows: bool = True,
) -> str:
    """One script: create `target` like the models, copy every row of `source` (its step log
    too: empty in a template, a session's own in a fork; and its seed rows), align sequences,
    add the step triggers.

    Rows go in before the indexes are built and the foreign keys are added `NOT VALID` (they
    are enforced on every later write; the copied rows are a valid template's): measured ~2x
    faster than checking 6,500 retail rows one by one (docs/postgres.md). `maxima` is the
    largest id per SERIAL table in the source: sequences continue after it, as SQLite's rowid
    does, so a row a tool inserts gets the same id on both backends. `step_log=False` /
    `seed_rows=False`: a source schema of an older release has no step log / no seed rows
    table to copy.
    """
    src, dst = quoted(checked_schema(source)), quoted(checked_schema(target))
    ddl = schema_ddl(metadata)
    parts = [f"CREATE SCHEMA {dst}", in_schema(ddl.tables, target)]
    names = [quoted(t.name) for t in metadata.sorted_tables] + [META_TABLE, VERSION_TABLE]
    if step_log:
        names += STEP_LOG_TABLES
    if seed_rows:
        names.append(SEED_TABLE)
    parts += [f"INSERT INTO {dst}.{name} SELECT * FROM {src}.{name}" for name in names]
    parts.append(in_schema(ddl.indexes, target))
    parts += [in_schema(fk, target) + " NOT VALID" for fk in ddl.foreign_keys]
    for table, column in serial_columns(metadata):
        top = maxima.get(table.name)
        if top:
            parts.append(
                f"SELECT setval(pg_get_serial_sequence('{dst}.{quoted(table.name)}', "
                f"'{column}'), {int(top)})"
            )
    parts.append(step_rows_sequence_sql(target))
    if step_log:
        parts.append(in_schema(ddl.triggers, target))
    return ";\n".join(parts)


def step_rows_sequence_sql(schema: str) -> str:
    """The step log's row sequence continued after the rows copied in."""
    s = quoted(checked_schema(schema))
    return (
        f"SELECT setval(pg_get_serial_sequence('{s}.{STEP_ROWS_TABLE}', 'seq'), "
        f"coalesce((SELECT max(seq) FROM {s}.{STEP_ROWS_TABLE}), 0) + 1, false)"
    )


def has_table(conn: Connection, schema: str, table: str) -> bool:
    """Whether `schema` has `table` (a framework table an older release's schema may lack)."""
    name = f"{quoted(checked_schema(schema))}.{quoted(table)}"
    return bool(conn.exec_driver_sql("SELECT to_regclass(%(t)s) IS NOT NULL", {"t": name}).scalar())


def drop_schema_sql(schema: str) -> str:
    return f"DROP SCHEMA IF EXISTS {quoted(checked_schema(schema))} CASCADE"


def drop_schemas_sql(schemas: list[str]) -> str:
    names = ", ".join(quoted(checked_schema(schema)) for schema in schemas)
    return f"DROP SCHEMA IF EXISTS {names} CASCADE"


def advisory_key(text: str) -> int:
    """A signed 64-bit key for pg_advisory_xact_lock, stable across processes and hosts."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def results(conn: Connection, statements: list[str]) -> list[list[tuple[Any, ...]]]:
    """The rows of each of `statements` (no parameters: literals only), sent as ONE simple
    query on `conn`'s driver connection, in its transaction: one round trip for what would be
    one each. A statement that returns no rows gives []. Values are psycopg's own loads, as
    `exec_driver_sql` returns them. Raises psycopg.Error (the transaction is then aborted)."""
    assert conn.in_transaction(), "results() runs in the caller's transaction"
    raw = conn.connection.driver_connection
    assert raw is not None
    cursor = raw.execute(";\n".join(statements).encode())
    out: list[list[tuple[Any, ...]]] = []
    while True:
        out.append(list(cursor.fetchall()) if cursor.description is not None else [])
        if not cursor.nextset():
            return out


def run_script(conn: Connection, sql: str, params: Any = None) -> None:
    conn.exec_driver_sql(sql, params) if params else conn.exec_driver_sql(sql)


T = TypeVar("T")
# SQLSTATE 53200: PostgreSQL's shared lock table is full. It holds max_locks_per_transaction x
# max_connections locks for the whole server, and a template build or a clone takes one lock per
# table, index and sequence in one transaction: racing DDL from replicas (or parallel test
# workers) can fill it for a moment. Transient, so retried a few times with backoff.
LOCK_TABLE_FULL = "53200"
DDL_ATTEMPTS = 4


def retry_when_lock_table_full(ddl: Callable[[], T]) -> T:
    """Run `ddl` (one transaction of its own), again after a short wait when the lock table was
    full; the last attempt's error is raised."""
    for attempt in range(DDL_ATTEMPTS):
        try:
            return ddl()
        except OperationalError as exc:
            if (
                getattr(exc.orig, "sqlstate", None) != LOCK_TABLE_FULL
                or attempt == DDL_ATTEMPTS - 1
            ):
                raise
            time.sleep(0.25 * 2**attempt)
    raise AssertionError("unreachable")
