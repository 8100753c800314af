"""Alembic on PostgreSQL session schemas: each schema carries its own `alembic_version`.

New schemas are stamped at the branch head (they copy their template's version row). A session
schema at an older revision of its environment's branch is upgraded when a worker opens it, and
`upgrade_sessions` upgrades every retained one in bulk; each schema in its own transaction
(PostgreSQL DDL is transactional: a failing migration leaves the schema as it was). An upgrade
to the head re-makes the schema's step-log triggers in that transaction, as a clone of the
models' template has them (tables a migration added or recreated included), and the migration's
own writes are no step. Any migration records the step the schema's log was at (no undo goes
back before it) and makes the foreign keys it created deferrable, as a clone's (app/storage/
postgres/step_triggers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, func, select, text

from app.errors import SessionUnavailable
from app.registry import load_environment
from app.storage.migrations import (
    _script,
    database_revision,
    head_revision,
    known_revisions,
    metadata_for,
)
from app.storage.postgres.archive import SessionArchive
from app.storage.postgres.db import (
    META_TABLE,
    VERSION_TABLE,
    SchemaNames,
    advisory_key,
    quoted,
    session_connection,
)
from app.storage.postgres.step_triggers import (
    QUIET,
    keeps_step_log,
    make_foreign_keys_deferrable,
    mark_migrated,
    remake_step_triggers,
)
from app.storage.postgres.templates import drop_stale_templates
from app.storage.sqlite.store import schema_fingerprint


def schema_revision(conn: Connection, schema: str) -> str | None:
    rows = conn.exec_driver_sql(f"SELECT version_num FROM {quoted(schema)}.{VERSION_TABLE}")
    return database_revision([r[0] for r in rows])


def revision_state(revision: str | None, target: str) -> str:
    """'current', 'older' (upgradable) or 'unknown' (newer, or another environment's)."""
    if revision == head_revision(target):
        return "current"
    if revision is not None and revision in known_revisions(target):
        return "older"
    return "unknown"


def migrate_schema(
    engine: Engine, schema: str, target: str, destination: str = "head", *, down: bool = False
) -> None:
    """Move one schema to `destination` in one transaction, its search path pinned; replicas
    opening the same session wait on its advisory lock and then find it current."""
    script = _script()
    destination = destination if "@" in destination else f"{target}@{destination}"

    def steps(revision: Any, _context: Any) -> Any:
        if down:
            return script._downgrade_revs(destination, revision)
        return script._upgrade_revs(destination, revision)

    with session_connection(engine, schema) as conn:
        context = MigrationContext.configure(
            connection=conn,
            opts={
                "fn": steps,
                "script": script,
                "render_as_batch": True,  # batch ops run as plain ALTERs on PostgreSQL
                "transactional_ddl": True,
                "target_metadata": metadata_for(target),
                "version_table_schema": schema,
            },
        )
        with Operations.context(context), context.begin_transaction():
            conn.execute(select(func.pg_advisory_xact_lock(advisory_key(schema))))
            revision, logged = schema_revision(conn, schema), keeps_step_log(conn, schema)
            if logged:  # the migration's own writes are no step (postgres/step_triggers.py)
                conn.exec_driver_sql(QUIET)
            context.run_migrations()
            moved = schema_revision(conn, schema)
            if moved == revision:
                return
            # Its rows now differ from its template's by more than its log (change tracking
            # reads it whole: app/storage/postgres/changes.py).
            conn.exec_driver_sql(
                f"INSERT INTO {quoted(schema)}.{META_TABLE} (key, value) VALUES ('migrated', "
                "%(v)s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                {"v": f"{revision} -> {moved}"},
            )
            make_foreign_keys_deferrable(conn, schema)  # as a clone's: an undo defers them
            if logged:  # the log's images so far predate the migration: no undo past them
                mark_migrated(conn, schema)
            # At the head, the models describe the schema: its step log as a clone's.
            if logged and moved == head_revision(target):
                remake_step_triggers(conn, schema, metadata_for(target))


def upgrade_schema(engine: Engine, schema: str, target: str) -> None:
    migrate_schema(engine, schema, target)


_UNREAD = object()


def ensure_current(engine: Engine, schema: str, target: str, revision: Any = _UNREAD) -> None:
    """Called when a worker opens a session: upgrade an older schema, refuse an unknown one.
    `revision`: the schema's, when the caller read it already."""
    if revision is _UNREAD:
        with engine.connect() as conn:
            revision = schema_revision(conn, schema)
    state = revision_state(revision, target)
    if state == "current":
        return
    if state == "unknown":
        raise SessionUnavailable(
            f"session schema {schema} is at revision {revision!r}, which this StateGym does "
            f"not know (its {target} head is {head_revision(target)!r})",
            hint="Open it with the StateGym version that made it.",
        )
    try:
        upgrade_schema(engine, schema, target)
    except Exception as exc:  # noqa: BLE001 - a failed migration left the schema as it was
        raise SessionUnavailable(
            f"session schema {schema} could not be upgraded to {target}@head: {exc}"
        ) from exc


@dataclass
class Outcome:
    schema: str
    status: str  # upgraded | current | would_upgrade | failed | archived
    detail: str = ""


def upgrade_sessions(
    engine: Engine, names: SchemaNames, target: str, *, dry_run: bool = False
) -> list[Outcome]:
    """Every retained session schema of `target`, each upgraded in its own transaction."""
    with engine.connect() as conn:
        schemas = [
            row[0]
            for row in conn.execute(
                text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :pattern ORDER BY 1"),
                {"pattern": names.session_pattern()},
            )
        ]
        envs = {}
        for schema in schemas:
            row = conn.exec_driver_sql(
                f"SELECT value FROM {quoted(schema)}._stategym_meta WHERE key = 'env'"
            ).first()
            envs[schema] = row[0] if row else None
    outcomes = []
    for schema in (s for s in schemas if envs[s] == target):
        with engine.connect() as conn:
            revision = schema_revision(conn, schema)
        state, step = revision_state(revision, target), f"{revision} -> {head_revision(target)}"
        if state == "current":
            outcomes.append(Outcome(schema, "current"))
        elif state == "unknown":
            outcomes.append(Outcome(schema, "failed", f"unknown revision {revision!r}"))
        elif dry_run:
            outcomes.append(Outcome(schema, "would_upgrade", step))
        else:
            try:
                upgrade_schema(engine, schema, target)
                outcomes.append(Outcome(schema, "upgraded", step))
            except Exception as exc:  # noqa: BLE001 - reported per schema, the others go on
                outcomes.append(Outcome(schema, "failed", str(exc).splitlines()[0]))
    return outcomes + _archived_behind(engine, names, target)


def _archived_behind(engine: Engine, names: SchemaNames, target: str) -> list[Outcome]:
    """Archived sessions of `target` (app/storage/postgres/archive.py) at another revision than
    the head: archives are not migrated, so they are reported, never counted as upgraded."""
    archive = SessionArchive(engine, names)
    with engine.connect() as conn:
        if not archive.exists(conn):
            return []
        rows = conn.exec_driver_sql(
            f"SELECT session_id, image::json -> 'tables' -> '{VERSION_TABLE}' "
            f"FROM {archive.table} WHERE env = %(env)s ORDER BY 1",
            {"env": target},
        ).all()
    head = head_revision(target)
    out = []
    for session_id, versions in rows:
        revision = versions[0]["version_num"] if versions else None
        if revision != head:
            out.append(
                Outcome(
                    names.session(session_id),
                    "archived",
                    f"archived at revision {revision}, not migrated: it reads back only on a "
                    "server running the models that wrote it",
                )
            )
    return out


def upgrade_retained_sessions(
    settings: Any, target: str, *, dry_run: bool = False
) -> list[Outcome]:
    """`stategym migrate sessions` on PostgreSQL: every retained session schema of `target`."""
    from app.storage.postgres.db import make_engine

    engine = make_engine(settings.database_url, pool_size=1)
    names = SchemaNames(settings.pg_schema_prefix)
    try:
        outcomes = upgrade_sessions(engine, names, target, dry_run=dry_run)
        if not dry_run:  # templates of the models before the migration are never cloned again
            fingerprint = schema_fingerprint(load_environment(target))
            drop_stale_templates(engine, names, target, fingerprint)
        return outcomes
    finally:
        engine.dispose()
