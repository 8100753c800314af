"""A deleted session's schema reset into the schema pool (app/storage/postgres/recycle.py): it
must hold exactly what a fresh clone holds, and a session seeded from it must score as usual."""

from __future__ import annotations

import json

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.postgres.db import SchemaNames, make_engine, session_connection
from app.storage.postgres.store import PgStore
from app.storage.sqlite.store import Store
from tests.conftest import PG_URL, backend_settings
from tests.storage.test_pg_schema_pool import _pooled, _schema_view, _wait_full
from tests.storage.test_postgres import _calls
from tests.support.rollouts import gold_answer, load_tasks, response_object

WRITES = [
    "UPDATE customers SET email = 'x' || email WHERE id IN (SELECT id FROM customers LIMIT 3)",
    "INSERT INTO addresses (customer_id, is_default, line1, city, state, zip, country) "
    "SELECT customer_id, false, 'n', city, state, zip, country FROM addresses LIMIT 2",
    "DELETE FROM order_items WHERE id = (SELECT max(id) FROM order_items)",
    "UPDATE orders SET status = 'cancelled' WHERE id = (SELECT min(id) FROM orders)",
    "INSERT INTO _stategym_steps VALUES (1, 't', '{}', 'ok', NULL, 'd', 0, 1.0)",
    "INSERT INTO _stategym_meta VALUES ('last_write', '1') ON CONFLICT (key) DO UPDATE "
    "SET value = excluded.value",
    "UPDATE _stategym_meta SET value = 'closed' WHERE key = 'status'",
]


def _oid(engine, schema: str) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT '\"{schema}\"'::regnamespace::oid").scalar())


def test_a_recycled_schema_equals_a_fresh_clone(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    task = parse_seed_body(load_tasks(load_environment("retail").tasks_path)[0]).task
    engine = make_engine(PG_URL, pool_size=2)
    names = SchemaNames(pg_prefix)
    store = PgStore(Store(tmp_path / "data", env), engine, names, schema_pool=1)
    try:
        assert store.pool is not None
        snapshot = store.snapshot(task)
        used = store.create_session("a" * 32, snapshot)
        template = store.base_schema
        _wait_full(store, template, 1)
        with session_connection(engine, used) as conn, conn.begin():
            for statement in WRITES:
                conn.exec_driver_sql(statement)
        fresh = names.session("f" * 32)
        store._clone(template, fresh)
        assert _schema_view(engine, env, used) != _schema_view(engine, env, fresh)
        assert store.pool.has_room(template)  # up to `keep` ready
        before = set(_pooled(engine, store))
        assert store.recycle_session("a" * 32)
        (recycled,) = set(_pooled(engine, store)) - before
        assert not store.session_exists("a" * 32)
        assert _schema_view(engine, env, recycled) == _schema_view(engine, env, fresh)
        # A log that cannot be trusted (a disabled trigger): not recycled, nothing changed.
        other = store.create_session("b" * 32, snapshot)
        with session_connection(engine, other) as conn, conn.begin():
            conn.exec_driver_sql('ALTER TABLE orders DISABLE TRIGGER "_stategym_step_orders"')
        assert not store.recycle_session("b" * 32)
        assert store.session_exists("b" * 32)
    finally:
        store.dispose()
        engine.dispose()


async def test_sessions_seeded_from_recycled_schemas_score_as_usual(tmp_path, pg_prefix):
    env = load_environment("retail")
    settings = backend_settings(
        "postgres", tmp_path, pg_prefix, pg_schema_pool=1, retention="delete_on_close"
    )
    task = load_tasks(load_environment("retail").tasks_path)[5]
    request = parse_seed_body(task)
    manager = SessionManager(settings, env)
    store = manager.backend.store
    try:
        first = (await manager.seed(request)).session_id  # a clone; the pool fills
        template = store.base_schema
        _wait_full(store, template, 1)
        for call in _calls(task):
            await manager.call_tool(first, env.tool_named(call["name"]), call["arguments"])
        body = {**task, "response": response_object([], gold_answer(task))}
        assert (await manager.verify(first, body))["reward"] == 1.0
        before = set(_pooled(store.engine, store))
        await manager.close(first)  # deleted: reset into the pool beside the fresh clone
        assert store.pool.ready_count()[template] == 2
        (recycled,) = set(_pooled(store.engine, store)) - before
        recycled_oid = _oid(store.engine, recycled)
        # The pool hands out the schema returned last (warm in every PostgreSQL backend).
        second = (await manager.seed(request)).session_id
        assert _oid(store.engine, store.names.session(second)) == recycled_oid
        out = await manager.verify(second, {**task, "response": response_object([], "")})
        assert out["reward"] == 0.0 and not out["verification"]["agent_changes"], json.dumps(
            out["verification"]["agent_changes"]
        )
        for call in _calls(task):
            await manager.call_tool(second, env.tool_named(call["name"]), call["arguments"])
        assert (await manager.verify(second, body))["reward"] == 1.0
    finally:
        await manager.aclose()
