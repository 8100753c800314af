"""Transactions on `make_engine`'s connections (app/storage/postgres/db.py): the driver runs in
psycopg's autocommit mode and SQLAlchemy's begin sends BEGIN, for a session in the same round
trip as its pin. Both kinds of transaction stay all-or-nothing, and a session's takes one round
trip before its first statement instead of two. The control table's hot queries, one statement
each, run without BEGIN: one round trip each instead of three."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from app.storage.postgres.control import open_pg_control
from app.storage.postgres.db import (
    SERVER_WORK_TIMEOUT_MS,
    STATUS,
    make_engine,
    quoted,
    session_connection,
)
from tests.conftest import PG_URL


def _count_round_trips(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """What psycopg sends from now on, a string per command: a cursor's statement, a
    connection's `execute`, or a command of its own (BEGIN, COMMIT, ROLLBACK)."""
    sent: list[str] = []

    def counted(original):  # type: ignore[no-untyped-def]
        def send(self, query, *args, **kwargs):  # type: ignore[no-untyped-def]
            sent.append(query.decode() if isinstance(query, bytes) else str(query))
            return original(self, query, *args, **kwargs)

        return send

    monkeypatch.setattr(psycopg.Cursor, "execute", counted(psycopg.Cursor.execute))
    # Connection.execute runs Cursor.execute: counted there once.
    monkeypatch.setattr(
        psycopg.Connection, "_exec_command", counted(psycopg.Connection._exec_command)
    )
    return sent


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
    with session_connection(engine, schema, status=True) as conn:
        conn.exec_driver_sql("SELECT 1").all()  # the pool's connection is made and set up
        conn.rollback()
        sent = _count_round_trips(monkeypatch)
        with conn.begin():
            assert conn.info[STATUS] == "open"
            conn.exec_driver_sql("INSERT INTO t VALUES (4)")
    assert len(sent) == 3, sent  # the pin (BEGIN included), the INSERT, COMMIT
    assert sent[0].startswith("BEGIN; SET LOCAL search_path TO ")
    assert "pg_advisory_xact_lock" in sent[0] and "_stategym_meta" in sent[0]
    assert sent[1:] == ["INSERT INTO t VALUES (4)", "COMMIT"]
    assert _rows(engine, schema) == [4]


def test_the_control_tables_hot_queries_are_one_round_trip_each_and_durable(  # type: ignore[no-untyped-def]
    pg_prefix, monkeypatch
) -> None:
    engine = make_engine(PG_URL, pool_size=1)
    control = open_pg_control(engine, f"{pg_prefix}_control")
    sid = "cd" * 16
    try:
        sent = _count_round_trips(monkeypatch)
        control.add(
            session_id=sid,
            env="retail",
            task_id="t-1",
            snapshot_key="k",
            file="f",
            resources_session_id=None,
            task={"task_id": "t-1"},
        )
        record = control.get(sid)
        control.mark_verified(sid, 1.0, {"reward": 1.0})
        assert control.mark_closed(sid) is True
        assert control.mark_closed(sid) is False  # closed already: the WHERE saw it
        assert len(sent) == 5, sent  # no BEGIN, COMMIT or ROLLBACK around any of them
        assert record is not None and record.status == "open"
        monkeypatch.undo()
        # Committed, each on its own: another connection sees the last write.
        other = make_engine(PG_URL, pool_size=1)
        try:
            with other.connect() as conn:
                row = conn.exec_driver_sql(
                    f"SELECT status, reward FROM {quoted(pg_prefix + '_control')}.sessions "
                    "WHERE id = %(id)s",
                    {"id": sid},
                ).one()
        finally:
            other.dispose()
        assert tuple(row) == ("closed", 1.0)
    finally:
        engine.dispose()


def test_the_tool_limit_bounds_tool_calls_and_not_the_servers_own_work(pg_prefix) -> None:  # type: ignore[no-untyped-def]
    """A tool call's transaction (it reads the session's status) is cancelled past the tool
    limit; the server's own reads of the session (verify, close) only past SERVER_WORK_TIMEOUT_MS,
    so a slow verify under load is not lost at a tool's limit."""
    engine = make_engine(PG_URL, pool_size=1, statement_timeout_ms=100)
    schema = f"{pg_prefix}_s_{'cd' * 16}"
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {quoted(schema)}")
            conn.exec_driver_sql(
                f"CREATE TABLE {quoted(schema)}._stategym_meta (key text, value text)"
            )
        with session_connection(engine, schema, status=True) as conn:
            with pytest.raises(OperationalError, match="statement timeout"), conn.begin():
                conn.exec_driver_sql("SELECT pg_sleep(0.3)")
        with session_connection(engine, schema) as conn, conn.begin():
            conn.exec_driver_sql("SELECT pg_sleep(0.3)")
            limit = conn.exec_driver_sql(
                "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'"
            ).scalar_one()
        assert int(limit) == SERVER_WORK_TIMEOUT_MS
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {quoted(schema)} CASCADE")
        engine.dispose()
