"""Kept sessions archived at close on PostgreSQL (app/storage/postgres/archive.py): the schema
goes back to the pool, and reading the session rebuilds exactly what its schema held."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from app.errors import SessionClosed
from app.registry import load_environment
from app.runtime.branching import Branching
from app.runtime.inspection import Inspector
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.migrations import head_revision
from app.storage.postgres.archive import ArchiveUnreadable
from app.storage.postgres.db import SchemaNames, make_engine, session_connection
from app.storage.postgres.migrate import upgrade_sessions
from app.storage.postgres.store import PgStore
from app.storage.postgres.templates import stale_templates
from app.storage.sqlite.store import Store
from app.storage.steplog import step_log
from app.verify.state.dump import dump_state
from tests.conftest import PG_URL, backend_settings
from tests.storage.test_pg_schema_pool import _pooled, _schema_view, _schema_view_on, _wait_full
from tests.storage.test_postgres import _calls
from tests.support.rollouts import gold_answer, load_tasks, response_object

# Raw writes, each its own step-less transaction: updates, inserts, deletes across tables,
# a row inserted then updated then deleted, a NULL written over a value.
WRITES = [
    "UPDATE customers SET email = 'x' || email WHERE id IN (SELECT id FROM customers LIMIT 3)",
    "INSERT INTO addresses (customer_id, is_default, line1, city, state, zip, country) "
    "SELECT customer_id, false, 'n', city, state, zip, country FROM addresses LIMIT 2",
    "DELETE FROM order_items WHERE id = (SELECT max(id) FROM order_items)",
    "UPDATE orders SET status = 'cancelled' WHERE id = (SELECT min(id) FROM orders)",
    "UPDATE addresses SET line1 = 'moved' WHERE id = (SELECT max(id) FROM addresses)",
    "DELETE FROM addresses WHERE id = (SELECT max(id) FROM addresses)",
    "UPDATE orders SET status = 'pending' WHERE id = (SELECT min(id) FROM orders)",
]


def _retail_store(tmp_path, prefix: str):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    task = parse_seed_body(load_tasks(load_environment("retail").tasks_path)[0]).task
    engine = make_engine(PG_URL, pool_size=2)
    store = PgStore(
        Store(tmp_path / "data", env),
        engine,
        SchemaNames(prefix),
        schema_pool=1,
        archive_closed=True,
    )
    return env, engine, store, store.snapshot(task)


def test_an_archived_session_is_rebuilt_exactly_and_never_kept(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env, engine, store, snapshot = _retail_store(tmp_path, pg_prefix)
    try:
        session = store.create_session("a" * 32, snapshot)
        template = store.base_schema
        _wait_full(store, template, 1)
        for statement in WRITES:
            with session_connection(engine, session) as conn, conn.begin():
                conn.exec_driver_sql(statement)
        with session_connection(engine, session) as conn, conn.begin():
            store.write_status(conn, "a" * 32, "closed")  # what the archive records
        before = _schema_view(engine, env, session)
        pooled = set(_pooled(engine, store))

        assert store.archive_session("a" * 32)
        assert not store.session_exists("a" * 32)
        (recycled,) = set(_pooled(engine, store)) - pooled
        fresh = SchemaNames(pg_prefix).session("f" * 32)
        store._clone(template, fresh)
        assert _schema_view(engine, env, recycled) == _schema_view(engine, env, fresh)

        for _ in range(2):  # read twice: the first read kept nothing
            # A plain connection: one pinned to the schema prints its names unqualified.
            with engine.connect() as conn, conn.begin() as transaction:
                assert store.archive.rebuild(conn, "a" * 32, session, env.metadata)
                assert _schema_view_on(conn, env, session) == before
                transaction.rollback()
            assert not store.session_exists("a" * 32)
        with engine.connect() as conn:
            assert store.archive.meta(conn, "a" * 32)["status"] == "closed"
            assert not store.archive.rebuild(conn, "b" * 32, session, env.metadata)
        # An archive whose log does not fit the rows (the insert of a row it later updates and
        # deletes is lost) is refused.
        with engine.begin() as conn:
            image = json.loads(
                conn.exec_driver_sql(f"SELECT image FROM {store.archive.table}").scalar()
            )
            rows = image["tables"]["_stategym_step_rows"]
            rows.remove([r for r in rows if r["op"] == "i" and r["tbl"] == "addresses"][-1])
            conn.exec_driver_sql(
                f"UPDATE {store.archive.table} SET image = %(i)s", {"i": json.dumps(image)}
            )
        with engine.connect() as conn, conn.begin():
            with pytest.raises(ArchiveUnreadable, match="fits no row"):
                store.archive.rebuild(conn, "a" * 32, session, env.metadata)
    finally:
        store.dispose()
        engine.dispose()


def test_what_cannot_be_archived_keeps_its_schema_unchanged(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env, engine, store, snapshot = _retail_store(tmp_path, pg_prefix)
    try:
        assert store.pool is not None
        template = store.base_schema
        # A log that cannot be trusted (a disabled trigger).
        untrusted = store.create_session("b" * 32, snapshot)
        with session_connection(engine, untrusted) as conn, conn.begin():
            conn.exec_driver_sql('ALTER TABLE orders DISABLE TRIGGER "_stategym_step_orders"')
        assert not store.archive_session("b" * 32)
        assert store.session_exists("b" * 32)
        # The archive cannot be written: the reset is rolled back with it.
        _wait_full(store, template, 1)
        failing = store.create_session("c" * 32, snapshot)
        with session_connection(engine, failing) as conn, conn.begin():
            conn.exec_driver_sql(WRITES[0])
        before = _schema_view(engine, env, failing)
        _wait_full(store, template, 1)  # the seed took the pooled one: refilled, then still
        pooled = _pooled(engine, store)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {store.archive.table}")
        assert not store.archive_session("c" * 32)
        assert _schema_view(engine, env, failing) == before
        assert _pooled(engine, store) == pooled
    finally:
        store.dispose()
        engine.dispose()


def test_a_full_pool_keeps_the_schema(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env, engine, store, snapshot = _retail_store(tmp_path, pg_prefix)
    try:
        assert store.pool is not None
        store.pool.keep = 2  # its floor: twice the pool's size (1)
        template = store.base_schema
        ids = ["d" * 32, "e" * 32, "f" * 32, "1" * 32]
        for session_id in ids:
            store.create_session(session_id, snapshot)
        _wait_full(store, template, 1)
        archived = [store.archive_session(session_id) for session_id in ids]
        # Up to `keep` ready schemas: then closes keep their schemas.
        assert archived == [True, False, False, False]
        assert all(
            store.session_exists(i) for i, done in zip(ids, archived, strict=True) if not done
        )
        with engine.connect() as conn:
            held = {i for i in ids if store.archive.holds(conn, i)}
        assert held == {i for i, done in zip(ids, archived, strict=True) if done}
    finally:
        store.dispose()
        engine.dispose()


async def test_kept_rollouts_close_into_archives_and_inspect_as_before(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    settings = backend_settings("postgres", tmp_path, pg_prefix, pg_schema_pool=1, retention="keep")
    task = load_tasks(load_environment("retail").tasks_path)[17]  # a write
    request = parse_seed_body(task)
    manager = SessionManager(settings, env)
    backend = manager.backend
    store = backend.store
    try:
        first = (await manager.seed(request)).session_id
        template = store.base_schema
        _wait_full(store, template, 1)
        for call in _calls(task):
            await manager.call_tool(first, env.tool_named(call["name"]), call["arguments"])
        body = {**task, "response": response_object([], gold_answer(task))}
        assert (await manager.verify(first, body))["reward"] == 1.0
        view = backend.view()
        inspector = Inspector(tmp_path, manager.control, view, envs={env.name: env})
        record = inspector.record(first)
        with inspector.connection(record) as conn:
            live_dump = dump_state(conn, env.metadata.tables, env.compare, reuse=False)
        with inspector.scratch(record) as conn:
            log = step_log(conn)
            assert log is not None
            live_steps = log.steps()
        live_diff = inspector.diff(record)
        assert live_diff["summary"] != "no differences"

        assert await manager.close(first)
        assert not store.session_exists(first)  # archived: the schema is back in the pool
        call = _calls(task)[0]
        with pytest.raises(SessionClosed, match="is closed"):  # not "deleted": it is kept
            await manager.call_tool(first, env.tool_named(call["name"]), call["arguments"])
        assert store.pool.ready_count()[template] == 2
        record = inspector.record(first)
        assert record.status == "closed"
        assert view.present(record) and view.meta(record)["status"] == "closed"
        with inspector.connection(record) as conn:
            assert dump_state(conn, env.metadata.tables, env.compare, reuse=False) == live_dump
        with inspector.scratch(record) as conn:
            log = step_log(conn)
            assert log is not None and log.steps() == live_steps
        again = inspector.reverify(record)
        assert again["reward"] == 1.0 and again["matches_stored"]
        assert inspector.diff(record) == live_diff
        assert not store.session_exists(first)  # every read was rolled back

        # Seeds take the pooled schemas, the reset one included, and score as usual.
        await manager.seed(request)
        second = (await manager.seed(request)).session_id
        out = await manager.verify(second, {**task, "response": response_object([], "")})
        assert out["reward"] == 0.0 and not out["verification"]["agent_changes"]

        # gc removes the archive: the session is gone for good.
        view.remove(record)
        assert not view.present(record)
    finally:
        await manager.aclose()


def test_template_cleanup_keeps_the_templates_archives_need(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env, engine, store, snapshot = _retail_store(tmp_path, pg_prefix)
    try:
        store.create_session("a" * 32, snapshot)
        template = store.base_schema
        _wait_full(store, template, 1)
        names = SchemaNames(pg_prefix)
        assert template in stale_templates(engine, names, env.name, "other models")
        assert store.archive_session("a" * 32)
        stale = stale_templates(engine, names, env.name, "other models")
        assert template not in stale and set(_pooled(engine, store)) <= set(stale)
        with engine.connect() as conn:
            count = conn.execute(
                text(f"SELECT count(*) FROM {store.archive.table} WHERE template = :t"),
                {"t": template},
            ).scalar()
        assert count == 1
        # `migrate sessions` reports an archive at another revision: archives are not migrated.
        assert upgrade_sessions(engine, names, env.name, dry_run=True) == []  # at the head
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE {store.archive.table} SET image = replace(image, %(head)s, 'older')",
                {"head": head_revision(env.name)},
            )
        (outcome,) = upgrade_sessions(engine, names, env.name, dry_run=True)
        assert outcome.status == "archived" and "older" in outcome.detail
    finally:
        store.dispose()
        engine.dispose()


async def test_forked_and_rewound_sessions_archive_and_read_back(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    """A fork's log (copied from its parent, cut at its step) and a rewound log are relative to
    the template too: both archive and read back as they were."""
    env = load_environment("retail")
    # A pool of 3 takes up to 6 back: room for the three closes below.
    settings = backend_settings("postgres", tmp_path, pg_prefix, pg_schema_pool=3, retention="keep")
    task = load_tasks(load_environment("retail").tasks_path)[17]  # a write
    manager = SessionManager(settings, env)
    branching = Branching(manager, sign=lambda data: "x")
    store = manager.backend.store
    try:
        parent = (await manager.seed(parse_seed_body(task))).session_id
        template = store.base_schema
        _wait_full(store, template, 3)
        for call in _calls(task):
            await manager.call_tool(parent, env.tool_named(call["name"]), call["arguments"])
        _, children = await branching.fork(parent, 2, at_step=1)
        rewound = children[1].session_id
        call = _calls(task)[-1]
        await manager.call_tool(rewound, env.tool_named(call["name"]), call["arguments"])
        await branching.rewind(rewound, 1)
        view = manager.backend.view()
        inspector = Inspector(tmp_path, manager.control, view, envs={env.name: env})
        ids = [parent, children[0].session_id, rewound]
        dumps = {}
        for session_id in ids:
            with inspector.connection(inspector.record(session_id)) as conn:
                dumps[session_id] = dump_state(conn, env.metadata.tables, env.compare, reuse=False)
        assert dumps[parent] != dumps[children[0].session_id] == dumps[rewound]
        for session_id in ids:
            assert await manager.close(session_id)
        with store.engine.connect() as conn:
            assert all(store.archive.holds(conn, i) for i in ids)
        for session_id in ids:
            assert not store.session_exists(session_id)
            with inspector.connection(inspector.record(session_id)) as conn:
                again = dump_state(conn, env.metadata.tables, env.compare, reuse=False)
            assert again == dumps[session_id], session_id
    finally:
        await manager.aclose()
