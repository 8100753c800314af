"""The step log's one trigger function per prefix (app/storage/postgres/db.py): every schema's
triggers call `<prefix>_fn._stategym_step_log()`, which writes each row change into the log of
the row's own schema, whichever schema the connection last served and whatever its search path.
A schema from a release that kept its own function is moved to the shared one when recycled."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, Engine

from app.registry import load_environment
from app.server.models import parse_seed_body
from app.storage.postgres.db import (
    SchemaNames,
    ensure_step_function,
    functions_schema,
    functions_schema_of,
    in_schema,
    make_engine,
    quoted,
    schema_ddl,
    session_connection,
)
from app.storage.postgres.step_triggers import QUIET
from app.storage.postgres.store import PgStore
from app.storage.sqlite.store import Store
from tests.conftest import PG_URL
from tests.storage.test_pg_schema_pool import _pooled, _schema_view, _wait_full
from tests.support.rollouts import load_tasks

# The per-schema function releases before round 7 made (its INSERT names its own schema).
_LEGACY_FUNCTION = """CREATE FUNCTION {s}._stategym_step_log() RETURNS trigger LANGUAGE plpgsql
AS $fn$ DECLARE o json; n json; BEGIN
  IF current_setting('stategym.quiet', true) = 'on' THEN RETURN NULL; END IF;
  IF TG_OP <> 'INSERT' THEN o := row_to_json(OLD); END IF;
  IF TG_OP <> 'DELETE' THEN n := row_to_json(NEW); END IF;
  INSERT INTO {s}._stategym_step_rows(step, tbl, op, old_rid, new_rid, old_vals, new_vals)
  SELECT coalesce(max(idx), 0) + 1, TG_TABLE_NAME, lower(left(TG_OP, 1)),
         (o ->> TG_ARGV[0])::bigint, (n ->> TG_ARGV[0])::bigint, o, n FROM {s}._stategym_steps;
  RETURN NULL; END $fn$"""


def _store(tmp_path, pg_prefix, pool: int = 0):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    task = parse_seed_body(load_tasks(load_environment("retail").tasks_path)[0]).task
    engine = make_engine(PG_URL, pool_size=1)  # one connection: every schema on one backend
    store = PgStore(Store(tmp_path / "data", env), engine, SchemaNames(pg_prefix), schema_pool=pool)
    return env, engine, store, store.snapshot(task)


def _logged(engine: Engine, schema: str) -> list[tuple[str, str, int | None]]:
    with engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.exec_driver_sql(
                f"SELECT tbl, op, new_rid FROM {quoted(schema)}._stategym_step_rows ORDER BY seq"
            )
        ]


def test_sessions_written_in_turn_on_one_connection_log_into_their_own_schema(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    _, engine, store, snapshot = _store(tmp_path, pg_prefix)
    try:
        a = store.create_session("a" * 32, snapshot)
        b = store.create_session("b" * 32, snapshot)
        # The function's INSERT is planned once on the connection and must be re-planned at
        # every switch of search path: a stale plan would write into the other schema's log.
        for n, schema in enumerate([a, b, a, a, b]):
            with session_connection(engine, schema) as conn, conn.begin():
                conn.exec_driver_sql(f"UPDATE orders SET ship_city = 'c{n}' WHERE id = {n + 1}")
        assert _logged(engine, a) == [("orders", "u", 1), ("orders", "u", 3), ("orders", "u", 4)]
        assert _logged(engine, b) == [("orders", "u", 2), ("orders", "u", 5)]
        # Outside a session's pinned search path (a script, a migration) the row's schema is
        # addressed by name: still its own log.
        with engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE {quoted(b)}.orders SET ship_city = 'x' WHERE id = 7")
            conn.exec_driver_sql(f"SET LOCAL search_path TO {quoted(a)}")
            conn.exec_driver_sql(f"DELETE FROM {quoted(b)}.payments WHERE id = 1")
        assert _logged(engine, b)[2:] == [("orders", "u", 7), ("payments", "d", None)]
        assert len(_logged(engine, a)) == 3
        # No schema holds a function of its own.
        with engine.connect() as conn:
            own = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_proc WHERE pronamespace IN "
                f"(to_regnamespace('{quoted(a)}'), to_regnamespace('{quoted(b)}'))"
            ).scalar()
        assert own == 0
    finally:
        store.dispose()
        engine.dispose()


def _compiled_copies(conn: Connection) -> int:
    """How many compiled copies of the step function this backend holds (PL/pgSQL keeps one
    per trigger it ran: its hash key holds the trigger's OID)."""
    copies = conn.exec_driver_sql(
        "SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'PL/pgSQL function' "
        "AND ident LIKE '%%._stategym_step_log()'"
    ).scalar()
    conn.rollback()  # a read: end the transaction it began
    return int(copies or 0)


def _old_form_trigger(conn: Connection, schema: str, table: str) -> None:
    """`table`'s step trigger as releases before the WHEN clause made it."""
    function = f"{quoted(functions_schema_of(schema))}._stategym_step_log"
    conn.exec_driver_sql(
        f"DROP TRIGGER _stategym_step_{table} ON {quoted(schema)}.{table};"
        f"CREATE TRIGGER _stategym_step_{table} AFTER INSERT OR UPDATE OR DELETE ON "
        f"{quoted(schema)}.{table} FOR EACH ROW EXECUTE FUNCTION {function}('id')"
    )


def test_a_quiet_write_never_runs_the_step_function_and_is_not_logged(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    _, engine, store, snapshot = _store(tmp_path, pg_prefix)
    try:
        a = store.create_session("a" * 32, snapshot)
        engine.dispose()  # a backend that has run no trigger yet
        with session_connection(engine, a) as conn:
            superuser = "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
            if not conn.exec_driver_sql(superuser).scalar():
                pytest.skip("pg_backend_memory_contexts needs a superuser")
            conn.rollback()
            with conn.begin():
                conn.exec_driver_sql(QUIET)
                conn.exec_driver_sql("UPDATE orders SET ship_city = 'q' WHERE id = 1")
                conn.exec_driver_sql("DELETE FROM payments WHERE id = 1")
            assert _compiled_copies(conn) == 0  # the WHEN clause: the function never ran
            with conn.begin():
                conn.exec_driver_sql("UPDATE orders SET ship_city = 'loud' WHERE id = 2")
            assert _compiled_copies(conn) == 1
        assert _logged(engine, a) == [("orders", "u", 2)]
        # A trigger of an older schema (no WHEN clause) runs the function, which stays quiet
        # too: under the session's search path and addressed by name from elsewhere.
        with engine.begin() as conn:
            _old_form_trigger(conn, a, "orders")
        with session_connection(engine, a) as conn, conn.begin():
            conn.exec_driver_sql(QUIET)
            conn.exec_driver_sql("UPDATE orders SET ship_city = 'q2' WHERE id = 3")
        with engine.begin() as conn:
            conn.exec_driver_sql(QUIET)
            conn.exec_driver_sql(f"UPDATE {quoted(a)}.orders SET ship_city = 'q3' WHERE id = 4")
        assert _logged(engine, a) == [("orders", "u", 2)]
        with engine.begin() as conn:  # and logs a loud write as before
            conn.exec_driver_sql(f"UPDATE {quoted(a)}.orders SET ship_city = 'l' WHERE id = 5")
        assert _logged(engine, a) == [("orders", "u", 2), ("orders", "u", 5)]
    finally:
        store.dispose()
        engine.dispose()


def test_the_function_is_created_once_and_only_replaced_when_its_body_changes(tmp_path, pg_prefix):  # type: ignore[no-untyped-def]
    engine = make_engine(PG_URL, pool_size=1)
    function = f"{quoted(functions_schema(pg_prefix))}._stategym_step_log()"

    def version() -> tuple[str, str]:
        with engine.connect() as conn:
            return tuple(
                conn.exec_driver_sql(
                    f"SELECT xmin::text, prosrc FROM pg_proc WHERE oid = '{function}'::regprocedure"
                ).one()
            )

    try:
        with engine.begin() as conn:
            ensure_step_function(conn, pg_prefix)
        first = version()
        with engine.begin() as conn:  # a second replica starting: nothing re-created
            ensure_step_function(conn, pg_prefix)
        assert version() == first
        with engine.begin() as conn:  # an older body (another release): brought up to date
            conn.exec_driver_sql(
                f"CREATE OR REPLACE FUNCTION {function} RETURNS trigger LANGUAGE plpgsql "
                "AS $fn$ BEGIN RETURN NULL; END $fn$"
            )
            ensure_step_function(conn, pg_prefix)
        assert version()[1] == first[1] and version()[0] != first[0]
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f"DROP SCHEMA IF EXISTS {quoted(functions_schema(pg_prefix))} CASCADE"
            )
        engine.dispose()


def test_a_schema_with_its_own_function_is_moved_to_the_shared_one_when_recycled(
    tmp_path, pg_prefix
):  # type: ignore[no-untyped-def]
    env, engine, store, snapshot = _store(tmp_path, pg_prefix, pool=1)
    try:
        assert store.pool is not None
        schema = store.create_session("c" * 32, snapshot)
        template = store.base_schema
        _wait_full(store, template, 1)
        # As an older release left it: its own function, its triggers calling it.
        ddl = schema_ddl(env.metadata)
        with engine.begin() as conn:
            for statement in in_schema(ddl.triggers, schema).split(";\n"):
                name, table = statement.split(" ")[2], statement.split(" ON ")[1].split(" ")[0]
                conn.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
            conn.exec_driver_sql(_LEGACY_FUNCTION.format(s=quoted(schema)))
            conn.exec_driver_sql(
                in_schema(ddl.triggers, schema).replace(
                    f"{quoted(functions_schema(pg_prefix))}.", f"{quoted(schema)}."
                )
            )
        with session_connection(engine, schema) as conn, conn.begin():
            conn.exec_driver_sql("UPDATE orders SET ship_city = 'legacy' WHERE id = 1")
        assert _logged(engine, schema) == [("orders", "u", 1)]  # the legacy trigger logs
        fresh = store.names.session("f" * 32)
        store._clone(template, fresh)
        before = set(_pooled(engine, store))
        assert store.recycle_session("c" * 32)
        (recycled,) = set(_pooled(engine, store)) - before
        # _schema_view asserts the triggers call the prefix's function and none is the schema's.
        assert _schema_view(engine, env, recycled) == _schema_view(engine, env, fresh)
    finally:
        store.dispose()
        engine.dispose()
