"""Template schema names, and dropping the templates no release will clone again.

A template schema is `<prefix>_t_<digest>`, digest = sha256 of the models' fingerprint, the
template layout and a snapshot key: `BASE_KEY`, the environment's base, is the one template
sessions are cloned from (releases before seed rows made one per task). Other models or a new
layout make new names. Templates no running model would clone are dropped when a store opens
and after `stategym migrate sessions`: every `<prefix>_t_%` (and pooled `<prefix>_p_%`) schema
whose meta says it is this environment's but whose name is not the current one, except those an
archive needs. Sessions (`_s_`), other environments' templates (deployments may share a prefix)
and schemas without a readable meta are never touched. With replicas on one prefix, run one
release at a time: an old replica still serving would find its templates gone.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Engine

from app.storage.postgres.archive import SessionArchive
from app.storage.postgres.db import META_TABLE, SchemaNames, advisory_key, drop_schema_sql, quoted
from app.storage.postgres.steplog import PG_STEP_LOG_VERSION

log = logging.getLogger("stategym.postgres")

# What a template schema holds beyond the models: part of its name, so a release that changes it
# builds new templates instead of cloning old ones ("steplog-pg1": the step log's tables,
# triggers and deferrable foreign keys; "seed1": the seed rows table, app/storage/postgres/
# seed_rows.py; "when1": step triggers skip quiet writes by their WHEN clause, postgres/db.py).
TEMPLATE_LAYOUT = f"steplog-{PG_STEP_LOG_VERSION}+seed1+when1"
# The snapshot key of the base template (its meta's `snapshot`): no task's (those are hex digests).
BASE_KEY = "base"


def template_name(names: SchemaNames, fingerprint: str, snapshot_key: str) -> str:
    """The template schema of a snapshot under the models of `fingerprint`, current layout."""
    return names.snapshot(f"{fingerprint}:{TEMPLATE_LAYOUT}", snapshot_key)


def _metas(engine: Engine, names: SchemaNames) -> list[tuple[str, dict[str, Any]]]:
    """(schema, meta) of every template and pooled schema under the prefix that has a meta."""
    p = names.prefix
    with engine.connect() as conn:
        found = [
            row[0]
            for row in conn.exec_driver_sql(
                "SELECT nspname FROM pg_namespace WHERE (nspname LIKE %(t)s OR nspname LIKE %(p)s) "
                f"AND to_regclass(quote_ident(nspname) || '.{META_TABLE}') IS NOT NULL "
                "ORDER BY nspname",
                {"t": f"{p}\\_t\\_%", "p": f"{p}\\_p\\_%"},
            )
        ]
        if not found:
            return []
        # One round trip for all of them.
        union = " UNION ALL ".join(
            f"SELECT {i}, (SELECT json_object_agg(key, value) FROM {quoted(n)}.{META_TABLE})"
            for i, n in enumerate(found)
        )
        metas = {i: meta or {} for i, meta in conn.exec_driver_sql(union)}
        conn.rollback()
    return [(name, metas.get(i, {})) for i, name in enumerate(found)]


def stale_templates(
    engine: Engine, names: SchemaNames, env_name: str, fingerprint: str
) -> list[str]:
    """This environment's template and pooled schemas the running models would not clone, but
    for templates an archived session needs to be read back (app/storage/postgres/archive.py)."""
    with engine.connect() as conn:
        archived = SessionArchive(engine, names).templates(conn)
    stale = []
    for schema, meta in _metas(engine, names):
        if meta.get("env") != env_name or schema in archived:
            continue  # another environment's (or not StateGym's): not ours to judge
        current = meta.get("template") == fingerprint and "snapshot" in meta
        if current and schema.startswith(f"{names.prefix}_t_"):
            current = schema == template_name(names, fingerprint, meta["snapshot"])
        elif current:  # pooled: a clone of a template, meta included
            current = meta.get("step_log") == PG_STEP_LOG_VERSION
        if not current:
            stale.append(schema)
    return stale


def drop_stale_templates(
    engine: Engine, names: SchemaNames, env_name: str, fingerprint: str
) -> list[str]:
    """Drop `stale_templates`, each in its own transaction under its build lock; their names."""
    dropped = stale_templates(engine, names, env_name, fingerprint)
    for schema in dropped:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({advisory_key(schema)})")
            conn.exec_driver_sql(drop_schema_sql(schema))
    if dropped:
        log.info("dropped %d template schemas of older models or layouts", len(dropped))
    return dropped
