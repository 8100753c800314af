"""The idle timeout: a session nobody touches for `session_idle_ttl_seconds` is closed by the
reaper the app starts with its lifespan, leaving what `/close_session` leaves (a typed id that a
later seed cannot reuse, a verify scored by replay); 0 turns it off; shutdown never waits on it.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from pydantic import ValidationError

from app.runtime.lifecycle import reap_idle
from app.settings import Settings
from tests.conftest import TEST_SECRET, backend_settings, drop_pg_schemas, new_pg_prefix
from tests.server.test_typed_sessions import RESPONSE, TASK, typed_close, typed_seed
from tests.support.rollouts import fresh_client
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

# A reaper pass every second closes a session idle for more than a second: well within this.
DEADLINE_S = 10.0


def _settings(tmp_path, ttl: int) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        secret_key=TEST_SECRET,
        session_idle_ttl_seconds=ttl,
        reaper_interval_seconds=1,
    )


@pytest.fixture
def idle_settings(tmp_path, backend, request):
    """`ttl -> Settings` on the test's backend (a PostgreSQL schema prefix dropped after)."""
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))

    def make(ttl: int) -> Settings:
        extra = {"session_idle_ttl_seconds": ttl, "reaper_interval_seconds": 1}
        return backend_settings(backend, tmp_path / "data", prefix, **extra)

    return make


def _status(client: httpx.AsyncClient, session_id: str) -> str | None:
    record = client.app.state.protocol.sessions.control.get(session_id)
    return None if record is None else record.status


async def _closed_within(client: httpx.AsyncClient, session_id: str, seconds: float) -> bool:
    """Whether the session is recorded closed within `seconds` (read from the control database:
    a tool call would be activity and keep it alive)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _status(client, session_id) == "closed":
            return True
        await asyncio.sleep(0.1)
    return False


async def test_an_untouched_typed_session_is_closed_as_a_close_would(client_factory, idle_settings):
    async with client_factory(WAREHOUSE, idle_settings(1)) as c:
        seeded = await c.post("/seed_session", json=typed_seed("rs-idle"))
        assert seeded.status_code == 200
        session_id = seeded.headers["x-stategym-session"]
        live = (await c.post("/verify", json={**TASK, "response": RESPONSE})).json()
        assert await _closed_within(c, session_id, DEADLINE_S)
        # The tombstone a close leaves: the id cannot be seeded again, a close is idempotent.
        again = await c.post("/seed_session", json=typed_seed("rs-idle"))
        assert again.status_code == 409 and "closed" in again.json()["error"]["message"]
        closing = await c.post("/close_session", json=typed_close("rs-idle"))
        assert closing.status_code == 200
        assert closing.json() == {"resources_session_id": "rs-idle"}
        # Calls answer the closed session's 404; a verify is scored by replay, as after a close.
        assert (await c.post("/get_item", json={"sku": "SKU-9001"})).status_code == 404
        body = (await c.post("/verify", json={**TASK, "response": RESPONSE})).json()
        assert body["verified_by"] == "replay" and "mask_sample" not in body
        assert body["reward"] == live["reward"]


async def test_a_session_in_use_is_kept(client_factory, idle_settings):
    async with client_factory(WAREHOUSE, idle_settings(2)) as c:
        async with fresh_client(c) as busy, fresh_client(c) as idle:
            busy_id = (await busy.post("/seed_session", json=TASK)).json()["session_id"]
            idle_id = (await idle.post("/seed_session", json=TASK)).json()["session_id"]
            deadline = time.monotonic() + DEADLINE_S
            while _status(c, idle_id) != "closed" and time.monotonic() < deadline:
                # A call every half second: never idle for the TTL.
                r = await busy.post("/get_item", json={"sku": "SKU-9001"})
                assert r.status_code == 200
                await asyncio.sleep(0.5)
            assert _status(c, idle_id) == "closed"
            assert _status(c, busy_id) == "open"


async def test_a_session_with_a_call_in_flight_is_left_for_the_next_pass(client_factory, tmp_path):
    async with client_factory(WAREHOUSE, _settings(tmp_path, ttl=3600)) as c:
        session_id = (await c.post("/seed_session", json=TASK)).json()["session_id"]
        sessions = c.app.state.protocol.sessions
        handle = await sessions._handle(session_id)
        async with handle.lock:  # what a call holds while it runs
            assert await reap_idle(sessions, ttl_seconds=0) == 0
        assert await reap_idle(sessions, ttl_seconds=0) == 1
        assert _status(c, session_id) == "closed"


async def test_zero_turns_the_timeout_off(client_factory, tmp_path):
    async with client_factory(WAREHOUSE, _settings(tmp_path, ttl=0)) as c:
        session_id = (await c.post("/seed_session", json=TASK)).json()["session_id"]
        await asyncio.sleep(1.5)  # past a reaper interval
        assert _status(c, session_id) == "open"


def test_a_negative_timeout_is_refused(tmp_path):
    with pytest.raises(ValidationError):
        _settings(tmp_path, ttl=-1)
