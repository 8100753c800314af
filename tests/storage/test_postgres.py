"""The PostgreSQL backend: dialect parity with SQLite, schema isolation, lifecycle, replicas.

The protocol and every environment's gold/no-op checks also run on PostgreSQL
(`test_protocol.py`, `test_env_tasks.py`); these tests cover what only this backend has.
Skipped when no PostgreSQL answers at STATEGYM_TEST_PG_URL.
"""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.errors import SessionNotFound
from app.registry import load_environment
from app.runtime.lifecycle import reap_idle
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.backend import POSTGRES, SQLITE, backend_of, sync_pg_url
from app.storage.postgres.db import SchemaNames, make_engine, session_connection
from app.storage.postgres.store import PgStore
from app.storage.sqlite.store import Store
from app.verify.state.diff import diff_states
from app.verify.state.dump import dump_state
from tests.conftest import PG_URL, PORTABLE_ENVS, backend_settings
from tests.support.rollouts import gold_answer, load_tasks, response_object

PARITY_ENVS = PORTABLE_ENVS


def _calls(task: dict) -> list[dict]:
    return [
        {
            "name": c["name"],
            "arguments": c["arguments"]
            if isinstance(c["arguments"], dict)
            else json.loads(c["arguments"]),
        }
        for c in task["ground_truth"]
    ]


def _pg_dump(manager, session_id: str):
    schema = manager.backend.names.session(session_id)
    with session_connection(manager.backend.store.engine, schema) as conn, conn.begin():
        return dump_state(conn, manager.env.metadata.tables, manager.env.compare)


def test_database_url_picks_the_backend():
    assert backend_of(None) == SQLITE and backend_of("sqlite:///var/x") == SQLITE
    assert backend_of("postgresql+asyncpg://u@h/db") == POSTGRES
    assert sync_pg_url("postgresql+asyncpg://u@h:5/db") == "postgresql+psycopg://u@h:5/db"
    with pytest.raises(ValueError, match="STATEGYM_DATABASE_URL"):
        backend_of("mysql://u@h/db")


def test_schema_names_come_only_from_validated_ids():
    names = SchemaNames("sg")
    assert names.session("a" * 32) == "sg_s_" + "a" * 32
    for bad in ("../etc", "A" * 32, "a" * 31, 'x"; DROP SCHEMA public; --'):
        with pytest.raises(SessionNotFound):
            names.session(bad)


@pytest.mark.parametrize("env_name", PARITY_ENVS)
async def test_postgres_and_sqlite_dumps_of_the_same_state_compare_equal(
    env_name, tmp_path, pg_prefix
):
    """Seed states and gold end states reached on PostgreSQL dump exactly as SQLite's do, so
    the gold computed on SQLite clones is a valid reference for PostgreSQL sessions."""
    env = load_environment(env_name)
    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), env)
    tasks = load_tasks(load_environment(env_name).tasks_path)[:3]
    try:
        for task in tasks:
            request = parse_seed_body(task)
            session_id = (await manager.seed(request)).session_id
            gold = manager.gold.get(request.task)
            assert not diff_states(gold.seed_state, _pg_dump(manager, session_id), env.compare)
            for call in _calls(task):
                tool = env.tool_named(call["name"])
                out = await manager.call_tool(session_id, tool, call["arguments"])
                assert "output" in out, out
            final = _pg_dump(manager, session_id)
            assert not diff_states(gold.state, final, env.compare), task["task_id"]
            assert final == gold.state
    finally:
        await manager.aclose()


async def test_a_session_sees_only_its_own_schema(tmp_path, pg_prefix, client_factory):
    from tests.server.test_protocol import TASK
    from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

    settings = backend_settings("postgres", tmp_path, pg_prefix)
    async with client_factory(WAREHOUSE, settings) as a:
        async with httpx.AsyncClient(transport=a._transport, base_url=a.base_url) as b:
            id_a = (await a.post("/seed_session", json=TASK)).json()["session_id"]
            id_b = (await b.post("/seed_session", json=TASK)).json()["session_id"]
            move = {"sku": "SKU-9001", "delta": -5, "reason": "sold"}
            assert (await b.post("/move_stock", json=move)).json()["output"]["quantity"] == 0
            got = (await a.post("/get_item", json={"sku": "SKU-9001"})).json()
            assert got["output"]["quantity"] == 5
            manager = a.app.state.protocol.sessions
            # Raw SQL on a session connection resolves unqualified names in its schema only.
            with session_connection(
                manager.backend.store.engine, manager.backend.names.session(id_a)
            ) as conn:
                with conn.begin():
                    row = conn.execute(text("SELECT quantity FROM items WHERE id = 9001")).one()
                    path = conn.exec_driver_sql("SHOW search_path").scalar()
            assert row.quantity == 5 and path == manager.backend.names.session(id_a)
            assert id_b not in path


async def test_close_marks_the_schema_and_retention_drops_it(tmp_path, pg_prefix, client_factory):
    from tests.server.test_protocol import TASK
    from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

    for retention, kept in (("keep", True), ("delete_on_close", False)):
        settings = backend_settings(
            "postgres", tmp_path / retention, pg_prefix, retention=retention
        )
        async with client_factory(WAREHOUSE, settings) as client:
            session_id = (await client.post("/seed_session", json=TASK)).json()["session_id"]
            store = client.app.state.protocol.sessions.backend.store
            assert store.session_exists(session_id)
            assert (await client.post("/close_session", json={})).json()["closed"] is True
            assert store.session_exists(session_id) is kept
            if kept:
                assert store.read_meta(session_id)["status"] == "closed"
            r = await client.post("/get_item", json={"sku": "SKU-9001"})
            assert r.status_code in (404, 409)


async def test_reaper_closes_idle_postgres_sessions(tmp_path, pg_prefix):
    from tests.server.test_protocol import TASK
    from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), WAREHOUSE)
    try:
        session_id = (await manager.seed(parse_seed_body(TASK))).session_id
        # Backdate both clocks the reaper reads: the control row and the last-write stamp.
        schema = manager.backend.names.session(session_id)
        with manager.backend.store.engine.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE {manager.backend.names.control}.sessions "
                "SET created_at = created_at - interval '2 hours'"
            )
            conn.exec_driver_sql(
                f"INSERT INTO \"{schema}\"._stategym_meta VALUES ('last_write', '0')"
            )
        assert await reap_idle(manager, ttl_seconds=3600) == 1
        assert manager.control.get(session_id).status == "closed"
        assert await reap_idle(manager, ttl_seconds=3600) == 0
    finally:
        await manager.aclose()


def test_replicas_build_one_base_template(tmp_path, pg_prefix):
    """Two processes' stores racing on the base template schema build it once."""
    env = load_environment("retail")
    task = parse_seed_body(load_tasks(load_environment("retail").tasks_path)[0]).task
    names = SchemaNames(pg_prefix)
    results, errors = [], []

    def build(i: int) -> None:
        engine = make_engine(PG_URL, pool_size=1)
        try:
            store = PgStore(Store(tmp_path / f"replica{i}", env), engine, names)
            store.snapshot(task)
            results.append(store.ensure_base())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 2 and results[0] == results[1]


@pytest.mark.slow  # two server processes on one PostgreSQL: ~9 s
def test_replicas_serve_one_rollout_interchangeably(tmp_path, pg_prefix, live_server):
    """Seed on one server, alternate tool calls between two, verify on the other: same reward
    as one server gives, and a close on one is seen by the other at once."""
    pg = {"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": pg_prefix}
    a = live_server("retail", data_dir=tmp_path / "host-a", **pg)
    b = live_server("retail", data_dir=tmp_path / "host-b", **pg)
    tasks = [
        t for t in load_tasks(load_environment("retail").tasks_path) if len(t["ground_truth"]) >= 2
    ][:2]
    for task in tasks:
        rewards = []
        for calls, answer in ((_calls(task), gold_answer(task)), ([], "")):
            cookies = httpx.Cookies()
            seeded = httpx.post(a + "/seed_session", json=task, cookies=cookies, timeout=60)
            assert seeded.status_code == 200, seeded.text
            cookies.update(seeded.cookies)
            for i, call in enumerate(calls):
                server = (b, a)[i % 2]
                r = httpx.post(f"{server}/{call['name']}", json=call["arguments"], cookies=cookies)
                assert r.status_code == 200 and "output" in r.json(), r.text
            body = {**task, "response": response_object([], answer)}
            on_b = httpx.post(b + "/verify", json=body, cookies=cookies, timeout=60).json()
            on_a = httpx.post(a + "/verify", json=body, cookies=cookies, timeout=60).json()
            assert on_a["reward"] == on_b["reward"], (on_a, on_b)
            rewards.append(on_b["reward"])
            closed = httpx.post(b + "/close_session", json={}, cookies=cookies).json()
            assert closed["closed"] is True
            r = httpx.post(
                a + "/get_order_details", json={"order_number": "#W0000000"}, cookies=cookies
            )
            assert r.status_code == 404 and r.json()["error"]["type"] == "session_closed"
        assert rewards == [1.0, 0.0], task["task_id"]


async def test_session_schema_at_an_older_revision_is_upgraded_on_open(tmp_path, pg_prefix):
    """A retained schema one revision behind is upgraded when opened (and in bulk), then plays
    and verifies as a current one; a schema at an unknown revision is refused."""
    from app.storage.migrations import FRAMEWORK, branch_revisions, head_revision
    from app.storage.postgres.migrate import migrate_schema, schema_revision, upgrade_sessions

    env = load_environment("retail")
    task = load_tasks(load_environment("retail").tasks_path)[0]
    settings = backend_settings("postgres", tmp_path, pg_prefix)
    first = SessionManager(settings, env)
    ids = [(await first.seed(parse_seed_body(task))).session_id for _ in range(3)]
    await first.aclose()
    engine, names = first.backend.store.engine, first.backend.names
    previous = branch_revisions("retail")[3]  # before products.slug
    for session_id in ids:
        migrate_schema(engine, names.session(session_id), "retail", previous, down=True)
    with engine.connect() as conn:
        assert schema_revision(conn, names.session(ids[0])) == previous
        # Below retail's `depends_on`, the framework branch's row stays beside retail's.
        rows = conn.exec_driver_sql(
            f"SELECT version_num FROM {names.session(ids[0])}.alembic_version"
        ).scalars()
        assert sorted(rows) == sorted([previous, head_revision(FRAMEWORK)])
        columns = conn.exec_driver_sql(
            "SELECT column_name FROM information_schema.columns "
            f"WHERE table_schema = '{names.session(ids[0])}' AND table_name = 'products'"
        ).scalars()
        assert "slug" not in set(columns)
    dry = upgrade_sessions(engine, names, "retail", dry_run=True)
    assert sorted(o.status for o in dry) == ["would_upgrade"] * 3
    assert [
        o.status
        for o in upgrade_sessions(engine, names, "retail")
        if o.schema == names.session(ids[1])
    ] == ["upgraded"]

    # Below the framework branch: its revisions create its tables in this schema, though every
    # other schema (the template's) has them.
    migrate_schema(engine, names.session(ids[1]), "retail", f"{FRAMEWORK}@base", down=True)
    migrate_schema(engine, names.session(ids[1]), "retail")
    with engine.connect() as conn:
        tables = conn.exec_driver_sql(
            "SELECT table_name FROM information_schema.tables "
            f"WHERE table_schema = '{names.session(ids[1])}' AND table_name LIKE 'stategym%%'"
        ).scalars()
        assert set(tables) == {"stategym_answer", "stategym_user", "stategym_conversation"}
        assert schema_revision(conn, names.session(ids[1])) == head_revision("retail")

    manager = SessionManager(settings, env)  # a fresh worker: nothing open yet
    try:
        for call in _calls(task):
            out = await manager.call_tool(ids[0], env.tool_named(call["name"]), call["arguments"])
            assert "output" in out, out
        with engine.connect() as conn:
            assert schema_revision(conn, names.session(ids[0])) == head_revision("retail")
        body = {**task, "response": response_object([], gold_answer(task))}
        assert (await manager.verify(ids[0], body))["reward"] == 1.0
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE {names.session(ids[2])}.alembic_version SET version_num = 'fffffff'"
            )
        from app.errors import SessionUnavailable

        with pytest.raises(SessionUnavailable, match="does not know"):
            await manager.call_tool(ids[2], env.tool_named("list_products"), {})
    finally:
        await manager.aclose()


def test_sqlite_only_environment_is_refused_on_postgres(tmp_path):
    # No server needed: the refusal comes before any connection.
    settings = backend_settings("postgres", tmp_path, "tnone")
    with pytest.raises(ValueError, match="requires sqlite"):
        SessionManager(settings, load_environment("sql"))


async def test_value_postgres_refuses_is_a_tool_error_not_a_500(
    tmp_path, pg_prefix, client_factory
):
    """PostgreSQL enforces VARCHAR(n) where SQLite does not: the call is refused as a tool
    error (200, rolled back), never an internal error."""
    from tests.server.test_protocol import TASK
    from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

    settings = backend_settings("postgres", tmp_path, pg_prefix)
    async with client_factory(WAREHOUSE, settings) as client:
        await client.post("/seed_session", json=TASK)
        move = {"sku": "SKU-9001", "delta": -1, "reason": "x" * 60}  # moves.reason: String(50)
        r = await client.post("/move_stock", json=move)
        assert r.status_code == 200 and r.json()["error"]["code"] == "constraint_violation"
        assert "too long" in r.json()["error"]["message"]
        got = await client.post("/get_item", json={"sku": "SKU-9001"})
        assert got.json()["output"]["quantity"] == 5


def test_bench_pg_in_process_figures_run(pg_prefix, monkeypatch):
    """bench/pg.py's in-process parts (the HTTP part is exercised by `python -m bench.pg`)."""
    from bench import pg as bench_pg

    monkeypatch.setattr(bench_pg, "PG_URL", PG_URL)

    clone = bench_pg.clone_strategies(1)
    assert all(v > 0 for v in clone.values()), clone
    verify = bench_pg.verify_in_process(1)
    assert verify["sqlite"] > 0 and verify["postgres"] > 0


def test_statement_timeout_answers_like_sqlite_time_limit(tmp_path, pg_prefix):
    """A real statement_timeout on a session connection becomes the `time_limit` tool error."""
    from app.storage.driver import DbError, classify
    from app.storage.runner import run_tool
    from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

    engine = make_engine(PG_URL, pool_size=1, statement_timeout_ms=50)
    names = SchemaNames(pg_prefix)
    tool = WAREHOUSE.tool_named("get_item")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{names.control}"')
            conn.exec_driver_sql(
                f'CREATE TABLE "{names.control}"._stategym_meta (key text, value text)'
            )
        # A tool call's transaction (it reads the session's status): the tool limit applies.
        with session_connection(engine, names.control, status=True) as conn, conn.begin():
            # The tool's own query stands in for a slow one: the timeout fires in pg_sleep.
            with pytest.raises(DBAPIError) as caught:
                conn.exec_driver_sql("SELECT pg_sleep(1)")
            found = classify(caught.value, conn)
        assert found is not None and found[0] is DbError.TIME_LIMIT
        answer = found[0].payload(tool.name, limit_ms=50, **found[1])
        assert answer["error"]["code"] == "time_limit"
        assert answer["error"]["message"].startswith("get_item ran longer than 50 ms")
        ok = run_tool(engine, tool, [1], None)  # type: ignore[arg-type]  # bad args: untouched
        assert ok["error"]["code"] == "invalid_arguments"
    finally:
        engine.dispose()
