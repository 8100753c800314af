"""PostgreSQL's pool of pre-cloned session schemas (app/storage/postgres/pool.py)."""

from __future__ import annotations

import time

from sqlalchemy import text

from app.registry import load_environment
from app.server.models import parse_seed_body
from app.storage.postgres.db import SchemaNames, functions_schema_of, make_engine, quoted
from app.storage.postgres.store import PgStore
from app.storage.sqlite.store import Store
from tests.conftest import PG_URL
from tests.support.rollouts import load_tasks


def _pooled(engine, store: PgStore) -> list[str]:  # type: ignore[no-untyped-def]
    assert store.pool is not None
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"),
            {"p": store.pool.pattern()},
        )
        return sorted(r[0] for r in rows)


def _wait_full(store: PgStore, template: str, size: int) -> None:
    assert store.pool is not None
    deadline = time.monotonic() + 120
    while store.pool.ready_count().get(template, 0) < size:
        assert time.monotonic() < deadline, store.pool.ready_count()
        time.sleep(0.05)


def _schema_view(engine, env, schema: str):  # type: ignore[no-untyped-def]
    """Rows, meta, versions, step log, sequences, indexes, constraints, the step log's function
    and triggers of a schema, name-free."""
    with engine.connect() as conn:
        return _schema_view_on(conn, env, schema)


def _schema_view_on(conn, env, schema: str):  # type: ignore[no-untyped-def]
    """`_schema_view` in `conn`'s transaction (a schema it has not committed)."""
    view = {}
    names = [quoted(t.name) for t in env.metadata.sorted_tables]
    log = ["_stategym_steps", "_stategym_step_rows", "_stategym_step_cols"]
    for name in [*names, "_stategym_meta", "alembic_version", *log]:
        exists = conn.execute(
            text("SELECT 1 FROM pg_tables WHERE schemaname = :s AND tablename = :t"),
            {"s": schema, "t": name.strip('"')},
        ).first()
        if exists:
            rows = conn.exec_driver_sql(f"SELECT * FROM {quoted(schema)}.{name}").fetchall()
            view[name] = sorted(map(repr, rows))
    view["sequences"] = conn.execute(
        text("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = :s ORDER BY 1"),
        {"s": schema},
    ).fetchall()
    view["defaults"] = conn.execute(
        text(
            "SELECT table_name, column_name, replace(column_default, :s, 'X') "
            "FROM information_schema.columns WHERE table_schema = :s ORDER BY 1, 2"
        ),
        {"s": schema},
    ).fetchall()
    view["indexes"] = conn.execute(
        text(
            "SELECT indexname, replace(indexdef, :s, 'X') FROM pg_indexes "
            "WHERE schemaname = :s ORDER BY 1"
        ),
        {"s": schema},
    ).fetchall()
    view["constraints"] = conn.execute(
        text(
            "SELECT conname, replace(pg_get_constraintdef(oid), :s, 'X') FROM pg_constraint "
            "WHERE connamespace = CAST(:s AS regnamespace) ORDER BY 1"
        ),
        {"s": schema},
    ).fetchall()
    # The triggers call the prefix's one step-log function (none of the schema's own, whose
    # text would name the schema it was made for: postgres/db.py).
    view["functions"] = conn.execute(
        text(
            "SELECT proname FROM pg_proc WHERE pronamespace = CAST(:s AS regnamespace) ORDER BY 1"
        ),
        {"s": schema},
    ).fetchall()
    view["triggers"] = conn.execute(
        text(
            "SELECT c.relname, t.tgname, t.tgfoid::regprocedure::text FROM pg_trigger t "
            "JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE c.relnamespace = CAST(:s AS regnamespace) AND NOT t.tgisinternal "
            "ORDER BY 1, 2"
        ),
        {"s": schema},
    ).fetchall()
    assert view["functions"] == [] and view["triggers"]
    assert {row[2] for row in view["triggers"]} == {
        f"{functions_schema_of(schema)}._stategym_step_log()"
    }
    return view


def test_seeds_from_the_pool_equal_clones_and_the_pool_stays_bounded(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    tasks = load_tasks(load_environment("retail").tasks_path)
    task = parse_seed_body(tasks[0]).task
    engine = make_engine(PG_URL, pool_size=2)
    names = SchemaNames(pg_prefix)
    # A pooled schema a crashed process left behind is dropped when a pool starts.
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{pg_prefix}_p_{"0" * 32}"')
    store = PgStore(Store(tmp_path / "data", env), engine, names, schema_pool=2)
    try:
        assert store.pool is not None and _pooled(engine, store) == []
        snapshot = store.snapshot(task)
        cloned = store.create_session("a" * 32, snapshot)  # first seed: a clone, the pool fills
        template = store.base_schema
        _wait_full(store, template, 2)
        assert len(_pooled(engine, store)) == 2
        ready = set(_pooled(engine, store))
        from_pool = store.create_session("b" * 32, snapshot)
        assert from_pool == names.session("b" * 32)
        assert len(set(_pooled(engine, store)) & ready) == 1  # one of the ready ones was taken
        assert _schema_view(engine, env, from_pool) == _schema_view(engine, env, cloned)
        for n in range(3):  # faster than refills: the pool empties, seeds clone, never > 2
            store.create_session(f"{n:032x}", snapshot)
            assert len(_pooled(engine, store)) <= 2
        _wait_full(store, template, 2)
        time.sleep(0.3)
        assert len(_pooled(engine, store)) == 2
        # A pooled schema dropped under us (another replica's start-up sweep): the seed clones.
        store.pool.sweep()
        late = store.create_session("c" * 32, snapshot)
        assert _schema_view(engine, env, late) == _schema_view(engine, env, cloned)
    finally:
        store.dispose()
    assert _pooled(engine, store) == []
    engine.dispose()


def test_pool_off_makes_no_pooled_schema(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    task = parse_seed_body(load_tasks(load_environment("retail").tasks_path)[0]).task
    engine = make_engine(PG_URL, pool_size=1)
    store = PgStore(Store(tmp_path / "data", env), engine, SchemaNames(pg_prefix), schema_pool=0)
    assert store.pool is None
    store.create_session("a" * 32, store.snapshot(task))
    with engine.connect() as conn:
        left = conn.execute(
            text("SELECT count(*) FROM pg_namespace WHERE nspname LIKE :p"),
            {"p": f"{pg_prefix}\\_p\\_%"},
        ).scalar()
    store.dispose()
    engine.dispose()
    assert left == 0


def test_the_pool_keeps_schemas_for_its_most_recent_templates_only(pg_prefix):
    """A training run seeds each task once and moves on: the pool drops the ready schemas of
    the least recently seeded snapshots past `max_templates`, so the catalog stays bounded."""
    from app.storage.postgres.pool import SchemaPool

    engine = make_engine(PG_URL, pool_size=2)

    def clone_into(template: str, name: str) -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {quoted(name)}")

    pool = SchemaPool(engine, pg_prefix, 1, clone_into, max_templates=2)
    pattern = pool.pattern()

    def pooled() -> int:
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM pg_namespace WHERE nspname LIKE :p"), {"p": pattern}
            )
            return int(found.scalar_one())

    def settled(expected: dict[str, int]) -> None:
        deadline = time.monotonic() + 60
        while pool.ready_count() != expected or pooled() != sum(expected.values()):
            assert time.monotonic() < deadline, (pool.ready_count(), pooled())
            time.sleep(0.05)

    try:
        for template in ("t1", "t2"):
            assert pool.take(template) is None  # nothing ready yet: the first seed clones
        settled({"t1": 1, "t2": 1})
        assert pool.take("t3") is None  # t1, least recently taken, goes: its schema dropped
        settled({"t2": 1, "t3": 1})
        assert pool.take("t2") is not None  # t2 is kept and its ready schema is served
    finally:
        pool.dispose()
        engine.dispose()
    assert pooled() == 1  # the schema taken from t2 is the caller's, not the pool's
