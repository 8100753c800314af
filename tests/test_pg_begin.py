"""Transactions on `make_engine`'s connections (app/storage/postgres/db.py): the driver runs in
psycopg's autocommit mode and SQLAlchemy's begin sends BEGIN, for a session in the same round
trip as its pin. Both kinds of transaction stay all-or-nothing, and a session's takes one round
trip before its first statement instead of two."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine

from app.storage.postgres.db import STATUS, make_engine, quoted, session_connection
from tests.conftest import PG_URL


@pytest.fixture()
def engine_and_schema(pg_prefix: str) -> Iterator[tuple[Engine, str]]:
    engine = make_engine(PG_URL, pool_size=1)
    schema = f"{pg_prefix}_s_{'ab' * 16}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {quoted(schema)}")
        conn.exec_driver_sql(f"CREATE TABLE {quoted(schema)}.t (v int PRIMARY KEY)")
        conn.exec_driver_sql(f"CREATE TABLE {quoted(schema)}._stategym_meta (key text, value text)")
    try:
        yield engine, schema
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {quoted(schema)} CASCADE")
        engine.dispose()


def _rows(engine: Engine, schema: str) -> list[int]:
    with engine.connect() as conn:
        return [r[0] for r in conn.exec_driver_sql(f"SELECT v FROM {quoted(schema)}.t ORDER BY v")]


def test_a_failing_session_transaction_changes_nothing(engine_and_schema) -> None:  # type: ignore[no-untyped-def]
    engine, schema = engine_and_schema
    with pytest.raises(RuntimeError), session_connection(engine, schema) as conn:
        with conn.begin():
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")  # unqualified: the pinned path
            raise RuntimeError("the tool failed after its first write")
    with session_connection(engine, schema) as conn, conn.begin():
        conn.exec_driver_sql("INSERT INTO t VALUES (2)")
    assert _rows(engine, schema) == [2]


def test_a_failing_plain_transaction_changes_nothing(engine_and_schema) -> None:  # type: ignore[no-untyped-def]
    engine, schema = engine_and_schema
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO {quoted(schema)}.t VALUES (1)")
        raise RuntimeError("a control write failed half-way")
    # A statement without an explicit begin autobegins, and is not committed unless asked.
    with engine.connect() as conn:
        conn.exec_driver_sql(f"INSERT INTO {quoted(schema)}.t VALUES (3)")
    assert _rows(engine, schema) == []


def test_a_session_transaction_is_one_round_trip_before_its_first_statement(  # type: ignore[no-untyped-def]
    engine_and_schema, monkeypatch
) -> None:
    engine, schema = engine_and_schema
    sent: list[str] = []
    execute, command = psycopg.Connection.execute, psycopg.Connection._exec_command

    def counted_execute(self, query, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(query.decode() if isinstance(query, bytes) else str(query))
        return execute(self, query, *args, **kwargs)

    def counted_command(self, command_, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(command_.decode() if isinstance(command_, bytes) else str(command_))
        return command(self, command_, *args, **kwargs)

    with session_connection(engine, schema, status=True) as conn:
        conn.exec_driver_sql("SELECT 1").all()  # the pool's connection is made and set up
        conn.rollback()
        monkeypatch.setattr(psycopg.Connection, "execute", counted_execute)
        monkeypatch.setattr(psycopg.Connection, "_exec_command", counted_command)
        with conn.begin():
            assert conn.info[STATUS] == "open"
            conn.exec_driver_sql("INSERT INTO t VALUES (4)")
    assert len(sent) == 2, sent  # the pin (BEGIN included), then COMMIT (the INSERT is a cursor's)
    assert sent[0].startswith("BEGIN; SET LOCAL search_path TO ")
    assert "pg_advisory_xact_lock" in sent[0] and "_stategym_meta" in sent[0]
    assert sent[1] == "COMMIT"
    assert _rows(engine, schema) == [4]
