"""The raw fast paths write and read exactly what the SQLAlchemy paths they replace did.

Each test runs the same operations twice, once through the raw DB-API path and once with it
switched off, and compares the stored rows (or the results) byte for byte.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from app.core.lru import LRU
from app.core.tasks import task_from_data
from app.registry import load_environment
from app.sdk.environment import ToolContext
from app.storage.control import ControlDB
from app.storage.meta import read_meta
from app.storage.runner import run_tool
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite import dump_sql as sqlite_dump_sql
from app.storage.sqlite.control import open_sqlite_control
from app.storage.sqlite.store import Store
from app.verify.state import patching
from tests.storage.test_change_tracking import _dump, _random_write, load_fixture_tasks


def _control_ops(path: Path, *, raw: bool) -> tuple[list[tuple], list]:
    control: ControlDB = open_sqlite_control(path)
    if not raw:
        control = ControlDB(control.engine)  # the SQLAlchemy statements PostgreSQL runs
    created = datetime(2026, 11, 24, 1, 2, 3)
    task = {"task_id": "t-1", "seed": {"rows": {"x": [{"a": 1}]}}, "when": created}
    seen: list = []
    for n, sid in enumerate(("a" * 32, "b" * 32, "c" * 32)):
        control.add(
            session_id=sid,
            env="retail",
            task_id=f"t-{n}",
            snapshot_key="k" * 16,
            resources_session_id=None,
            file=f"sessions/retail/{sid}.sqlite",
            task=task,
            created_at=created.replace(microsecond=n * 7),
        )
    control.mark_verified("a" * 32, 1.0, {"reward": 1.0, "verification": {"x": [1, 2]}})
    seen.append(control.mark_closed("a" * 32))
    seen.append(control.mark_closed("a" * 32))  # already closed: False
    control.mark_verified("a" * 32, 0.5, {"reward": 0.5})  # stays closed, reward recorded
    seen.append(control.mark_closed("b" * 32, dropped=True))
    seen.append(control.mark_closed("f" * 32))  # unknown: False
    for sid in ("a" * 32, "b" * 32, "c" * 32, "f" * 32):
        record = control.get(sid)
        if record is not None:  # stamps differ between the runs; their types must not
            seen.append(
                (
                    record.id,
                    record.status,
                    record.reward,
                    record.task,
                    record.verify,
                    record.created_at,
                    type(record.verified_at),
                    type(record.closed_at),
                )
            )
        else:
            seen.append(None)
    control.dispose()
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT id, s.env, task_id, snapshot_key, resources_session_id, status, s.created_at, "
        "typeof(verified_at), length(verified_at), typeof(closed_at), length(closed_at), "
        "typeof(dropped_at), length(dropped_at), reward, file, task_digest, t.task_json, "
        "verify_json FROM sessions s JOIN task_rows t ON t.digest = s.task_digest ORDER BY id"
    ).fetchall()
    rows.append(conn.execute("SELECT count(*) FROM task_rows").fetchone())
    conn.close()
    return rows, seen


def test_raw_control_queries_are_identical_to_sqlalchemys(tmp_path):
    raw = _control_ops(tmp_path / "raw.sqlite", raw=True)
    orm = _control_ops(tmp_path / "orm.sqlite", raw=False)
    assert raw == orm
    assert raw[1][:4] == [True, False, True, False]


@pytest.mark.parametrize("env_name", ["retail", "airline", "ledger"])
def test_raw_cursor_dumps_are_identical_to_sqlalchemys(env_name, tmp_path, monkeypatch):
    """verify's dump statements on the DB-API cursor (app/storage/sqlite/dump_sql.py `execute`)
    read the same values, of the same types, as through SQLAlchemy, unreadable values included."""
    env = load_environment(env_name)
    store = Store(tmp_path / "data", env)
    rng = random.Random(env_name)
    task = task_from_data(rng.choice(load_fixture_tasks(env_name)))
    snapshot = store.snapshot(task)
    session = sqlite_db.memory_from_image(snapshot.image)
    bind = sqlite_db.bind_connection(session)
    ctx = ToolContext(now=snapshot.now, session_id="t", task_id=task.task_id)
    for call in task.ground_truth:
        run_tool(bind, env.tool_named(call.name), call.arguments, ctx)
    bind.close()
    for step in range(60):
        _random_write(session, env, rng, step)
    # Values the columns' types cannot read (an agent with SQL could write them).
    for table in env.metadata.sorted_tables:
        for column in table.columns:
            if column.primary_key or column.foreign_keys:
                continue
            with contextlib.suppress(sqlite3.DatabaseError):
                session.execute(
                    f'UPDATE "{table.name}" SET "{column.name}" = ? WHERE _rowid_ = '
                    f'(SELECT min(_rowid_) FROM "{table.name}")',
                    (rng.choice(["not-a-value", b"\x00\x01", 1e308, -7]),),
                )

    def dumps() -> list:
        pristine = _typed(_dump(sqlite_db.memory_from_image(snapshot.image), env, reuse=True))
        return [pristine] + [
            _typed(_dump(session, env, reuse=reuse)) for reuse in (True, False, True)
        ]

    fast = dumps()
    sqlite_dump_sql._sql_text.clear()

    def through_sqlalchemy(conn: Any, key: Any, build: Any, params: tuple[Any, ...] = ()) -> Any:
        return conn.execute(build(), {"ids": params[0]} if params else {})

    monkeypatch.setattr(sqlite_dump_sql, "execute", through_sqlalchemy)
    monkeypatch.setattr(patching, "_pristine", LRU(256))
    assert fast == dumps()


def _typed(dumped: Any) -> Any:
    return {
        name: (t.columns, t.key, [tuple((type(v).__name__, repr(v)) for v in r) for r in t.rows])
        for name, t in dumped.items()
    }


@pytest.mark.parametrize("env_name", ["retail", "airline"])
def test_a_session_file_is_its_snapshots_image_in_wal_mode(tmp_path: Path, env_name: str) -> None:
    """Every session is written from the snapshot's image in memory, its header's mode bytes set
    to WAL in passing: the same bytes but those two, and the same meta, rows and dump as the
    image itself; every seed of the snapshot gives the same file, and no temp file is left."""
    env = load_environment(env_name)
    store = Store(tmp_path / "data", env)
    task = task_from_data(random.Random(7).choice(load_fixture_tasks(env_name)))
    snapshot = store.snapshot(task)
    first = store.create_session_file("b" * 32, snapshot)
    second = store.create_session_file("a" * 32, snapshot)
    raw = first.read_bytes()
    assert raw == second.read_bytes()
    assert raw[18:20] == b"\x02\x02"  # WAL, written and read
    assert raw[:18] + raw[20:] == snapshot.image[:18] + snapshot.image[20:]
    image = sqlite_db.memory_from_image(snapshot.image)
    conn = sqlite_db.open_file(first)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert read_meta(conn) == read_meta(image)
        assert _dump(conn, env, reuse=False) == _dump(image, env, reuse=False)
        assert list(conn.iterdump()) == list(image.iterdump())
    finally:
        conn.close()
        image.close()
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, second.name])
