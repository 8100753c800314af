"""`pg_connection_max_age_seconds`: a pooled PostgreSQL connection older than that is replaced by
a new backend at its next use (each backend's plan and relation caches grow with every schema it
touches, and every schema rename makes it walk them all: docs/postgres.md). Replacing one loses
nothing: a rollout whose connections are all replaced midway scores as before."""

from __future__ import annotations

import asyncio
import time

from app.storage.postgres.db import make_engine
from tests.conftest import PG_URL, backend_settings
from tests.server.test_protocol import TASK
from tests.support.rollouts import run_rollout
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE


def _backend_pid(engine) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def test_a_connection_past_its_age_is_replaced_at_its_next_use(pg_prefix):
    engine = make_engine(PG_URL, pool_size=1, max_age_s=1)
    try:
        first = _backend_pid(engine)
        assert _backend_pid(engine) == first  # young: the same backend again
        time.sleep(1.2)
        second = _backend_pid(engine)
        assert second != first
        with engine.connect() as conn:  # the old backend is gone, not merely idle
            alive = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (first,)
            ).scalar_one()
        assert alive == 0
    finally:
        engine.dispose()


async def test_rollouts_across_replaced_connections_score_as_before(
    client_factory, tmp_path, pg_prefix
):
    settings = backend_settings(
        "postgres", tmp_path / "data", pg_prefix, pg_connection_max_age_seconds=1
    )
    answer = "Done. " + " ".join(TASK.get("expected_outputs") or [])
    async with client_factory(WAREHOUSE, settings) as c:
        engine = c.app.state.protocol.sessions.backend.engine
        assert (await run_rollout(c, TASK, TASK["ground_truth"], answer))["reward"] == 1.0
        stale = time.time()
        await asyncio.sleep(1.2)
        assert (await run_rollout(c, TASK, TASK["ground_truth"], answer))["reward"] == 1.0
        records = list(engine.pool._pool.queue)  # the pool's idle connections
        assert records and all(r.starttime > stale for r in records)
        assert (await run_rollout(c, TASK, [], "nothing"))["reward"] == 0.0
