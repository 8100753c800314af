"""The red team's cross-session cases: a session is reached only by its holder.

Each test is one hole found on main (`bf0e9a3`): a typed session's `resources_session_id` and
`episode_id` were a credential for its data, a re-seed with them handed a second client a
working cookie, and a close of a never-seeded id or a fork into an unused id squatted it.
Through HTTP, on SQLite (the rule is in app/runtime, above either backend).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.server.api import create_app
from app.settings import Settings
from tests.support.rollouts import fresh_client
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

TASK: dict[str, Any] = {
    "task_id": "wh-holder",
    "seed": {
        "now": "2026-02-01T09:30:00",
        "rows": {
            "items": [{"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10.0}]
        },
    },
    "ground_truth": [
        {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -2, "reason": "sold"}}
    ],
}
GOLD = TASK["ground_truth"][0]["arguments"]
EPISODE = {"rollout_id": "r-victim", "attempt": 0}
COOKIE = "stategym_session"


def typed_seed(rsid: str, episode: dict[str, Any] = EPISODE, task: dict[str, Any] = TASK):
    return {
        "resources_session_id": rsid,
        "episode_id": episode,
        "task_id": {"taskset": "warehouse", "task_id": str(task["task_id"])},
        "task_data": task,
    }


async def _serve(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, WAREHOUSE)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg", timeout=60) as c:
            c.app = app  # type: ignore[attr-defined]
            yield c


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _serve(Settings(data_dir=tmp_path / "data", env="warehouse")):
        yield client


async def _victim(server: httpx.AsyncClient, rsid: str = "rs-victim") -> httpx.AsyncClient:
    victim = fresh_client(server)
    assert (await victim.post("/seed_session", json=typed_seed(rsid))).status_code == 200
    assert "output" in (await victim.post("/move_stock", json=GOLD)).json()
    return victim


async def _steps(victim: httpx.AsyncClient) -> int:
    exported = await victim.post("/export_session", json={})
    assert exported.status_code == 200
    steps: int = exported.json()["steps"]
    return steps


@pytest.mark.parametrize("route", ["/export_session", "/fork_session", "/rewind_session"])
async def test_id_and_episode_without_the_cookie_reach_no_data(server, route: str) -> None:
    """main: /export_session with the pair returned the victim's image and task row (ground
    truth included); fork and rewind acted on it."""
    victim = await _victim(server)
    body: dict[str, Any] = {"resources_session_id": "rs-victim", "episode_id": EPISODE}
    if route == "/rewind_session":
        body["to_step"] = 0
    async with fresh_client(server) as attacker:
        answer = await attacker.post(route, json=body)
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["type"] == "no_session"
        assert "close" in answer.json()["error"]["message"]  # says what the pair is good for
        assert "image" not in answer.text and "ground_truth" not in answer.text
        assert COOKIE not in answer.cookies
        tree = await attacker.get("/session_tree", params={"resources_session_id": "rs-victim"})
        assert tree.status_code == 401
    assert await _steps(victim) == 1  # not rewound
    assert len(server.app.state.protocol.sessions.control.list()) == 1  # no child
    await victim.aclose()


async def test_an_unknown_id_without_cookie_is_401_too(server) -> None:
    """Cookieless, a known id and an unknown one are answered alike: no probing for ids."""
    victim = await _victim(server)
    async with fresh_client(server) as attacker:
        for rsid in ("rs-victim", "rs-nobody"):
            answer = await attacker.post("/export_session", json={"resources_session_id": rsid})
            assert answer.status_code == 401, (rsid, answer.text)
    await victim.aclose()


async def test_reseed_with_other_task_data_gets_no_cookie(server) -> None:
    """main: re-seeding with the victim's id and episode gave a second client a working
    cookie. Now a re-seed must repeat the task data: another row is 409, no cookie."""
    victim = await _victim(server)
    edited = {**TASK, "ground_truth": []}
    async with fresh_client(server) as attacker:
        answer = await attacker.post("/seed_session", json=typed_seed("rs-victim", task=edited))
        assert answer.status_code == 409, answer.text
        assert "different task data" in answer.json()["error"]["message"]
        assert COOKIE not in answer.cookies
        call = await attacker.post("/get_item", json={"sku": "SKU-9001"})
        assert call.status_code == 401
    assert await _steps(victim) == 1
    await victim.aclose()


async def test_a_retry_after_a_lost_reply_gets_the_same_session(server) -> None:
    """The legitimate re-seed: the same id, episode and task data (Gym's retry when the seed
    answer was lost) answer the same session, and the cookie works."""
    victim = await _victim(server)
    async with fresh_client(server) as retry:
        again = await retry.post("/seed_session", json=typed_seed("rs-victim"))
        assert again.status_code == 200
        assert again.headers["X-StateGym-Session"] == victim.cookies[COOKIE].split(".")[0]
        assert await _steps(retry) == 1
    await victim.aclose()


async def test_a_strangers_close_of_an_unseeded_id_does_not_squat_it(server) -> None:
    """main: closing an id nobody seeded yet made every later seed of it 409, forever. The
    tombstone binds the episode that closed it: Gym's racing seed (same episode) is still
    refused, another rollout's seed of the id goes through."""
    async with fresh_client(server) as attacker:
        other = {"rollout_id": "r-attacker", "attempt": 0}
        closed = await attacker.post(
            "/close_session", json={"resources_session_id": "rs-future", "episode_id": other}
        )
        assert closed.status_code == 200
        late = await attacker.post("/seed_session", json=typed_seed("rs-future", other))
        assert late.status_code == 409  # the closing episode's own racing seed
    victim = fresh_client(server)
    seeded = await victim.post("/seed_session", json=typed_seed("rs-future"))
    assert seeded.status_code == 200, seeded.text
    assert "output" in (await victim.post("/move_stock", json=GOLD)).json()
    # The attacker's episode cannot close the victim's session either: another episode, 409.
    async with fresh_client(server) as attacker:
        body = {"resources_session_id": "rs-future", "episode_id": other}
        assert (await attacker.post("/close_session", json=body)).status_code == 409
    assert await _steps(victim) == 1
    await victim.aclose()


async def test_a_legacy_close_of_an_unseeded_id_lapses(tmp_path: Path) -> None:
    """A tombstone no episode made (a close by id alone) keeps the id out for
    `tombstone_ttl_seconds`, not forever."""
    settings = Settings(data_dir=tmp_path / "data", env="warehouse", tombstone_ttl_seconds=1)
    async for server in _serve(settings):
        closed = await server.post("/close_session", json={"resources_session_id": "rs-later"})
        assert closed.status_code == 200
        early = await server.post("/seed_session", json=typed_seed("rs-later"))
        assert early.status_code == 409
        time.sleep(1.5)  # the tombstone's age, not a timed assertion
        late = await server.post("/seed_session", json=typed_seed("rs-later"))
        assert late.status_code == 200, late.text


async def test_fork_and_restore_cannot_pick_ids(server) -> None:
    """main: `fork_session {"resources_session_ids": ["rs-x"]}` squatted rs-x (a later seed
    of it was 409). Ids of new sessions are minted by the server."""
    victim = await _victim(server)
    squat = await victim.post("/fork_session", json={"n": 1, "resources_session_ids": ["rs-x"]})
    assert squat.status_code == 422 and "minted" in squat.json()["error"]["message"]
    exported = (await victim.post("/export_session", json={})).json()
    restore = await victim.post(
        "/restore_session", json={"export": exported, "resources_session_id": "rs-x"}
    )
    assert restore.status_code == 422 and "minted" in restore.json()["error"]["message"]
    async with fresh_client(server) as owner_of_x:
        seeded = await owner_of_x.post("/seed_session", json=typed_seed("rs-x"))
        assert seeded.status_code == 200, seeded.text
    restored = await victim.post("/restore_session", json={"export": exported})
    assert restored.status_code == 200 and restored.json()["resources_session_id"] is None
    await victim.aclose()


async def test_tool_calls_and_live_verify_need_the_cookie(server) -> None:
    """A cookieless verify naming the victim's id is scored by replaying the body alone: it
    neither reads nor marks the victim's session."""
    victim = await _victim(server)
    async with fresh_client(server) as attacker:
        assert (await attacker.post("/move_stock", json=GOLD)).status_code == 401
        body = {**TASK, "resources_session_id": "rs-victim", "response": {"output": []}}
        scored = (await attacker.post("/verify", json=body)).json()
        assert scored["verified_by"] == "replay" and scored["reward"] == 0.0
    record = server.app.state.protocol.sessions.control.list()[0]
    assert record.reward is None  # the victim's record is untouched
    await victim.aclose()
