"""Template schemas of older models or layouts are dropped when a store opens and after
`stategym migrate sessions`; current templates, sessions and other environments' survive."""

from __future__ import annotations

import json
import secrets

from sqlalchemy import create_engine

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.backend import sync_pg_url
from app.storage.postgres.migrate import upgrade_retained_sessions
from tests.conftest import PG_URL, backend_settings
from tests.support.rollouts import load_tasks


def _schemas(prefix: str) -> set[str]:
    engine = create_engine(sync_pg_url(PG_URL))
    try:
        with engine.connect() as conn:
            return {
                row[0]
                for row in conn.exec_driver_sql(
                    "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "\\_%",)
                )
            }
    finally:
        engine.dispose()


def _fake_template(prefix: str, kind: str, meta: dict[str, str]) -> str:
    """A schema shaped like a template or pooled clone of some release: a meta table only."""
    name = f"{prefix}_{kind}_{secrets.token_hex(16)}"
    engine = create_engine(sync_pg_url(PG_URL))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
            conn.exec_driver_sql(
                f'CREATE TABLE "{name}"._stategym_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)'
            )
            conn.exec_driver_sql(f'CREATE TABLE "{name}".orders (id INTEGER PRIMARY KEY)')
            for key, value in meta.items():
                conn.exec_driver_sql(
                    f'INSERT INTO "{name}"._stategym_meta VALUES (%s, %s)', (key, value)
                )
    finally:
        engine.dispose()
    return name


async def test_old_templates_are_dropped_at_start_and_after_migrate(tmp_path, pg_prefix):
    env = load_environment("retail")
    settings = backend_settings("postgres", tmp_path, pg_prefix)
    task = load_tasks(load_environment("retail").tasks_path)[0]
    manager = SessionManager(settings, env)
    try:
        session_id = (await manager.seed(parse_seed_body(task))).session_id
        store = manager.backend.store
        current = store.base_schema
        fingerprint = store.fingerprint
    finally:
        await manager.aclose()
    session = manager.backend.names.session(session_id)
    snapshot_key = json.dumps("any")
    old_model = _fake_template(
        pg_prefix, "t", {"env": "retail", "template": "0ld", "snapshot": snapshot_key}
    )
    # The models of today, the layout of an older release (no step log): another name.
    old_layout = _fake_template(
        pg_prefix, "t", {"env": "retail", "template": fingerprint, "snapshot": snapshot_key}
    )
    old_pooled = _fake_template(pg_prefix, "p", {"env": "retail", "template": "0ld"})
    other_env = _fake_template(
        pg_prefix, "t", {"env": "airline", "template": "0ld", "snapshot": snapshot_key}
    )
    assert {current, session, old_model, old_layout, old_pooled, other_env} <= _schemas(pg_prefix)

    manager = SessionManager(settings, env)  # a server starting: its store opens
    try:
        left = _schemas(pg_prefix)
        assert not {old_model, old_layout, old_pooled} & left
        assert {current, session, other_env} <= left
        # The session still works, the base template too.
        out = await manager.verify(session_id, {**task, "response": {"output": []}})
        assert "reward" in out
        second = (await manager.seed(parse_seed_body(task))).session_id
        assert manager.backend.names.session(second) in _schemas(pg_prefix)
    finally:
        await manager.aclose()

    after_migration = _fake_template(
        pg_prefix, "t", {"env": "retail", "template": "0ld", "snapshot": snapshot_key}
    )
    upgrade_retained_sessions(settings, "retail", dry_run=True)
    assert after_migration in _schemas(pg_prefix), "a dry run drops nothing"
    upgrade_retained_sessions(settings, "retail")
    left = _schemas(pg_prefix)
    assert after_migration not in left
    assert {current, session, other_env} <= left


async def test_control_records_of_vanished_schemas_are_closed_at_start(tmp_path, pg_prefix):
    """A server killed between a session's control row and its schema left a live record:
    the next start records it closed (after a grace period: a creation may be in flight)."""
    from datetime import timedelta

    from app.clock import naive_utcnow

    env = load_environment("retail")
    settings = backend_settings("postgres", tmp_path, pg_prefix)
    task = load_tasks(load_environment("retail").tasks_path)[0]
    manager = SessionManager(settings, env)
    try:
        live = (await manager.seed(parse_seed_body(task))).session_id
        control = manager.backend.control
        old = naive_utcnow() - timedelta(hours=1)
        for session_id, created in (("a" * 32, old), ("b" * 32, naive_utcnow())):
            control.add(
                session_id=session_id,
                env="retail",
                task_id="t",
                snapshot_key="k",
                resources_session_id=None,
                file="postgresql:gone",
                task={},
                created_at=created,
            )
        with manager.backend.engine.begin() as conn:  # the seeded one, as old: it has a schema
            conn.exec_driver_sql(
                f'UPDATE "{pg_prefix}_control".sessions SET created_at = %s WHERE id = %s',
                (old, live),
            )
    finally:
        await manager.aclose()
    manager = SessionManager(settings, env)
    try:
        control = manager.backend.control
        assert control.get("a" * 32).status == "closed"
        assert control.get("b" * 32).status == "open"  # young: maybe a seed in flight
        assert control.get(live).status == "open"
    finally:
        await manager.aclose()
