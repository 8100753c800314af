"""Adversarial rollouts against the session routes, through HTTP only, on both backends.

- ownership: every route that acts on a session (fork, rewind, export, session tree, close,
  verify) refuses another rollout's cookie (403), a cookieless request (401; a cookieless close
  naming another episode is 409, none 403), and the victim's session is unchanged (its steps,
  its reward, no new session);
- fork bomb: `fork_session {"n": 64}` of a session near its size cap, and a fork past the
  server's budget, are refused whole (413 / 507) with nothing written;
- restores: an altered, expired or expiry-less blob is refused; repeated restores of one blob
  stop at the server's budget;
- verify without a session: an empty task is a 422, never 1.0, and many distinct seeds leave a
  bounded number of files on disk.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.runtime.branching import _signed_bytes
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import fresh_client
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

TASK = {
    "task_id": "wh-own",
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
VICTIM_EPISODE = {"rollout_id": "r-victim", "attempt": 0}


def typed_seed(rsid: str, episode: dict[str, Any], task: dict[str, Any] = TASK) -> dict[str, Any]:
    return {
        "resources_session_id": rsid,
        "episode_id": episode,
        "task_id": {"taskset": "warehouse", "task_id": str(task["task_id"])},
        "task_data": task,
    }


async def _server(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, WAREHOUSE)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://stategym", timeout=60
        ) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
def make_settings(tmp_path: Path, backend: str, request: pytest.FixtureRequest):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))

    def build(**extra: Any) -> Settings:
        return backend_settings(backend, tmp_path / "data", prefix, **extra)

    return build


@pytest.fixture
async def server(make_settings) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _server(make_settings()):
        yield client


def _rows(client: httpx.AsyncClient) -> int:
    """Every session the server knows (control rows), open or closed."""
    return len(client.app.state.protocol.sessions.control.list())  # type: ignore[attr-defined]


async def _victim(server: httpx.AsyncClient) -> httpx.AsyncClient:
    """A typed rollout that did the gold write: its own cookie jar."""
    victim = fresh_client(server)
    seeded = await victim.post("/seed_session", json=typed_seed("rs-victim", VICTIM_EPISODE))
    assert seeded.status_code == 200
    assert "output" in (await victim.post("/move_stock", json=GOLD)).json()
    return victim


async def _victim_state(victim: httpx.AsyncClient) -> tuple[float, int, str]:
    """(reward, steps, session id) as the victim's own cookie sees them; adds no step."""
    verified = (await victim.post("/verify", json={**TASK, "response": {"output": []}})).json()
    exported = (await victim.post("/export_session", json={})).json()
    return verified["reward"], exported["steps"], exported["session_id"]


# Each attempt names the victim's session by its resources_session_id: with the attacker's own
# cookie, with no cookie at all, and with no cookie and another episode.
PROOFS = ("foreign_cookie", "bare_id", "wrong_episode")
ROUTES = ("fork", "rewind", "export", "tree", "close_typed", "close_legacy", "verify")


async def _attempt(client: httpx.AsyncClient, route: str, proof: str) -> httpx.Response:
    named: dict[str, Any] = {"resources_session_id": "rs-victim"}
    if proof == "wrong_episode":
        named["episode_id"] = {"rollout_id": "r-attacker", "attempt": 0}
    if route == "fork":
        return await client.post("/fork_session", json={**named, "n": 2})
    if route == "rewind":
        return await client.post("/rewind_session", json={**named, "to_step": 0})
    if route == "export":
        return await client.post("/export_session", json=named)
    if route == "tree":
        return await client.get("/session_tree", params={"resources_session_id": "rs-victim"})
    if route == "close_typed":
        episode = named.get("episode_id", {"rollout_id": "r-attacker", "attempt": 0})
        return await client.post(
            "/close_session", json={"resources_session_id": "rs-victim", "episode_id": episode}
        )
    if route == "close_legacy":
        return await client.post("/close_session", json={"resources_session_id": "rs-victim"})
    return await client.post("/verify", json={**TASK, **named, "response": {"output": []}})


def _refusal(route: str, proof: str) -> tuple[int, str]:
    """How each attempt is refused (app/runtime/ownership.py): another session's cookie is
    403; no cookie is 401 on every route that returns or changes a session's data; a
    cookieless close naming another episode is 409 (NeMo Gym main), naming none is 403."""
    if proof == "foreign_cookie":
        return 403, "forbidden"
    if route == "close_typed":
        return 409, "conflict"
    if route == "close_legacy":
        return 403, "forbidden"
    return 401, "no_session"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("proof", PROOFS)
async def test_another_rollout_cannot_act_on_a_session(server, route: str, proof: str) -> None:
    victim = await _victim(server)
    before = await _victim_state(victim)
    assert before[:2] == (1.0, 1)
    rows = _rows(server)
    async with fresh_client(server) as attacker:
        if proof == "foreign_cookie":
            mine = typed_seed("rs-attacker", {"rollout_id": "r-attacker", "attempt": 0})
            assert (await attacker.post("/seed_session", json=mine)).status_code == 200
            rows += 1
        answer = await _attempt(attacker, route, proof)
        if route == "verify" and proof != "foreign_cookie":
            # Without a cookie verify touches no session: it replays the body's task alone.
            assert answer.status_code == 200 and answer.json()["verified_by"] == "replay"
        else:
            status, kind = _refusal(route, proof)
            assert answer.status_code == status, (route, proof, answer.text)
            assert answer.json()["error"]["type"] == kind
    assert _rows(server) == rows  # no child, no restored session
    assert await _victim_state(victim) == before  # not rewound, not closed, not re-scored
    await victim.aclose()


async def test_the_holder_acts_by_cookie_and_the_episode_only_closes(server) -> None:
    victim = await _victim(server)
    mine = {"resources_session_id": "rs-victim"}
    assert (await victim.post("/fork_session", json={**mine, "n": 1})).status_code == 200
    assert (await victim.get("/session_tree", params=mine)).status_code == 200
    async with fresh_client(server) as cleanup:  # Gym's cleanup: no cookie, the seed's episode
        proved = {**mine, "episode_id": VICTIM_EPISODE}
        assert (await cleanup.post("/export_session", json=proved)).status_code == 401
        assert (await cleanup.post("/close_session", json=proved)).status_code == 200
    await victim.aclose()


async def test_children_of_a_typed_session_are_reached_by_their_cookies(server) -> None:
    """A fork child gets an id the server mints (and the parent's episode, for the lost-reply
    close); a stranger naming it without its cookie gets nothing."""
    owner = await _victim(server)
    forked = await owner.post("/fork_session", json={"n": 1})
    assert forked.status_code == 200
    kid_rsid = forked.json()["sessions"][0]["resources_session_id"]
    assert kid_rsid.startswith("fork-") and len(kid_rsid) > 32
    async with fresh_client(server) as stranger:
        for route in ("/export_session", "/rewind_session", "/close_session"):
            body: dict[str, Any] = {"resources_session_id": kid_rsid}
            if route == "/rewind_session":
                body["to_step"] = 0
            answer = await stranger.post(route, json=body)
            assert answer.status_code == (403 if "close" in route else 401), (route, answer.text)
    kid = fresh_client(server)
    kid.cookies.set(forked.json()["cookie_name"], forked.json()["sessions"][0]["cookie"])
    assert (await kid.post("/export_session", json={"resources_session_id": kid_rsid})).is_success
    await kid.aclose()
    await owner.aclose()


# --- budgets ---------------------------------------------------------------------------------
def _session_databases(client: httpx.AsyncClient) -> int:
    sessions = client.app.state.protocol.sessions  # type: ignore[attr-defined]
    store = sessions.backend.store
    if hasattr(store, "session_exists"):
        return sum(store.session_exists(r.id) for r in sessions.control.list())
    return len(list(store.session_path("0" * 32).parent.glob("*.sqlite")))


async def _grow(client: httpx.AsyncClient, backend: str, target: int) -> None:
    """Write until the session holds about `target` bytes (SQLite keeps long texts whole)."""
    if backend != "sqlite":
        return  # VARCHAR(50) refuses long reasons: the session stays small, n x size still counts
    for i in range(target // 2**17):
        reason = f"{i}" * 2**16  # the step log keeps the arguments too: ~2x on disk
        answer = await client.post("/move_stock", json={**GOLD, "delta": 0, "reason": reason})
        if "error" in answer.json():
            return  # the size cap itself


async def test_a_fork_bomb_is_refused_whole(make_settings, backend: str) -> None:
    async for server in _server(make_settings(session_max_db_mb=2, fork_max_mb=8)):
        owner = fresh_client(server)
        assert (await owner.post("/seed_session", json=TASK)).status_code == 200
        await _grow(owner, backend, 1900 * 1024)
        rows, databases = _rows(server), _session_databases(server)
        bomb = await owner.post("/fork_session", json={"n": 64})
        assert bomb.status_code == 413, bomb.text
        error = bomb.json()["error"]
        assert error["type"] == "over_budget" and "STATEGYM_FORK_MAX_MB" in error["message"]
        assert error["needed_bytes"] > error["budget_bytes"]
        assert (_rows(server), _session_databases(server)) == (rows, databases)
        assert (await owner.post("/fork_session", json={"n": 1})).status_code == 200
        await owner.aclose()


async def test_forks_and_restores_stop_at_the_server_budget(make_settings) -> None:
    async for server in _server(make_settings()):
        owner = fresh_client(server)
        assert (await owner.post("/seed_session", json=TASK)).status_code == 200
        budget = server.app.state.protocol.branching.budget  # type: ignore[attr-defined]
        handle = await server.app.state.protocol.sessions._handle(  # type: ignore[attr-defined]
            (await owner.post("/export_session", json={})).json()["session_id"]
        )
        size = budget.size_of(handle)
        budget.total_bytes = budget.used() + int(2.5 * size)  # room for two more copies
        rows, databases = _rows(server), _session_databases(server)
        over = await owner.post("/fork_session", json={"n": 3})
        assert over.status_code == 507 and over.json()["error"]["type"] == "storage_budget"
        assert "STATEGYM_DATA_MAX_MB" in over.json()["error"]["message"]
        assert (_rows(server), _session_databases(server)) == (rows, databases)

        blob = (await owner.post("/export_session", json={})).json()
        budget.total_bytes = budget.used() + int(2.5 * size)  # the data dir moved meanwhile
        outcomes = [(await owner.post("/restore_session", json={"export": blob})).status_code]
        for _ in range(9):
            outcomes.append(
                (await owner.post("/restore_session", json={"export": blob})).status_code
            )
        assert set(outcomes) == {200, 507} and outcomes.count(200) <= 3, outcomes
        assert _rows(server) == rows + outcomes.count(200)
        assert _session_databases(server) == databases + outcomes.count(200)
        await owner.aclose()


async def test_altered_expired_and_old_blobs_do_not_restore(server) -> None:
    owner = fresh_client(server)
    assert (await owner.post("/seed_session", json=TASK)).status_code == 200
    blob = (await owner.post("/export_session", json={})).json()
    assert blob["expires_at"] > time.time()
    sign = server.app.state.protocol.branching.sign  # type: ignore[attr-defined]
    rows = _rows(server)

    later = {**blob, "expires_at": blob["expires_at"] + 10 * 365 * 86400}  # extended by hand
    expired = {**blob, "expires_at": int(time.time()) - 1}
    expired["signature"] = sign(_signed_bytes(expired))  # as if exported a day ago
    old = {k: v for k, v in blob.items() if k != "expires_at"}
    old["signature"] = sign(_signed_bytes(old))  # an older release's blob: no expiry
    cases = {"altered": (later, 422), "expired": (expired, 410), "no_expiry": (old, 422)}
    for name, (bad, status) in cases.items():
        async with fresh_client(server) as stranger:
            answer = await stranger.post("/restore_session", json={"export": bad})
            assert answer.status_code == status, (name, answer.text)
    assert _rows(server) == rows
    restored = await owner.post("/restore_session", json={"export": blob})
    assert restored.status_code == 200
    await owner.aclose()


# --- verify without a session ---------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"task_id": "t"},
        {"ground_truth": [], "expected_outputs": [], "expected_state": []},
        {"seed": TASK["seed"], "expected_outputs": ""},
        {"task_data": TASK},  # the task nested, where a stateless replay does not read it
    ],
    ids=["nothing", "id_only", "all_empty", "seed_only", "nested_task_data"],
)
async def test_cookieless_verify_of_an_empty_task_is_refused(server, body) -> None:
    answer = await server.post("/verify", json={**body, "response": {"output": []}})
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"] + answer.json()["error"]["hint"]
    assert "nothing to score" in message and "cookie" in message


async def test_cookieless_verify_still_scores_a_task_row(server) -> None:
    """NeMo Gym's reverify sends the row's fields at the top level: replayed and scored."""
    call = {"type": "function_call", "call_id": "c", "name": "move_stock"}
    response = {
        "output": [{**call, "arguments": '{"sku": "SKU-9001", "delta": -2, "reason": "sold"}'}]
    }
    scored = (await server.post("/verify", json={**TASK, "response": response})).json()
    assert scored["verified_by"] == "replay" and scored["reward"] == 1.0
    nothing = (await server.post("/verify", json={**TASK, "response": {"output": []}})).json()
    assert nothing["reward"] == 0.0


@pytest.mark.parametrize("files,mib", [(6, 64), (64, 1)], ids=["by_count", "by_bytes"])
async def test_many_cookieless_verifies_leave_bounded_disk(
    make_settings, tmp_path, files: int, mib: int
) -> None:
    async for server in _server(make_settings(replay_cache_files=files, replay_cache_mb=mib)):

        def replay_files(data: Path = tmp_path / "data") -> list[Path]:
            return [*(data / "snapshots").rglob("*.sqlite"), *(data / "gold").rglob("*.sqlite")]

        counts = []
        for i in range(24):
            seed = {**TASK["seed"], "now": f"2026-02-{1 + i % 28:02d}T{i % 24:02d}:00:00"}
            body = {**TASK, "task_id": f"wh-{i}", "seed": seed, "response": {"output": []}}
            assert (await server.post("/verify", json=body)).status_code == 200
            counts.append(len(replay_files()))
        # Snapshots and golds live in memory only (app/storage/sqlite/snapshots.py): a
        # cookieless verify writes no file at all, and the cache's bounds hold trivially.
        assert max(counts) == 0, counts
        cache = server.app.state.protocol.sessions.replay_files  # type: ignore[attr-defined]
        assert cache.files == len(replay_files()) == 0
        assert cache.bytes == 0 <= mib * 2**20
        owner = fresh_client(server)
        assert (await owner.post("/seed_session", json=TASK)).status_code == 200
        assert replay_files() == []
        await owner.aclose()
