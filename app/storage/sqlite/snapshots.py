"""Building the images sessions are cloned from: an environment's template, and a task's snapshot.

A snapshot is a pure function of (template, task seed), so nothing of it need be kept on disk:
the template with the seed's rows upserted, the step log installed, and in its meta the rows the
seed wrote (`seed_changes`: verify dumps a snapshot by patching its template's dump). It is
cloned by `deserialize` from one *seed base* per template and process (step log and triggers
already installed, `mark_log_tracked`), never made by DDL per task; the seed is upserted through
the process's shared engine; the step log's triggers record the seed's rows (read by
app/storage/log_changes.py), then the log is emptied. `snapshot_image_by_tracking` builds with
change-tracking triggers instead: for the task generator's bases, and as the reference of
tests/storage/test_cold_snapshots.py. Costs: docs/performance.md ("Cold path").
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import threading
from datetime import datetime
from typing import Any

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.orm import Session
from sqlalchemy.schema import CreateIndex, CreateTable

from app.core.lru import LRU
from app.sdk.environment import Environment
from app.storage.log_changes import changes_from_log, mark_log_tracked
from app.storage.meta import (
    SEED_CHANGES,
    drop_change_tracking,
    foreign_key_guarded,
    install_change_tracking,
    read_meta,
    seed_changes_value,
    take_changes,
    write_meta,
)
from app.storage.migrations import stamp_new_database
from app.storage.seeding import apply_seed
from app.storage.sqlite import db as sqlite_db
from app.storage.step_triggers import step_logged_tables
from app.storage.steplog import STEP_ROWS_TABLE, install_step_log

# Template images built in this process, by (environment, fingerprint). A template is a pure
# function of what the fingerprint covers, so a second Store on another data dir (a CLI check, the
# task generator, every test's fresh data dir) writes a copy instead of building it again (~1 s).
_built_templates: dict[tuple[str, str], bytes] = {}
# Seed bases (the template with the step log installed), by (environment, digest of the
# template image): one per template in use, ~the size of the template.
_seed_bases: dict[tuple[str, bytes], bytes] = {}
_bases_lock = threading.Lock()
# The same, by the template object a Store keeps (hashing 0.8 MB per snapshot cost ~1 ms); the
# entry holds the template, so its id is never reused while the entry lives. Bounded: inspection
# makes a Store (and loads a template object) per request.
_bases_by_object: LRU[int, tuple[bytes, bytes]] = LRU(8)


def schema_fingerprint(env: Environment) -> str:
    """Changes when the schema, the base data builder (its source, or `data_version`) or its
    seed change."""
    dialect = sqlite_dialect.dialect()
    ddl = []
    for table in env.metadata.sorted_tables:
        ddl.append(str(CreateTable(table).compile(dialect=dialect)))
        # table.indexes is a set: sort it, or the fingerprint changes from process to process.
        indexes = sorted(table.indexes, key=lambda ix: ix.name or "")
        ddl.extend(str(CreateIndex(ix).compile(dialect=dialect)) for ix in indexes)
    base = [env.name, env.data_version, env.base_data_digest(), str(env.base_seed)]
    text = "\n".join([*base, *ddl])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def template_image(env: Environment) -> bytes:
    """The environment's template image (schema, base data, meta, migration stamp), built in
    memory once per process and fingerprint (~1 s); a Store keeps it on disk too."""
    key = (env.name, schema_fingerprint(env))
    built = _built_templates.get(key)
    if built is None:
        conn = sqlite_db.open_memory()
        engine = sqlite_db.bind_engine(conn)
        env.metadata.create_all(engine)
        with Session(bind=engine) as db, db.begin():
            env.build_base(db, random.Random(env.base_seed))
        write_meta(conn, {"env": env.name, "template": key[1]})
        stamp_new_database(conn, env.name)  # sessions record the revision they start at
        built = _built_templates[key] = sqlite_db.image_of(conn)
        engine.dispose()
        conn.close()
    return built


def seed_base(env: Environment, template: bytes) -> bytes:
    """`template` with the step log installed and marked as the change record: what every
    snapshot of it starts from (built once per process and template, ~30 ms)."""
    with _bases_lock:
        known = _bases_by_object.get(id(template))
    if known is not None and known[0] is template:  # the same template object: no hashing
        return known[1]
    key = (env.name, hashlib.blake2b(template, digest_size=16).digest())
    base = _seed_bases.get(key)
    if base is not None:
        with _bases_lock:
            _bases_by_object.put(id(template), (template, base))
        return base
    with _bases_lock:
        base = _seed_bases.get(key)
        if base is None:
            conn = sqlite_db.memory_from_image(template)
            try:
                _install_step_log(conn, env)
                base = _seed_bases[key] = sqlite_db.image_of(conn)
            finally:
                conn.close()
        _bases_by_object.put(id(template), (template, base))
    return base


def snapshot_image(
    env: Environment,
    template: bytes,
    seed: Any,
    key: str,
    now: datetime,
    *,
    step_log: bool = True,
) -> bytes:
    """A snapshot's image, built in memory from the template's seed base (module docstring).
    Without `step_log` (the task generator's base), the change-tracking triggers stay instead."""
    if not step_log:
        return snapshot_image_by_tracking(env, template, seed, key, now, step_log=False)
    image, conn = built_snapshot(env, template, seed, key, now)
    conn.close()
    return image


def seed_base_clone(env: Environment, template: bytes) -> sqlite3.Connection:
    """A clone of `template`'s seed base with its schema parsed (retail: 0.13 ms of
    `deserialize`, ~0.8 ms of parse): made ahead of a never-seen task, it takes both off the
    task's first seed (`built_snapshot`'s `base`). Nothing is written: the clone's image is the
    seed base's."""
    conn = sqlite_db.memory_from_image(seed_base(env, template))
    conn.execute("SELECT 1 FROM sqlite_master LIMIT 0").fetchall()  # parses the schema
    return conn


def built_snapshot(
    env: Environment,
    template: bytes,
    seed: Any,
    key: str,
    now: datetime,
    *,
    base: sqlite3.Connection | None = None,
) -> tuple[bytes, sqlite3.Connection]:
    """`snapshot_image`, and the in-memory connection that built it: it holds exactly the image
    and is configured as `memory_from_image`'s are, its schema already parsed (~1.2 ms of a
    retail clone), so the task's seed state and gold can run on it. The caller closes it.
    `base`, when given, is an unused `seed_base_clone(env, template)` to build on (taken over:
    closed here on failure)."""
    conn = base if base is not None else sqlite_db.memory_from_image(seed_base(env, template))
    bind = sqlite_db.bind_connection(conn)
    try:
        with Session(bind=bind) as db, db.begin():
            apply_seed(db, env.metadata, seed)
        write_meta(conn, {"snapshot": key, "now": now.isoformat()})
        # The rows the seed wrote, as the step log recorded them (read as a session's changes
        # are), then the log emptied: the snapshot's sessions start at step 0.
        seeded = changes_from_log(conn, read_meta(conn), list(env.metadata.tables))
        if seeded is None:  # never expected: the base is built with every table's triggers
            raise RuntimeError(f"{env.name}: the seed base's step log is not in place")
        rows = {t: sorted(ids) for t, ids in sorted((seeded.rows or {}).items())}
        conn.execute(f"DELETE FROM {STEP_ROWS_TABLE}")
        write_meta(conn, {SEED_CHANGES: seed_changes_value(sorted(seeded.tables), rows)})
        image = sqlite_db.image_of(conn)
    except BaseException:
        bind.close()
        conn.close()
        raise
    bind.close()
    return image, conn


def snapshot_image_by_tracking(
    env: Environment,
    template: bytes,
    seed: Any,
    key: str,
    now: datetime,
    *,
    step_log: bool = True,
) -> bytes:
    """The previous build: `template` + the change-tracking triggers, the seed, then (with
    `step_log`) the triggers dropped and the step log installed."""
    conn = sqlite_db.memory_from_image(template)
    engine = sqlite_db.bind_engine(conn)
    try:
        # Tracking starts before the seed, so the rows the seed writes are known (verify dumps
        # the snapshot by patching the template's dump with them); the record is then cleared
        # and sessions record what they write from the snapshot on.
        install_change_tracking(
            conn,
            reference_keys(env),
            guarded=foreign_key_guarded(env.metadata, env.compare),
            without_rowid=_without_rowid(env),
        )
        with Session(bind=engine) as db, db.begin():
            apply_seed(db, env.metadata, seed)
        seeded = seed_changes_value(*take_changes(conn))
        write_meta(conn, {"snapshot": key, "now": now.isoformat(), SEED_CHANGES: seeded})
        if step_log:  # every tool call's row changes, before and after (app/storage/steplog.py)
            # ... which is all change tracking needs: its own triggers go (app/storage/
            # log_changes.py), and with them ~190 KB of every open connection.
            drop_change_tracking(conn)
            _install_step_log(conn, env)
        return sqlite_db.image_of(conn)
    finally:
        engine.dispose()
        conn.close()


def _install_step_log(conn: sqlite3.Connection, env: Environment) -> None:
    """The step log on every table, marked as what the database's changes are read from."""
    install_step_log(conn, step_logged_tables(env.metadata))
    mark_log_tracked(conn, reference_keys(env), foreign_key_guarded(env.metadata, env.compare))


def reference_keys(env: Environment) -> dict[str, list[str]]:
    """Per table, the columns a reference to it resolves by (surrogate id, natural key)."""
    keys = {}
    for table in env.metadata.sorted_tables:
        natural = env.compare.for_table(table.name).key
        keys[table.name] = [c.name for c in table.primary_key.columns] + list(natural)
    return keys


def _without_rowid(env: Environment) -> set[str]:
    return {
        t.name
        for t in env.metadata.sorted_tables
        if t.dialect_options["sqlite"].get("with_rowid", True) is False
    }
