"""Lifecycle: idle reaper, live-session capacity (503 + Retry-After), retention on close."""

from __future__ import annotations

import asyncio

from app.runtime.lifecycle import reap_idle
from app.settings import Settings
from tests.conftest import TEST_SECRET
from tests.server.test_protocol import TASK
from tests.support.rollouts import fresh_client
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE


def _settings(tmp_path, **extra) -> Settings:
    return Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET, **extra)


async def test_reaper_closes_idle_sessions_but_not_active_ones(client_factory, tmp_path):
    async with client_factory(WAREHOUSE, _settings(tmp_path, session_idle_ttl_seconds=1)) as c:
        async with fresh_client(c) as idle, fresh_client(c) as busy:
            await idle.post("/seed_session", json=TASK)
            await busy.post("/seed_session", json=TASK)
            await asyncio.sleep(1.3)
            # A call is activity (a write, and since the step log records every call, a read too
            # on SQLite, docs/steps.md); a session nobody calls is idle.
            r = await busy.post("/move_stock", json={"sku": "SKU-9001", "delta": 1, "reason": "x"})
            assert "output" in r.json()
            closed = await reap_idle(c.app.state.protocol.sessions, ttl_seconds=1)
            assert closed == 1
            assert (await idle.post("/get_item", json={"sku": "SKU-9001"})).status_code == 404
            assert (await busy.post("/get_item", json={"sku": "SKU-9001"})).status_code == 200


async def test_capacity_limit_answers_503_with_retry_after(client_factory, tmp_path):
    async with client_factory(WAREHOUSE, _settings(tmp_path, max_live_sessions=2)) as c:
        clients = [fresh_client(c) for _ in range(3)]
        try:
            for client in clients[:2]:
                assert (await client.post("/seed_session", json=TASK)).status_code == 200
            refused = await clients[2].post("/seed_session", json=TASK)
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "5"
            assert "limit 2" in refused.json()["error"]["message"]
            await clients[0].post("/close_session", json={})
            assert (await clients[2].post("/seed_session", json=TASK)).status_code == 200
        finally:
            for client in clients:
                await client.aclose()


async def test_delete_on_close_retention_removes_the_file(client_factory, tmp_path):
    async with client_factory(WAREHOUSE, _settings(tmp_path, retention="delete_on_close")) as c:
        session_id = (await c.post("/seed_session", json=TASK)).json()["session_id"]
        path = c.app.state.protocol.sessions.backend.store.session_path(session_id)
        assert path.exists()
        await c.post("/close_session", json={})
        assert not path.exists()
        assert not path.with_name(path.name + "-wal").exists()


async def test_verify_can_close_the_session(client_factory, tmp_path):
    async with client_factory(WAREHOUSE, _settings(tmp_path, close_on_verify=True)) as c:
        await c.post("/seed_session", json=TASK)
        assert (await c.post("/verify", json=TASK)).status_code == 200
        assert (await c.post("/get_item", json={"sku": "SKU-9001"})).status_code == 404
