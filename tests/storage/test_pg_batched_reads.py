"""The PostgreSQL step log's batched reads (app/storage/postgres/steplog.py, `batched`): several
reads in one round trip must return exactly what one query per read returns, before and after
an undo in a scratch savepoint, and a verify must answer exactly the same (reward, evidence,
step and turn rewards) with either."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.postgres.db import session_connection
from app.storage.postgres.steplog import PgStepLog
from tests.conftest import backend_settings
from tests.storage.test_postgres import _calls
from tests.support.rollouts import gold_answer, load_tasks, response_object

# Raw writes after the gold calls, each its own step in the log (the runner is not involved):
# every kind of change, on tables with numeric, text, boolean and timestamp columns.
WRITES = [
    "UPDATE customers SET email = 'x' || email WHERE id IN (SELECT id FROM customers LIMIT 3)",
    "INSERT INTO addresses (customer_id, is_default, line1, city, state, zip, country) "
    "SELECT customer_id, false, 'n''q', city, state, zip, country FROM addresses LIMIT 2",
    "DELETE FROM order_items WHERE id = (SELECT max(id) FROM order_items)",
    "UPDATE orders SET status = 'cancelled' WHERE id = (SELECT min(id) FROM orders)",
    "UPDATE variants SET price = price + 0.01, stock = stock + 1 WHERE id IN "
    "(SELECT id FROM variants ORDER BY id LIMIT 2)",
]


def _reads(log: PgStepLog) -> dict[str, Any]:
    return {
        "steps": log.steps(),
        "migrated_at": log.migrated_at(),
        "changed_steps": log.changed_steps(),
        "change_counts": log.change_counts(),
        "row_images": log.row_images(),
        "changes": log.changes(),
        "count": log.count(),
    }


def _response(task: dict[str, Any]) -> dict[str, Any]:
    """The gold calls as the Responses API's function calls, so every step is aligned."""
    outputs: list[dict[str, Any]] = []
    for i, call in enumerate(_calls(task)):
        args = json.dumps(call["arguments"])
        outputs.append(
            {"type": "function_call", "call_id": f"c{i}", "name": call["name"], "arguments": args}
        )
        outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": "{}"})
    return response_object(outputs, gold_answer(task))


# `make test` reads one task's log; two more in `make test-slow`.
@pytest.mark.parametrize(
    "index", [pytest.param(5, marks=pytest.mark.slow), 17, pytest.param(30, marks=pytest.mark.slow)]
)
async def test_batched_step_log_reads_equal_one_query_per_read(
    tmp_path, pg_prefix, index, monkeypatch
):
    env = load_environment("retail")
    manager = SessionManager(backend_settings("postgres", tmp_path, pg_prefix), env)
    task = load_tasks(env.tasks_path)[index]
    of = PgStepLog.of

    async def both_ways(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The verify with batched reads, checked equal to one with one query per read."""
        batched = await manager.verify(session_id, body)
        with monkeypatch.context() as patch:
            patch.setattr(PgStepLog, "of", classmethod(lambda cls, c, m: _unbatched(of, c, m)))
            reference = await manager.verify(session_id, body)
        assert batched == reference
        return batched

    try:
        session_id = (await manager.seed(parse_seed_body(task))).session_id
        for call in _calls(task):
            await manager.call_tool(session_id, env.tool_named(call["name"]), call["arguments"])
        body = {**task, "response": _response(task)}
        verdict = await both_ways(session_id, body)
        assert verdict["reward"] == 1.0 and verdict["step_rewards"], "step rewards computed"

        schema = manager.backend.names.session(session_id)
        engine = manager.backend.engine
        for statement in WRITES:  # each its own transaction, after the calls' steps
            with session_connection(engine, schema) as conn, conn.begin():
                conn.exec_driver_sql(statement)
        with session_connection(engine, schema) as conn, conn.begin():
            batched = PgStepLog(conn, schema, env.metadata)
            one_by_one = PgStepLog(conn, schema, env.metadata, batched=False)
            reads = _reads(one_by_one)
            assert reads["row_images"] and len(reads["change_counts"]) >= 2
            assert _reads(batched) == reads
            # An undo in a scratch savepoint: the batched log rereads, inside and after.
            for step in (reads["count"] - 1, 0):
                with batched.scratch():
                    batched.undo_to(step)
                    undone = _reads(one_by_one)
                    assert undone != reads  # a stale read would differ
                    assert _reads(batched) == undone
                assert _reads(batched) == reads
        await both_ways(session_id, body)  # the raw writes in the log too
    finally:
        await manager.aclose()


def _unbatched(of: Any, conn: Any, metadata: Any) -> PgStepLog | None:
    found: PgStepLog | None = of(conn, metadata)
    if found is not None:
        found.batched = False
    return found
