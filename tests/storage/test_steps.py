"""The step log (app/storage/steplog.py): for every task of every environment, the gold replayed
with the log on reaches the gold state and reward; undoing to every step k gives the state after
step k, and replaying the remaining calls from there gives the final state again; step rewards
add up to the state part of the reward. Then random call sequences (many failing) per
environment, rewound at random steps and compared with replays from the snapshot.
"""

from __future__ import annotations

import json
import random
import sqlite3
from typing import Any

import pytest

from app.core.tasks import task_from_data
from app.registry import ENVIRONMENTS, load_environment
from app.runtime.steps import StepRecorder
from app.sdk.environment import ToolContext
from app.storage.runner import run_tool
from app.storage.sqlite import branch
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Store
from app.storage.steplog import (
    change_counts,
    read_changes,
    read_steps,
    step_count,
    undo_supported,
    undo_to,
)
from app.verify import session_verify
from app.verify.gold import GoldCache
from app.verify.session_verify import verify_state
from app.verify.state.dump import dump_state
from tests.support.rollouts import gold_answer, load_tasks, response_object

ENV_NAMES = sorted(n for n in ENVIRONMENTS if load_environment(n).tasks_path.exists())


class Clone:
    """An in-memory session database cloned from an image, run like a live session."""

    def __init__(self, env: Any, image: bytes, now: Any):
        self.env = env
        self.conn = sqlite_db.memory_from_image(image)
        self.bind = sqlite_db.bind_connection(self.conn)
        self.ctx = ToolContext(now=now, session_id="test", task_id=None)

    def call(self, name: str, args: Any, *, log: bool = True) -> dict[str, Any]:
        tool = self.env.tool_named(name)
        if not log:
            return run_tool(self.bind, tool, args, self.ctx)
        step = StepRecorder(name, args)
        result = run_tool(self.bind, tool, args, self.ctx, None, step.on_success)
        if "error" in result:
            step.record_failure(self.conn, result)
        return result

    def state(self) -> Any:
        with self.bind.begin():
            return dump_state(self.bind, self.env.metadata.tables, self.env.compare)

    def copy(self) -> Clone:
        return Clone(self.env, sqlite_db.image_of(self.conn), self.ctx.now)

    def rewind(self, k: int) -> int:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            undone = undo_to(self.conn, k)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return undone

    def verify(self, task: Any, gold: GoldCache, response: Any, **kw: Any) -> dict[str, Any]:
        return verify_state(
            env=self.env,
            gold=gold,
            engine=self.bind,
            task=task,
            response=response,
            diff_limit=5,
            **kw,
        )

    def close(self) -> None:
        self.bind.close()
        self.conn.close()


def _gold_response(task_row: dict[str, Any], outputs: list[str]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i, (call, output) in enumerate(zip(task_row["ground_truth"], outputs, strict=True)):
        args = call["arguments"]
        args_text = args if isinstance(args, str) else json.dumps(args)
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": call["name"],
                "arguments": args_text,
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": output})
    return response_object(items, gold_answer(task_row))


def _args(call: dict[str, Any]) -> Any:
    args = call["arguments"]
    return json.loads(args) if isinstance(args, str) else args


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_gold_with_step_log_rewinds_to_the_seed_and_midway(env_name, tmp_path):
    """Every seventh task; rewinds and forks at step 0 and halfway (every task at every step: the
    slow test below)."""
    _check_gold_tasks(env_name, tmp_path, every_step=False, sample=7)


@pytest.mark.slow
@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_gold_with_step_log_rewinds_to_every_step(env_name, tmp_path):
    _check_gold_tasks(env_name, tmp_path, every_step=True)


def _check_gold_tasks(env_name: str, tmp_path: Any, *, every_step: bool, sample: int = 1) -> None:
    env = load_environment(env_name)
    store = Store(tmp_path, env)
    gold = GoldCache(store, 64)
    for row in load_tasks(load_environment(env_name).tasks_path)[::sample]:
        task = task_from_data(row)
        snapshot = store.snapshot(task)
        reference = gold.get(task)
        live = Clone(env, snapshot.image, snapshot.now)
        plain = Clone(env, snapshot.image, snapshot.now)
        calls = [(c["name"], _args(c)) for c in row["ground_truth"]]
        states, outputs = [live.state()], []
        for name, args in calls:
            result = live.call(name, args)
            assert plain.call(name, args, log=False) == result, (row["task_id"], name)
            outputs.append(json.dumps(result, ensure_ascii=False, separators=(",", ":")))
            states.append(live.state())
        tid = row["task_id"]
        assert states[-1] == reference.state, tid
        assert step_count(live.conn) == len(calls), tid
        assert undo_supported(live.conn, env.metadata.tables), tid
        # Logged outputs are exactly what the agent was sent.
        assert [s.output for s in read_steps(live.conn)] == outputs, tid
        response = _gold_response(row, outputs)
        logged = live.verify(task, gold, response)
        unlogged = plain.verify(task, gold, response, with_steps=False)
        assert logged["reward"] == unlogged["reward"], tid
        assert logged["reward_components"] == unlogged["reward_components"], tid
        assert logged["verification"]["trajectory"]["ok"], (tid, logged["verification"])
        assert len(logged["step_rewards"]) == len(calls)
        assert sum(logged["step_rewards"]) == pytest.approx(
            logged["reward_components"]["partial_credit"], abs=1e-4
        ), tid
        assert sum(logged["turn_rewards"]) == pytest.approx(sum(logged["step_rewards"]), abs=1e-5)
        # The potentials read from the log's row images equal those of undoing and dumping.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(session_verify, "potentials_from_log", lambda *a, **k: None)
            undone = live.verify(task, gold, response)
        assert undone["step_rewards"] == pytest.approx(logged["step_rewards"], abs=1e-6), tid
        tables = list(env.metadata.tables)
        for k in range(len(calls)) if every_step else sorted({0, len(calls) // 2}):
            # Rewind in place (on a copy of the file's image) ...
            rewound = live.copy()
            assert rewound.rewind(k) == len(calls) - k
            assert rewound.state() == states[k], (tid, k)
            assert step_count(rewound.conn) == k
            for name, args in calls[k:]:
                rewound.call(name, args)
            assert rewound.state() == states[-1], (tid, k)
            assert step_count(rewound.conn) == len(calls)
            rewound.close()
            # ... and a fork's image as of step k (what /fork_session writes).
            fork = Clone(env, branch.state_image(live.conn, k, tables)[0], snapshot.now)
            assert fork.state() == states[k], (tid, k)
            for name, args in calls[k:]:
                fork.call(name, args)
            forked = fork.verify(task, gold, response)
            assert forked["reward"] == logged["reward"], (tid, k)
            assert forked["step_rewards"] == logged["step_rewards"], (tid, k)
            fork.close()
        live.close()
        plain.close()


def _random_calls(
    row: dict[str, Any], rows: list[dict[str, Any]], rng: random.Random, extra: int = 8
) -> list:
    """The task's gold calls, with calls drawn from every task's gold inserted at random (many
    refer to other customers, orders, ...) and some arguments broken: many fail, some write."""
    pool = [(c["name"], _args(c)) for other in rows for c in other["ground_truth"]]
    calls = [(c["name"], _args(c)) for c in row["ground_truth"]]
    for _ in range(extra):
        name, args = rng.choice(pool)
        roll = rng.random()
        if roll < 0.15:
            args = ["not", "an", "object"]
        elif roll < 0.3 and isinstance(args, dict) and args:
            args = dict(args)
            args.pop(rng.choice(sorted(args)))
        calls.insert(rng.randrange(len(calls) + 1), (name, args))
    return calls


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_random_sequences_rewind_like_a_replay_from_the_snapshot(env_name, tmp_path):
    env = load_environment(env_name)
    store = Store(tmp_path, env)
    rows = load_tasks(load_environment(env_name).tasks_path)
    rng = random.Random(f"steps-{env_name}")
    failed = written = 0
    for round_, row in enumerate(rng.sample(rows[-12:], 6)):  # the later tasks write more
        task = task_from_data(row)
        snapshot = store.snapshot(task)
        live = Clone(env, snapshot.image, snapshot.now)
        calls = _random_calls(row, rows, rng)
        states = [live.state()]
        for name, args in calls:
            live.call(name, args)
            states.append(live.state())
        steps = read_steps(live.conn)
        assert len(steps) == len(calls)
        counts = change_counts(live.conn)
        for step in steps:
            if step.outcome != "ok":
                failed += 1
                assert step.idx not in counts, "a failed call recorded row changes"
            elif step.idx in counts:
                written += 1
        changes = read_changes(live.conn)
        for step_changes in changes.values():
            for change in step_changes:
                assert (change.before is None) == (change.op == "insert")
                assert (change.after is None) == (change.op == "delete")
        for k in sorted(rng.sample(range(len(calls) + 1), 4)):
            rewound = live.copy()
            rewound.rewind(k)
            fresh = Clone(env, snapshot.image, snapshot.now)
            for name, args in calls[:k]:
                fresh.call(name, args)
            assert rewound.state() == fresh.state() == states[k], (round_, k)
            assert [s[1:4] for s in map(_step_key, read_steps(rewound.conn))] == [
                s[1:4] for s in map(_step_key, read_steps(fresh.conn))
            ]
            rewound.close()
            fresh.close()
        live.close()
    assert failed, "no failing call was drawn"
    if env_name != "sql":  # the sql environment's gold is mostly reads
        assert written, "no writing call was drawn"


def _step_key(step: Any) -> tuple[Any, ...]:
    return (step.idx, step.tool, step.args, step.outcome, step.output_digest)


def test_undo_restores_blobs_reals_and_rowids_through_environment_triggers(tmp_path):
    """The sql environment refuses deletes of salaries (a trigger): undo still restores."""
    env = load_environment("sql")
    store = Store(tmp_path, env)
    row = load_tasks(load_environment("sql").tasks_path)[0]
    snapshot = store.snapshot(task_from_data(row))
    live = Clone(env, snapshot.image, snapshot.now)
    before = live.state()
    salaries = live.conn.execute("SELECT count(*) FROM salaries").fetchone()[0]
    live.conn.execute("BEGIN IMMEDIATE")
    # Outside any tool call: logged as the next step all the same, as agent SQL would be.
    live.conn.execute(
        "INSERT INTO salaries(id, employee_id, amount, effective_date, reason) "
        "SELECT id + 100000, employee_id, amount + 0.1 + 0.2, date(effective_date, '+40 years'), "
        "reason "
        "FROM salaries LIMIT 3"
    )
    live.conn.execute("UPDATE employees SET first_name = x'00ff' WHERE id = 1")
    live.conn.execute("COMMIT")
    assert live.state() != before
    triggers = live.conn.execute("SELECT count(*) FROM sqlite_master WHERE type='trigger'")
    count = triggers.fetchone()[0]
    live.rewind(0)
    assert live.conn.execute("SELECT count(*) FROM salaries").fetchone()[0] == salaries
    assert live.state() == before
    after = live.conn.execute("SELECT count(*) FROM sqlite_master WHERE type='trigger'")
    assert after.fetchone()[0] == count  # the environment's triggers are back
    with pytest.raises(sqlite3.IntegrityError):  # and still enforced
        live.conn.execute("DELETE FROM salaries")
    live.close()


def test_undo_and_images_round_trip_every_sqlite_value():
    """quote() literals read back exactly: reals (0.1 + 0.2, infinities), blobs, quotes, NULL,
    and a row whose rowid an update changed."""
    from app.storage.steplog import install_step_log, read_row_images, write_step

    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b REAL, c BLOB)")
    conn.execute("INSERT INTO t VALUES (1, 'x', 0.5, NULL), (2, 'y', 1.5, x'00')")
    install_step_log(conn, {"t": ["id", "a", "b", "c"]})
    before = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
    conn.execute("BEGIN")
    conn.execute("UPDATE t SET a = 'it''s Inf', b = 9e999, c = x'ff00' WHERE id = 1")
    conn.execute("UPDATE t SET id = 7, b = -9e999 WHERE id = 2")
    conn.execute("INSERT INTO t VALUES (3, NULL, 0.1 + 0.2, x'')")
    write_step(
        conn,
        {
            "tool": "t",
            "args": "{}",
            "outcome": "ok",
            "output": "{}",
            "output_digest": "",
            "output_bytes": 2,
            "duration_ms": 0.0,
        },
    )
    conn.execute("COMMIT")
    after = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
    images = read_row_images(conn)
    assert images[0].after == {"id": 1, "a": "it's Inf", "b": float("inf"), "c": b"\xff\x00"}
    assert images[1].before == {"id": 2, "a": "y", "b": 1.5, "c": b"\x00"}
    assert images[1].after is not None and images[1].after["b"] == float("-inf")
    assert images[2].after == {"id": 3, "a": None, "b": 0.1 + 0.2, "c": b""}
    conn.execute("BEGIN")
    assert undo_to(conn, 0) == 1
    conn.execute("COMMIT")
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == before != after


# --- both backends: the live session's log, through the backend ------------------------------
async def test_rewind_to_every_step_is_the_replay_of_the_first_k_calls(backend, tmp_path, request):
    """A live session (failing calls among the writes), through `SessionManager` and the
    backend: each failed call leaves the state as it was and a step with no row change;
    rewinding one step at a time from n to 0 gives, at each k, the state the first k calls
    left; replaying every call from there gives the same outputs (the same new ids) again."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from app.runtime.sessions import SessionManager
    from app.server.models import parse_seed_body
    from app.storage.steplog import step_log
    from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix

    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    env = load_environment("retail")
    manager = SessionManager(backend_settings(backend, tmp_path / "data", prefix), env)
    rows = load_tasks(load_environment("retail").tasks_path)
    row = next(r for r in rows if r["task_id"] == "retail-044")  # three writing steps
    calls = _random_calls(row, rows, random.Random("rewind-every-step"), extra=3)

    def dump(conn: Any) -> Any:  # every row of every table, exactly (quicker than dump_state)
        with Session(bind=conn) as db, db.begin():
            return [
                db.execute(select(t).order_by(*t.primary_key.columns)).all()
                for t in env.metadata.sorted_tables
            ]

    def log_of(conn: Any) -> Any:
        with conn.begin():
            log = step_log(conn)
            assert log is not None
            return log.steps(), log.change_counts()

    try:
        handle = await manager._handle((await manager.seed(parse_seed_body(row))).session_id)
        states, outputs = [manager.backend.read(handle, dump)], []
        for name, args in calls:
            result, _ = manager._timed_call(handle, env.tool_named(name), args)
            outputs.append(result)
            states.append(manager.backend.read(handle, dump))
            if "error" in result:
                assert states[-1] == states[-2], (name, result)
        steps, counts = manager.backend.read(handle, log_of)
        assert [s.tool for s in steps] == [name for name, _ in calls]
        failed = [s.idx for s in steps if s.outcome != "ok"]
        assert failed and not set(failed) & set(counts), "a failed call recorded row changes"
        assert counts, "no call wrote"
        for k in reversed(range(len(calls))):
            assert manager.backend.rewind(handle, k) == 1
            assert manager.backend.read(handle, dump) == states[k], k
        again = [manager._timed_call(handle, env.tool_named(n), a)[0] for n, a in calls]
        assert again == outputs
        assert manager.backend.read(handle, dump) == states[-1]
    finally:
        await manager.aclose()


def test_postgres_row_images_and_undo_round_trip_every_value(pg_prefix):
    """row_to_json images read back exactly through the columns' types (doubles, infinities,
    bytea, numerics, quotes, backslashes, percent signs, NULL), and undo restores them, a
    primary key changed by an update included."""
    from datetime import date, datetime
    from decimal import Decimal

    from sqlalchemy import (
        Boolean,
        Column,
        Date,
        DateTime,
        Float,
        Integer,
        LargeBinary,
        MetaData,
        Numeric,
        Table,
        Text,
    )

    from app.storage.postgres.db import (
        ensure_step_function,
        in_schema,
        make_engine,
        schema_ddl,
        session_connection,
    )
    from app.storage.postgres.steplog import PG_STEP_LOG_VERSION, PgStepLog
    from app.storage.steplog import write_step
    from tests.conftest import PG_URL

    metadata = MetaData()
    t = Table(
        "t",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("a", Text),
        Column("b", Float),
        Column("c", LargeBinary),
        Column("d", Numeric(12, 2)),
        Column("e", DateTime),
        Column("f", Date),
        Column("g", Boolean),
    )
    schema = f"{pg_prefix}_s_{'0' * 32}"
    ddl = schema_ddl(metadata)
    engine = make_engine(PG_URL, pool_size=1)
    first = {"id": 1, "a": "x", "b": 0.5, "c": None, "d": Decimal("1.00"),
             "e": datetime(2026, 3, 14, 10, 0), "f": date(2026, 3, 14), "g": True}  # fmt: skip
    try:
        with engine.begin() as conn:
            ensure_step_function(conn, pg_prefix)
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            conn.exec_driver_sql(in_schema(ddl.full, schema))
        with session_connection(engine, schema) as conn, conn.begin():
            conn.execute(t.insert(), [first, {**first, "id": 2, "a": "y", "c": b"\x00"}])
            conn.exec_driver_sql(
                "INSERT INTO _stategym_step_cols VALUES ('t', 'id,a,b,c,d,e,f,g'); "
                f"INSERT INTO _stategym_meta VALUES ('step_log', '{PG_STEP_LOG_VERSION}')"
            )
            conn.exec_driver_sql(in_schema(ddl.triggers, schema))
        before = _pg_rows(engine, schema, t)
        tricky = {
            "a": 'it\'s \\ 100% "q"',
            "b": float("inf"),
            "c": b"\xff\x00",
            "d": Decimal("12.50"),
            "e": datetime(1999, 12, 31, 23, 59, 59, 123456),
        }
        with session_connection(engine, schema) as conn, conn.begin():
            conn.execute(t.update().where(t.c.id == 1).values(**tricky))
            conn.execute(t.update().where(t.c.id == 2).values(id=7, b=float("-inf"), g=None))
            conn.execute(t.insert().values(id=3, a=None, b=0.1 + 0.2, c=b""))
            step = {"tool": "t", "args": "{}", "outcome": "ok", "output": "{}",
                    "output_digest": "", "output_bytes": 2, "duration_ms": 0.0}  # fmt: skip
            write_step(conn, step)
        after = _pg_rows(engine, schema, t)
        with session_connection(engine, schema) as conn, conn.begin():
            log = PgStepLog.of(conn, metadata)
            assert log is not None and log.undo_supported(["t"])
            images = log.row_images()
            assert [(i.step, i.op, i.old_rid, i.new_rid) for i in images] == [
                (1, "u", 1, 1),
                (1, "u", 2, 7),
                (1, "i", None, 3),
            ]
            assert images[0].before == before[1] and images[0].after == after[1]
            assert images[0].after["a"] == tricky["a"] and images[0].after["b"] == float("inf")
            assert images[1].before == before[2] and images[1].after == after[7]
            assert images[2].after == after[3] and images[2].after["b"] == 0.1 + 0.2
            assert log.undo_to(0, sequences=True) == 1
        assert _pg_rows(engine, schema, t) == before != after
        with session_connection(engine, schema) as conn, conn.begin():
            assert conn.exec_driver_sql("SELECT count(*) FROM _stategym_step_rows").scalar() == 0
            next_id = conn.execute(t.insert().values(a="z").returning(t.c.id)).scalar()
            assert next_id == 3  # the sequence continues after the rows kept, as on SQLite
    finally:
        engine.dispose()


def _pg_rows(engine: Any, schema: str, table: Any) -> dict[int, dict[str, Any]]:
    from sqlalchemy import select

    from app.storage.postgres.db import session_connection

    with session_connection(engine, schema) as conn, conn.begin():
        return {r["id"]: dict(r) for r in conn.execute(select(table)).mappings()}
