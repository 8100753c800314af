"""PostgreSQL sessions are the base template plus their task's seed rows (app/storage/postgres/
seed_rows.py), never a template schema per task.

The previous build (`PgStore.reference_template`: a template schema per task, every row copied
from the snapshot image, then cloned) is the reference: a session seeded the new way, cloned or
from the pool, must hold the same rows in every table, the same meta, step log, sequences,
indexes, constraints and triggers, and dump (verify's view) and score alike. Distinct tasks must
not grow the catalog: the schemas stay within the pool's bound however many tasks are seeded.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from app.core.tasks import task_from_data
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.postgres.db import SEED_TABLE, SchemaNames, make_engine, quoted, session_connection
from app.storage.postgres.store import PgStore
from app.storage.sqlite.store import Store
from app.verify.state.dump import dump_state
from app.verify.state.patching import remembered
from tests.conftest import PG_URL, backend_settings
from tests.storage.test_pg_schema_pool import _pooled, _schema_view, _wait_full
from tests.storage.test_postgres import _calls
from tests.support.rollouts import gold_answer, load_tasks, response_object

# Every environment PostgreSQL serves (`sql` requires SQLite: tests/storage/test_postgres.py).
PG_ENVS = ["retail", "airline", "ledger", "workplace"]


def _retail_edge_task() -> dict[str, Any]:
    """A shipped retail task whose seed also updates a base row (a value with a percent sign
    and a quote) and inserts a row without an id (the sequence picks it, after the base's)."""
    task = copy.deepcopy(load_tasks(load_environment("retail").tasks_path)[4])
    rows = task["seed"]["rows"]
    rows["customers"].append({"id": 1, "email": "o'hara+50%@example.com"})
    extra = {k: v for k, v in rows["addresses"][0].items() if k != "id"}
    rows["addresses"].append({**extra, "line1": "2 Side St"})
    task["task_id"] = "retail-edge"
    return task


def _tasks(env_name: str) -> list[dict[str, Any]]:
    tasks = load_tasks(load_environment(env_name).tasks_path)
    seeded = [t for t in tasks if (t.get("seed") or {}).get("rows")][:3]
    plain = [t for t in tasks if not (t.get("seed") or {}).get("rows")][:1]
    return seeded + plain + ([_retail_edge_task()] if env_name == "retail" else [])


def _dump(engine, env, schema: str, *, reuse: bool):  # type: ignore[no-untyped-def]
    with session_connection(engine, schema) as conn, conn.begin():
        return dump_state(conn, env.metadata.tables, env.compare, reuse=reuse)


@pytest.mark.parametrize("env_name", PG_ENVS)
def test_a_seeded_session_equals_a_clone_of_the_previous_task_template(
    tmp_path: Path, pg_prefix: str, env_name: str
) -> None:
    env = load_environment(env_name)
    engine = make_engine(PG_URL, pool_size=2)
    names = SchemaNames(pg_prefix)
    store = PgStore(Store(tmp_path / "data", env), engine, names, schema_pool=1)
    try:
        for n, row in enumerate(_tasks(env_name)):
            snapshot = store.snapshot(task_from_data(row))
            reference = store.reference_template(snapshot)
            expected = names.session(f"e{n:031x}")
            store._clone(reference, expected)
            seeded = store.create_session(f"a{n:031x}", snapshot)  # the pool's first: a clone
            _wait_full(store, store.base_schema, 1)
            pooled = store.create_session(f"b{n:031x}", snapshot)  # a pooled schema, renamed
            view = _schema_view(engine, env, expected)
            assert _schema_view(engine, env, seeded) == view, row["task_id"]
            assert _schema_view(engine, env, pooled) == view, row["task_id"]
            state = _dump(engine, env, expected, reuse=False)
            assert _dump(engine, env, seeded, reuse=False) == state
            assert _dump(engine, env, pooled, reuse=True) == state  # as seeded: no change
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {quoted(reference)} CASCADE")
    finally:
        store.dispose()
        engine.dispose()


@pytest.mark.parametrize("env_name", PG_ENVS)
async def test_seeded_sessions_score_gold_1_and_noop_0(
    tmp_path: Path, pg_prefix: str, env_name: str
) -> None:
    """Through the protocol, the pool on and sessions recycled at close: every task's gold
    rollout scores 1 and a no-op 0, the second rollout of a task verifying against the dump
    kept from the first (patched with what it wrote)."""
    env = load_environment(env_name)
    settings = backend_settings(
        "postgres", tmp_path, pg_prefix, pg_schema_pool=1, retention="delete_on_close"
    )
    manager = SessionManager(settings, env)
    store = manager.backend.store
    try:
        for task in _tasks(env_name):
            request = parse_seed_body(task)
            body = {**task, "response": response_object([], gold_answer(task))}
            for _ in range(2):
                gold = (await manager.seed(request)).session_id
                noop = (await manager.seed(request)).session_id
                for call in _calls(task):
                    await manager.call_tool(gold, env.tool_named(call["name"]), call["arguments"])
                # Verify's dump (the seeded state: the base's dump patched with the seed rows,
                # then patched with the gold's writes) equals a whole read.
                schema = store.names.session(gold)
                whole = _dump(store.engine, env, schema, reuse=False)
                assert _dump(store.engine, env, schema, reuse=True) == whole, task["task_id"]
                result = await manager.verify(gold, body)
                assert result["reward"] == 1.0, (task["task_id"], result["verification"])
                empty = {**task, "response": response_object([], "")}
                assert (await manager.verify(noop, empty))["reward"] == 0.0, task["task_id"]
                await manager.close(gold)
                await manager.close(noop)
        assert remembered(f"pg:{store.base_schema}", env.compare) is not None
    finally:
        await manager.aclose()


def _schemas(engine, prefix: str, base: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Schemas under `prefix` by kind, the catalog's relations in them, and in the base's, read
    in one snapshot: the pool's refill thread may commit a clone between the two queries."""
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        kinds = conn.execute(
            text(
                "SELECT substr(nspname, length(:p) + 1, 3), count(*) FROM pg_namespace "
                "WHERE nspname LIKE :like GROUP BY 1"
            ),
            {"p": prefix, "like": prefix + "\\_%"},
        ).all()
        relations = conn.execute(
            text(
                "SELECT count(*), count(*) FILTER (WHERE n.nspname = :base) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname LIKE :like"
            ),
            {"like": prefix + "\\_%", "base": base},
        ).one()
    found = {kind: int(n) for kind, n in kinds}
    return {**found, "relations": int(relations[0]), "per_schema": int(relations[1])}


async def test_distinct_tasks_do_not_grow_the_catalog(tmp_path: Path, pg_prefix: str) -> None:
    """A training run's shape: each task seeded as a group, closed, never seen again. One base
    template, pooled schemas bounded by the pool and the sessions in flight at once (never by
    the number of tasks), and every relation in the catalog one of those schemas'."""
    env = load_environment("retail")
    settings = backend_settings(
        "postgres", tmp_path, pg_prefix, pg_schema_pool=2, retention="delete_on_close"
    )
    manager = SessionManager(settings, env)
    store = manager.backend.store
    tasks = [t for t in load_tasks(env.tasks_path) if (t.get("seed") or {}).get("rows")][:12]
    seen: list[dict[str, int]] = []
    try:
        for task in tasks:
            request = parse_seed_body(task)
            group = [(await manager.seed(request)).session_id for _ in range(3)]
            for session_id in group:
                await manager.close(session_id)
            seen.append(_schemas(store.engine, pg_prefix, store.base_schema))
        # Relations outside session, pooled and template schemas (control, archive, function).
        fixed = seen[0]["relations"] - seen[0]["per_schema"] * (
            seen[0]["_t_"] + seen[0].get("_p_", 0) + seen[0].get("_s_", 0)
        )
        for found in seen:
            assert found.get("_t_") == 1, found  # the base template only
            # The pool's size, the group's sessions returned by closes (a seed that found the
            # pool empty meanwhile cloned one more) and a refill in flight: never per task.
            assert found.get("_p_", 0) + found.get("_s_", 0) <= 2 + 2 * 3 + 1, found
            schemas = found["_t_"] + found.get("_p_", 0) + found.get("_s_", 0)
            assert found["relations"] == fixed + found["per_schema"] * schemas, found
        assert list(store.pool.ready_count()) == [store.base_schema]
    finally:
        await manager.aclose()


def test_a_recycled_seeded_schema_is_the_base_again(tmp_path: Path, pg_prefix: str) -> None:
    """Recycling writes the base's rows back over the seed's (updated rows restored, inserted
    ones deleted) and empties the seed rows: the schema equals a fresh clone of the base."""
    env = load_environment("retail")
    engine = make_engine(PG_URL, pool_size=2)
    names = SchemaNames(pg_prefix)
    store = PgStore(Store(tmp_path / "data", env), engine, names, schema_pool=1)
    try:
        assert store.pool is not None
        snapshot = store.snapshot(task_from_data(_retail_edge_task()))
        used = store.create_session("a" * 32, snapshot)
        base = store.base_schema
        _wait_full(store, base, 1)
        with engine.connect() as conn:
            kept = conn.exec_driver_sql(f"SELECT count(*) FROM {quoted(used)}.{SEED_TABLE}")
            assert kept.scalar_one() > 0
        fresh = names.session("f" * 32)
        store._clone(base, fresh)
        before = set(_pooled(engine, store))
        assert store.recycle_session("a" * 32)
        (recycled,) = set(_pooled(engine, store)) - before
        assert _schema_view(engine, env, recycled) == _schema_view(engine, env, fresh)
        with engine.connect() as conn:
            left = conn.exec_driver_sql(f"SELECT count(*) FROM {quoted(recycled)}.{SEED_TABLE}")
            assert left.scalar_one() == 0
    finally:
        store.dispose()
        engine.dispose()
