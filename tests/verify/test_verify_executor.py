"""Verifies run on threads of their own: one that takes long (its cost driven up by the agent,
or held here on purpose) never queues another rollout's seed, tool call or close behind it.

Two verifies are held inside the environment's invariant (run by verify on the final state)
until the other rollout is done; on a pool shared with seeds they held every thread and the
seed waited for them (the verify toggle attack: seeds stalled up to 25 s, bench/history/attacks.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import httpx

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, gold_answer, response_object

# A guard against hanging the suite if a held verify did block the rollout, not a timing claim.
DEADLOCK_GUARD_S = 30


async def test_held_verifies_never_hold_up_another_rollouts_seed_call_and_close(tmp_path: Path):
    gate, entered = threading.Event(), threading.Semaphore(0)

    def held(_db: Any) -> list[str]:
        entered.release()
        gate.wait(DEADLOCK_GUARD_S)
        return []

    sql = load_environment("sql")
    env = dataclasses.replace(sql, invariants=(*sql.invariants, held))
    task = json.loads(sql.tasks_path.read_text().splitlines()[0])
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, tool_threads=2)
    app = create_app(settings, env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://s", timeout=60) as c:
            body = {**task, "response": response_object([], gold_answer(task))}
            verifiers = [fresh_client(c) for _ in range(2)]
            for client in verifiers:
                assert (await client.post("/seed_session", json=task)).status_code == 200
            verifies = [asyncio.create_task(v.post("/verify", json=body)) for v in verifiers]
            await asyncio.to_thread(entered.acquire)  # the first verify is inside, held

            async def other_rollout() -> list[int]:
                async with fresh_client(c) as other:
                    seeded = await other.post("/seed_session", json=task)
                    called = await other.post("/list_tables", json={})
                    closed = await other.post("/close_session", json={})
                    return [seeded.status_code, called.status_code, closed.status_code]

            try:
                done = await asyncio.wait_for(other_rollout(), DEADLOCK_GUARD_S)
                assert not any(v.done() for v in verifies)  # they were still held meanwhile
            finally:
                gate.set()
            assert done == [200, 200, 200]
            for verified in await asyncio.gather(*verifies):
                # Nothing was called: the task's answer was never submitted (a no-op scores 0).
                assert verified.status_code == 200 and verified.json()["reward"] == 0.0
            for client in verifiers:
                await client.aclose()
