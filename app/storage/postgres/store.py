"""The base template and session schemas on PostgreSQL.

An environment's base (its template image: schema and base data) is built once per database and
models as a template schema `<prefix>_t_<digest>`, copying the image's rows. A session is a
clone of it (a pooled one renamed, app/storage/postgres/pool.py, else one script: `CREATE
SCHEMA`, the DDL, `INSERT ... SELECT`, `setval`, the step triggers; docs/postgres.md) with its
task's seed rows written over it in the same transaction (app/storage/postgres/seed_rows.py):
no schema per task, so distinct tasks never grow the catalog. Gold replays and seed dumps run
on the SQLite snapshot images the seed rows come from. A fork clones the parent's schema (step
log included), rewound in that transaction when it is as of an earlier step; a restore fills a
new schema from an export (app/storage/postgres/steplog.py).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, func, select, text
from sqlalchemy.exc import ProgrammingError

from app.core.lru import LRU
from app.core.tasks import TaskSpec
from app.errors import CannotRewind, SessionNotFound
from app.sdk.environment import Environment
from app.storage.meta import read_meta
from app.storage.migrations import head_revision
from app.storage.postgres.archive import SessionArchive
from app.storage.postgres.changes import PgChangeReader
from app.storage.postgres.db import (
    META_TABLE,
    SCRIPTED_BEGIN,
    SEED_TABLE,
    VERSION_TABLE,
    SchemaNames,
    advisory_key,
    checked_schema,
    clone_sql,
    drop_schema_sql,
    ensure_step_function,
    has_table,
    in_schema,
    quoted,
    retry_when_lock_table_full,
    schema_ddl,
    serial_columns,
    step_rows_sequence_sql,
)
from app.storage.postgres.pool import SchemaPool
from app.storage.postgres.recycle import recycle
from app.storage.postgres.seed_rows import KEPT_META, SeedRows, seed_rows_of, seed_script
from app.storage.postgres.steplog import PG_STEP_LOG_VERSION, PgStepLog, restore_statements
from app.storage.postgres.templates import BASE_KEY, drop_stale_templates, template_name
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Snapshot, Store
from app.storage.steplog import STEP_COLS_TABLE, UndoUnavailable, check_step

log = logging.getLogger("stategym.postgres")
# Snapshots whose seed rows a process keeps (a few KB each; a GRPO group reads them 8 times).
SEED_ROWS_CACHE = 256
SEED_ROWS_CACHE_BYTES = 64 * 2**20


class PgStore:
    """One base template schema per environment and models, and one schema per session."""

    def __init__(
        self,
        sqlite_store: Store,
        engine: Engine,
        names: SchemaNames,
        *,
        schema_pool: int = 0,
        archive_closed: bool = False,
    ):
        self.sqlite = sqlite_store  # snapshot images: the source of templates and gold replays
        self.env: Environment = sqlite_store.env
        self.engine = engine
        self.names = names
        self._maxima: dict[str, dict[str, int]] = {}  # template schema -> SERIAL maxima
        self._counts: dict[str, dict[str, int]] = {}  # template schema -> rows per table
        self._lock = threading.Lock()
        # snapshot key -> (its image, its seed rows)
        self._seeds: LRU[str, tuple[bytes, SeedRows]] = LRU(
            SEED_ROWS_CACHE, max_bytes=SEED_ROWS_CACHE_BYTES, size_of=lambda e: e[1].size
        )
        # Pre-cloned schemas of the base template (app/storage/postgres/pool.py); 0: off.
        # What a session schema changed since it was seeded (verify, recycling).
        self.changes = PgChangeReader(
            self.env.metadata, self.env.compare, self.template_of, self.base_schema
        )
        self.pool: SchemaPool | None = None
        # Kept sessions closed into archives (app/storage/postgres/archive.py).
        self.archive = SessionArchive(engine, names)
        self.archive_closed = archive_closed
        with engine.begin() as conn:  # what every step-log trigger calls (postgres/db.py)
            ensure_step_function(conn, names.prefix)
        if archive_closed:
            self.archive.ensure()
        # Templates (and pooled clones) of older models or layouts: never cloned again.
        drop_stale_templates(engine, names, self.env.name, self.fingerprint)
        if schema_pool > 0:
            self.pool = SchemaPool(engine, names.prefix, schema_pool, self._clone)
            self.pool.sweep()  # pooled schemas a crashed process left behind

    def dispose(self) -> None:
        if self.pool is not None:
            self.pool.dispose()

    @property
    def data_dir(self):  # noqa: ANN201 - GoldCache and inspection read it
        return self.sqlite.data_dir

    @property
    def fingerprint(self) -> str:
        return self.sqlite.fingerprint

    def snapshot(self, task: TaskSpec) -> Snapshot:
        return self.sqlite.snapshot(task)

    def template_image(self) -> bytes:
        return self.sqlite.template_image()

    @property
    def base_schema(self) -> str:
        """The environment's base template schema: what every session is cloned from."""
        return template_name(self.names, self.fingerprint, BASE_KEY)

    def template_schema(self, snapshot: Snapshot) -> str:
        """The name change tracking gives `snapshot`'s seeded state (`template_of`); no schema
        of that name is made (`reference_template` makes one, for tests)."""
        return template_name(self.names, self.fingerprint, snapshot.key)

    def template_of(self, fingerprint: str | None, snapshot_key: str | None) -> str | None:
        """The name of the seeded state a session of `snapshot_key` (its meta) started from, if
        it was seeded under the running models (`fingerprint` = theirs), else None."""
        if fingerprint != self.fingerprint or snapshot_key is None:
            return None
        return template_name(self.names, self.fingerprint, snapshot_key)

    # --- the base template ---------------------------------------------------------------------
    def ensure_base(self) -> tuple[str, dict[str, int]]:
        """The base template schema (built on first use) and its SERIAL maxima."""
        schema = self.base_schema
        maxima = self._maxima.get(schema)
        if maxima is None:
            with self._lock:
                maxima = self._maxima.get(schema)
                if maxima is None:
                    meta = {"snapshot": BASE_KEY}
                    image = self.template_image()
                    maxima = retry_when_lock_table_full(
                        lambda: self._build_template(schema, image, meta)
                    )
                    self._maxima[schema] = maxima
        return schema, maxima

    def reference_template(self, snapshot: Snapshot) -> str:
        """The previous build, kept as the reference of tests/storage/test_pg_seed_rows.py: a
        template schema per task, every row copied from the snapshot's image (dropped by the
        caller)."""
        schema = self.template_schema(snapshot)
        maxima = self._build_template(schema, snapshot.image, {})
        self._maxima[schema] = maxima
        return schema

    def template_facts(
        self, conn: Connection, template: str
    ) -> tuple[dict[str, int], dict[str, int]]:
        """The template's SERIAL maxima and row count per table, read once per process (a
        template never changes once built): what recycling resets a schema to and checks."""
        counts = self._counts.get(template)
        if counts is None:
            tables = list(self.env.metadata.tables)
            t = quoted(template)
            found = ", ".join(f"(SELECT count(*) FROM {t}.{quoted(n)})" for n in tables)
            counts = dict(zip(tables, conn.exec_driver_sql(f"SELECT {found}").one(), strict=True))
            self._counts[template] = counts
        maxima = self._maxima.get(template)
        if maxima is None:
            maxima = self._read_maxima(conn, template)
        return maxima, counts

    def _build_template(self, schema: str, image: bytes, meta: dict[str, str]) -> dict[str, int]:
        """A template schema holding every row of `image` (its meta's kept keys, and `meta`)."""
        with self.engine.begin() as conn:
            # One builder per template across every replica; the others wait, then reuse it.
            conn.execute(select(func.pg_advisory_xact_lock(advisory_key(schema))))
            exists = conn.execute(
                text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema}
            ).first()
            if not exists:
                ddl = schema_ddl(self.env.metadata)
                conn.exec_driver_sql(f"CREATE SCHEMA {quoted(schema)}")
                conn.exec_driver_sql(in_schema(ddl.full, schema))
                self._copy_rows(conn, schema, image, meta)
                cols_table = f"{quoted(schema)}.{STEP_COLS_TABLE}"
                conn.execute(
                    text(f"INSERT INTO {cols_table} (tbl, cols) VALUES (:t, :c)"),
                    [{"t": t, "c": ",".join(cols)} for t, cols in ddl.step_cols.items()],
                )
                # After the rows: copying the seed is no step.
                conn.exec_driver_sql(in_schema(ddl.triggers, schema))
            return self._read_maxima(conn, schema)

    def _copy_rows(self, conn: Any, schema: str, image: bytes, extra: dict[str, str]) -> None:
        source = sqlite_db.memory_from_image(image)
        engine = sqlite_db.bind_engine(source, begin="BEGIN")
        try:
            # COPY through the transaction's own psycopg connection: ~10x an executemany INSERT.
            raw = conn.connection.driver_connection
            with engine.connect() as lite, raw.cursor() as cursor:
                for table in self.env.metadata.sorted_tables:
                    columns = ", ".join(quoted(c.name) for c in table.columns)
                    sql = f"COPY {quoted(schema)}.{quoted(table.name)} ({columns}) FROM STDIN"
                    with cursor.copy(sql) as copy:
                        for row in lite.execute(select(table)):
                            copy.write_row(tuple(row))
            meta = read_meta(source)
        finally:
            engine.dispose()
            source.close()
        keep: dict[str, str] = {k: meta[k] for k in KEPT_META if k in meta}
        keep.setdefault("env", self.env.name)
        keep.update(extra)
        keep["step_log"] = PG_STEP_LOG_VERSION
        conn.execute(
            text(f"INSERT INTO {quoted(schema)}.{META_TABLE} (key, value) VALUES (:k, :v)"),
            [{"k": k, "v": v} for k, v in keep.items()],
        )
        head = head_revision(self.env.name)
        if head is not None:  # new schemas are stamped at the branch head, like SQLite files
            conn.execute(
                text(f"INSERT INTO {quoted(schema)}.{VERSION_TABLE} (version_num) VALUES (:v)"),
                {"v": head},
            )

    def _read_maxima(self, conn: Connection, schema: str) -> dict[str, int]:
        maxima = {}
        for table, column in serial_columns(self.env.metadata):
            top = conn.exec_driver_sql(
                f"SELECT max({quoted(column)}) FROM {quoted(schema)}.{quoted(table.name)}"
            ).scalar()
            if top:
                maxima[table.name] = int(top)
        return maxima

    # --- sessions --------------------------------------------------------------------------------
    def seed_rows(self, snapshot: Snapshot) -> SeedRows:
        """The rows `snapshot` holds over the base template (app/storage/postgres/seed_rows.py),
        read from its image once per process while it stays in a bounded cache."""
        with self._lock:
            cached = self._seeds.get(snapshot.key)
        if cached is not None and cached[0] is snapshot.image:
            return cached[1]
        rows = seed_rows_of(snapshot.image, self.env.metadata, self.env.name, PG_STEP_LOG_VERSION)
        with self._lock:
            self._seeds.put(snapshot.key, (snapshot.image, rows))
        return rows

    def create_session(self, session_id: str, snapshot: Snapshot) -> str:
        """The session's schema: a clone of the base template (a pooled one renamed, else one
        cloned now) and the snapshot's seed rows written over it, in ONE transaction (a crash
        leaves no half-seeded schema); returns the schema name."""
        base, maxima = self.ensure_base()
        seed = self.seed_rows(snapshot)
        target = self.names.session(session_id)
        if self.pool is not None:
            pooled = self.pool.take(base)
            if pooled is not None and self._seed_pooled(base, pooled, target, seed):
                return target  # ~ms: a rename and a few upserts instead of a clone

        def clone_and_seed() -> None:
            with self.engine.begin() as conn:
                conn.exec_driver_sql(clone_sql(self.env.metadata, base, target, maxima))
                self._write_seed(conn, target, seed)

        retry_when_lock_table_full(clone_and_seed)
        return target

    def _seed_pooled(self, base: str, pooled: str, target: str, seed: SeedRows) -> bool:
        """Rename pooled schema `pooled` to `target` and seed it; False (the caller clones) when
        the pooled schema is gone. A seed PostgreSQL refuses raises, the pooled schema intact.
        One round trip: BEGIN, the rename, the seed script and COMMIT sent as one script."""
        assert self.pool is not None
        rename = f"ALTER SCHEMA {quoted(checked_schema(pooled))} RENAME TO {quoted(target)}"
        with self.engine.connect() as conn:
            conn.execution_options(**{SCRIPTED_BEGIN: True})
            transaction = conn.begin()  # sends nothing: the script begins and commits
            raw = conn.connection.driver_connection
            assert raw is not None
            script = seed_script(raw, target, self.env.metadata, seed)
            try:
                raw.execute(f"BEGIN;\n{rename};\n{script};\nCOMMIT".encode())
                transaction.commit()
            except (psycopg.errors.InvalidSchemaName, psycopg.errors.DuplicateSchema) as exc:
                # The rename: dropped by a replica's start-up sweep, or the target exists.
                transaction.rollback()
                log.warning("pooled schema %s not usable (%s); cloning", pooled, exc)
                self.pool.drop_quietly(pooled)
                return False
            except BaseException:
                if transaction.is_active:
                    transaction.rollback()
                if not self.pool.put(base, pooled):  # untouched: back in the pool
                    self.pool.drop_quietly(pooled)
                raise
        return True

    def _write_seed(self, conn: Connection, schema: str, seed: SeedRows) -> None:
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute(seed_script(raw, schema, self.env.metadata, seed).encode())

    def _clone(self, source: str, target: str) -> None:
        with self.engine.begin() as conn:
            conn.exec_driver_sql(clone_sql(self.env.metadata, source, target, self._maxima[source]))

    def clone_session(
        self, source_schema: str, session_id: str, at_step: int | None = None
    ) -> tuple[str, int]:
        """A new session schema holding a copy of another session's (a fork), as of step
        `at_step` (None: its current state); returns (the schema, the step copied). One
        transaction holding the source's advisory lock, so no call of it is half-seen."""
        target = self.names.session(session_id)
        tables = list(self.env.metadata.tables)
        with self.engine.begin() as conn:
            conn.execute(select(func.pg_advisory_xact_lock(advisory_key(source_schema))))
            source = PgStepLog(conn, source_schema, self.env.metadata)
            logged = source.version() == PG_STEP_LOG_VERSION
            step = 0
            if at_step is not None and not logged:
                raise CannotRewind("this session keeps no step log: it forks as it is only")
            if logged:
                step = (
                    check_step(source, at_step, tables) if at_step is not None else source.count()
                )
            maxima = self._read_maxima(conn, source_schema)
            seeded = has_table(conn, source_schema, SEED_TABLE)  # none in an older release's
            script = clone_sql(
                self.env.metadata, source_schema, target, maxima, step_log=logged, seed_rows=seeded
            )
            conn.exec_driver_sql(script)
            if logged and at_step is not None and at_step < step:
                try:
                    PgStepLog(conn, target, self.env.metadata).undo_to(at_step, sequences=True)
                except UndoUnavailable as exc:  # the clone is rolled back with it
                    raise CannotRewind(
                        f"a fork as of step {at_step} failed and was rolled back: {exc}"
                    ) from exc
                step = at_step
        return target, step

    def restore_session(self, session_id: str, image: bytes) -> str:
        """A new session schema filled from an export (`export_schema`), in one transaction."""
        target = self.names.session(session_id)
        ddl = schema_ddl(self.env.metadata)
        with self.engine.begin() as conn:
            conn.exec_driver_sql(
                f"CREATE SCHEMA {quoted(target)};\n" + in_schema(ddl.tables, target)
            )
            for statement, params in restore_statements(image, target, self.env.metadata):
                conn.exec_driver_sql(statement, params)
            script = [in_schema(ddl.indexes, target)]
            if SEED_TABLE not in json.loads(image)["tables"]:  # an older release's export:
                script.append(f"DROP TABLE {quoted(target)}.{SEED_TABLE}")  # never recycled
            script += [in_schema(fk, target) + " NOT VALID" for fk in ddl.foreign_keys]
            script += [step_rows_sequence_sql(target), in_schema(ddl.triggers, target)]
            conn.exec_driver_sql(";\n".join(script))
        return target

    def session_exists(self, session_id: str) -> bool:
        schema = self.names.session(session_id)
        with self.engine.connect() as conn:
            row = conn.execute(
                text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema}
            ).first()
        return row is not None

    def read_meta(self, session_id: str) -> dict[str, str]:
        schema = self.names.session(session_id)
        if not self.session_exists(session_id):
            raise SessionNotFound(
                f"session {session_id} has no schema (deleted by retention?)",
                hint="Start a new rollout with POST /seed_session.",
            )
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT key, value FROM {quoted(schema)}.{META_TABLE}"
            ).fetchall()
        return dict(rows)

    def open_meta(self, session_id: str) -> tuple[dict[str, str], str | None]:
        """The session's meta and its schema's revision, in one round trip (a seed's first call
        opens it); SessionNotFound when the schema is gone."""
        s = quoted(self.names.session(session_id))
        try:
            with self.engine.connect() as conn:
                meta, revision = conn.exec_driver_sql(
                    f"SELECT (SELECT json_object_agg(key, value) FROM {s}.{META_TABLE}), "
                    f"(SELECT version_num FROM {s}.{VERSION_TABLE} LIMIT 1)"
                ).one()
        except ProgrammingError:
            if self.session_exists(session_id):
                raise
            self.read_meta(session_id)  # raises SessionNotFound, with the usual hint
            raise
        return dict(meta or {}), revision

    def write_status(self, conn: Any, session_id: str, status: str) -> None:
        schema = quoted(self.names.session(session_id))
        conn.execute(
            text(
                f"INSERT INTO {schema}.{META_TABLE} (key, value) VALUES ('status', :v) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            {"v": status},
        )

    def recycle_session(self, session_id: str) -> bool:
        """A deleted session's schema reset to the base template into the pool instead of
        dropped, when the pool has room (app/storage/postgres/recycle.py); False: drop it."""
        if self.pool is None:
            return False
        schema = self.names.session(session_id)
        base, _ = self.ensure_base()
        return recycle(
            self.engine,
            schema,
            self.env.metadata,
            self.changes,
            self.pool,
            self.template_facts,
            base,
        )

    def archive_session(self, session_id: str) -> bool:
        """A kept session, closing: archived as its step log and its schema reset into the pool,
        when the pool has room (app/storage/postgres/archive.py); False: nothing changed (the
        caller keeps the schema)."""
        if self.pool is None:
            return False
        schema = self.names.session(session_id)
        base, _ = self.ensure_base()

        def archive(conn: Connection, template: str) -> list[str]:
            status = (  # the status first: the archive holds the session closed
                f"INSERT INTO {quoted(schema)}.{META_TABLE} (key, value) VALUES ('status', "
                "'closed') ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            )
            return [
                status,
                *self.archive.put_sql(
                    conn,
                    session_id=session_id,
                    env=self.env.name,
                    schema=schema,
                    template=template,
                    metadata=self.env.metadata,
                ),
            ]

        return recycle(
            self.engine,
            schema,
            self.env.metadata,
            self.changes,
            self.pool,
            self.template_facts,
            base,
            before_reset=archive,
        )

    def drop_session(self, session_id: str) -> None:
        with self.engine.begin() as conn:
            conn.exec_driver_sql(drop_schema_sql(self.names.session(session_id)))
