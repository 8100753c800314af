"""Verify's patched dumps (snapshot dump + the rows a session wrote) equal full dumps.

Each environment's snapshot is cloned, its gold solution replayed, then hundreds of random raw
writes (updates, deletes, inserted copies; many refused by constraints) are applied; after every
step the dump verify uses must equal reading every table whole.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.core.lru import LRU
from app.core.tasks import task_from_data
from app.registry import load_environment
from app.sdk.compare_spec import FRAMEWORK_TABLES
from app.sdk.environment import ToolContext
from app.storage.runner import run_tool
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Store
from app.storage.tracking import tracked_changes
from app.verify.state.diff import diff_states
from app.verify.state.dump import dump_state
from tests.conftest import ENV_NAMES, PORTABLE_ENVS


def load_fixture_tasks(env_name: str) -> list[dict[str, Any]]:
    lines = load_environment(env_name).tasks_path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _dump(conn: sqlite3.Connection, env: Any, *, reuse: bool) -> Any:
    bind = sqlite_db.bind_connection(conn, begin="BEGIN")
    try:
        with bind.begin():
            return dump_state(bind, env.metadata.tables, env.compare, reuse=reuse)
    finally:
        bind.close()


def _random_write(conn: sqlite3.Connection, env: Any, rng: random.Random, step: int) -> None:
    table = rng.choice(env.metadata.sorted_tables)
    rowids = [r[0] for r in conn.execute(f'SELECT _rowid_ FROM "{table.name}"')]
    if not rowids:
        return
    rowid = rng.choice(rowids)
    pk = {c.name for c in table.primary_key.columns}
    texts = [c.name for c in table.columns if c.name not in pk and c.type.python_type is str]
    kind = rng.choice(["update", "update", "delete", "copy"])
    try:
        if kind == "update" and texts:
            column = rng.choice(texts)
            conn.execute(
                f'UPDATE "{table.name}" SET "{column}" = ? WHERE _rowid_ = ?', (f"w{step}", rowid)
            )
        elif kind == "delete":
            conn.execute(f'DELETE FROM "{table.name}" WHERE _rowid_ = ?', (rowid,))
        elif kind == "copy":
            cols = ", ".join(f'"{c.name}"' for c in table.columns if c.name not in pk)
            conn.execute(
                f'INSERT INTO "{table.name}" ({cols}) SELECT {cols} FROM "{table.name}" '
                "WHERE _rowid_ = ?",
                (rowid,),
            )
    except (sqlite3.IntegrityError, NotImplementedError):
        pass  # refused by a constraint (or a column without a Python type): nothing changed


@pytest.mark.parametrize("env_name", PORTABLE_ENVS)
def test_patched_dumps_equal_full_dumps(env_name: str, tmp_path: Path) -> None:
    env = load_environment(env_name)
    store = Store(tmp_path / "data", env)
    rng = random.Random(env_name)
    for row in rng.sample(load_fixture_tasks(env_name), 1):
        task = task_from_data(row)
        snapshot = store.snapshot(task)
        seed_state = _dump(sqlite_db.memory_from_image(snapshot.image), env, reuse=True)
        session = sqlite_db.memory_from_image(snapshot.image)
        bind = sqlite_db.bind_connection(session)
        ctx = ToolContext(now=snapshot.now, session_id="t", task_id=task.task_id)
        for call in task.ground_truth:
            run_tool(bind, env.tool_named(call.name), call.arguments, ctx)
        bind.close()
        gold, gold_whole = _dump(session, env, reuse=True), _dump(session, env, reuse=False)
        assert gold == gold_whole
        seed_whole = _dump(sqlite_db.memory_from_image(snapshot.image), env, reuse=False)
        for step in range(80):
            _random_write(session, env, rng, step)
            if step % 10 == 9:
                patched = _dump(session, env, reuse=True)
                whole = _dump(session, env, reuse=False)
                assert patched == whole, (task.task_id, step)
                if step % 40 != 39:
                    continue
                # Diffs of patched states look at the patched rows only; they must find what
                # the whole tables' diff finds (seed -> final, and gold vs final: two patches
                # of one base), in the same order.
                compare = env.compare
                assert any(t.origin is not None for t in patched.values()), "patches were made"
                assert diff_states(seed_state, patched, compare) == diff_states(
                    seed_whole, whole, compare
                ), (task.task_id, step)
                assert diff_states(gold, patched, compare) == diff_states(
                    gold_whole, whole, compare
                ), (task.task_id, step)
        changes = tracked_changes(session, env.metadata.tables)
        assert changes is not None and changes.rows, "the writes were recorded row by row"
        untouched = {
            name
            for name in set(seed_state) - changes.tables
            if not any(
                f"{ref}#key" in changes.tables
                for ref in env.compare.for_table(name).references.values()
            )
        }
        patched = _dump(session, env, reuse=True)
        assert all(patched[name] is seed_state[name] for name in untouched)


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_seed_states_patched_from_the_template_equal_full_dumps(env_name, tmp_path, monkeypatch):
    """A snapshot's seed state is its template's dump patched with the rows its seed wrote
    (app.storage.meta.seed_changes); it must equal reading the snapshot whole, and a session
    cloned from the snapshot must then patch that dump (not read every table again)."""
    from app.verify.gold import GoldCache
    from app.verify.state import dump as state_module
    from app.verify.state import patching

    env = load_environment(env_name)
    store = Store(tmp_path / "data", env)
    gold = GoldCache(store, 64)
    whole_reads = []
    monkeypatch.setattr(patching, "_pristine", LRU(256))  # as in a fresh process
    real_dump_all = state_module._dump_all
    monkeypatch.setattr(
        state_module, "_dump_all", lambda *a, **k: whole_reads.append(1) or real_dump_all(*a, **k)
    )
    gold.seed_state(task_from_data({"seed": None, "ground_truth": []}))  # the template, read once
    assert len(whole_reads) == 1
    for row in load_fixture_tasks(env_name)[::3]:
        task = task_from_data(row)
        seeded = gold.seed_state(task)
        snapshot = sqlite_db.memory_from_image(store.snapshot(task).image)
        # A session clone of the snapshot patches the kept dump: equal, and no whole read.
        assert _dump(snapshot, env, reuse=True) == seeded, task.task_id
        assert len(whole_reads) == 1, f"{task.task_id}: a seed state read every table"
        assert seeded == _dump(snapshot, env, reuse=False), task.task_id
        whole_reads.pop()
        snapshot.close()


@pytest.mark.parametrize("env_name", PORTABLE_ENVS)
def test_trigger_tracking_sees_every_write_path(env_name: str) -> None:
    """The change-tracking triggers (the task generator's tracked base: one keyless record
    table, plain INSERT bodies) record every write, whatever conflict clause the writing
    statement carries: an UPSERT and an INSERT OR REPLACE on a tracked table are not refused,
    and after random writes the patched dump equals reading every table whole."""
    from app.taskgen.gold_run import tracked_base

    env = load_environment(env_name)
    conn = sqlite_db.memory_from_image(tracked_base(env))
    _dump(conn, env, reuse=True)  # the pristine clone's dump, kept: later dumps patch it
    rng = random.Random(f"{env_name}/triggers")
    # The environment's own tables: the framework's (answer, user, conversation) are scored
    # apart and not tracked.
    own = [t for t in env.metadata.sorted_tables if t.name not in FRAMEWORK_TABLES]
    table = rng.choice([t for t in own if len(t.primary_key) == 1])
    (pk,) = [c.name for c in table.primary_key.columns]
    (rowid,) = conn.execute(f'SELECT min(_rowid_) FROM "{table.name}"').fetchone()
    cols = ", ".join(f'"{c.name}"' for c in table.columns)
    conn.execute(
        f'INSERT INTO "{table.name}" ({cols}) SELECT {cols} FROM "{table.name}" '
        f'WHERE _rowid_ = ? ON CONFLICT("{pk}") DO UPDATE SET "{pk}" = excluded."{pk}"',
        (rowid,),
    )
    conn.execute(
        f'INSERT OR REPLACE INTO "{table.name}" ({cols}) SELECT {cols} FROM "{table.name}" '
        "WHERE _rowid_ = ?",
        (rowid,),
    )
    changes = tracked_changes(conn, env.metadata.tables)
    assert changes is not None and table.name in changes.tables
    assert changes.rows is not None and rowid in changes.rows[table.name]
    for step in range(40):
        _random_write(conn, env, rng, step)
        if step % 10 == 9:
            assert _dump(conn, env, reuse=True) == _dump(conn, env, reuse=False), step
    conn.close()
