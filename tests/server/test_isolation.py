"""Dozens of sessions of one task, driven concurrently: each sees and is scored on its own calls."""

from __future__ import annotations

import asyncio

from tests.server.test_protocol import TASK
from tests.support.rollouts import fresh_client, response_object


async def _rollout(shared, n: int) -> tuple[int, dict, dict]:
    async with fresh_client(shared) as client:
        assert (await client.post("/seed_session", json=TASK)).status_code == 200
        # Session n removes n % 4 units; the gold (remove 2) is right only for n % 4 == 2.
        delta = -(n % 4)
        if delta:
            await client.post(
                "/move_stock", json={"sku": "SKU-9001", "delta": delta, "reason": "sold"}
            )
        await asyncio.sleep(0)
        seen = (await client.post("/get_item", json={"sku": "SKU-9001"})).json()["output"]
        verdict = (
            await client.post("/verify", json={**TASK, "response": response_object([], "3 left")})
        ).json()
        return n, seen, verdict


async def test_concurrent_sessions_are_isolated(warehouse):
    results = await asyncio.gather(*(_rollout(warehouse, n) for n in range(48)))
    for n, seen, verdict in results:
        assert seen["quantity"] == 5 - (n % 4), n
        assert verdict["reward"] == (1.0 if n % 4 == 2 else 0.0), n
    session_ids = {v["session_id"] for _, _, v in results}
    assert len(session_ids) == 48
