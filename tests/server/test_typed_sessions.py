"""NeMo Gym 0.7.0's typed session rules, on both backends, without nemo_gym's code.

tests/nemo_gym_conformance/ runs Gym's own check (`make test-nemo-gym`); these tests pin every
rule of the contract (../shared/NEMO_GYM_CONTRACT.md, "Typed session rules") and the ones
upstream added after 0.7.0, so a regression shows in `make test` too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.registry import load_environment
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import fresh_client
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

TASK = {
    "task_id": "wh-1",
    "seed": {
        "now": "2026-02-01T09:30:00",
        "rows": {
            "items": [{"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10.0}]
        },
    },
    "ground_truth": [
        {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -2, "reason": "sold"}}
    ],
    "expected_outputs": [],
}
RESPONSE = {"id": "resp-1", "output": []}


@pytest.fixture
def settings(tmp_path, backend, request):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    return backend_settings(backend, tmp_path / "data", prefix)


def typed_seed(rsid: str, rollout: str = "r-1", attempt: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "resources_session_id": rsid,
        "episode_id": {"rollout_id": rollout, "attempt": attempt},
        "task_id": {"taskset": "warehouse", "task_id": "wh-1"},
        "task_data": TASK,
        **extra,
    }


def typed_close(rsid: str, rollout: str = "r-1", attempt: int = 0) -> dict[str, Any]:
    return {"resources_session_id": rsid, "episode_id": {"rollout_id": rollout, "attempt": attempt}}


def live(client: httpx.AsyncClient) -> int:
    sessions = client.app.state.protocol.sessions
    return sessions.control.count_live(sessions.env.name)


def all_sessions(client: httpx.AsyncClient) -> int:
    return len(client.app.state.protocol.sessions.control.list())


def session_databases(client: httpx.AsyncClient) -> int:
    """Session databases that exist: files on SQLite, schemas on PostgreSQL."""
    sessions = client.app.state.protocol.sessions
    store = sessions.backend.store
    if hasattr(store, "session_exists"):
        return sum(store.session_exists(r.id) for r in sessions.control.list())
    return len(list(store.session_path("0" * 32).parent.glob("*.sqlite")))


# --- seed -----------------------------------------------------------------------------------------
async def test_typed_seed_answers_exactly_gyms_model(warehouse):
    r = await warehouse.post("/seed_session", json=typed_seed("rs-exact"))
    assert r.status_code == 200, r.text
    assert r.json() == {"resources_session_id": "rs-exact"}
    assert r.cookies["stategym_session"].startswith(r.headers["X-StateGym-Session"] + ".")
    assert r.headers["X-StateGym-Task"] == "wh-1"


async def test_repeated_seed_returns_the_same_session_without_a_new_database(warehouse):
    first = await warehouse.post("/seed_session", json=typed_seed("rs-again"))
    move = {"sku": "SKU-9001", "delta": -2, "reason": "sold"}
    assert (await warehouse.post("/move_stock", json=move)).json()["output"]["quantity"] == 3
    async with fresh_client(warehouse) as retry:  # a retry comes without the cookie
        again = await retry.post("/seed_session", json=typed_seed("rs-again"))
        assert again.status_code == 200 and again.json() == {"resources_session_id": "rs-again"}
        assert again.cookies["stategym_session"] == first.cookies["stategym_session"]
        # Not reset: the write made before the retry is still there.
        item = await retry.post("/get_item", json={"sku": "SKU-9001"})
        assert item.json()["output"]["quantity"] == 3
    assert all_sessions(warehouse) == 1 and session_databases(warehouse) == 1


async def test_same_id_under_another_episode_is_a_conflict(warehouse):
    assert (await warehouse.post("/seed_session", json=typed_seed("rs-ep"))).status_code == 200
    for other in (typed_seed("rs-ep", rollout="r-2"), typed_seed("rs-ep", attempt=1)):
        r = await warehouse.post("/seed_session", json=other)
        assert r.status_code == 409, r.text
        assert "episode" in r.json()["error"]["message"]
    assert all_sessions(warehouse) == 1


async def test_racing_seeds_of_one_id_make_one_database(warehouse):
    async def seed_once() -> httpx.Response:
        async with fresh_client(warehouse) as client:
            return await client.post("/seed_session", json=typed_seed("rs-race"))

    answers = await asyncio.gather(*(seed_once() for _ in range(8)))
    assert [a.status_code for a in answers] == [200] * 8
    assert len({a.headers["X-StateGym-Session"] for a in answers}) == 1
    assert all_sessions(warehouse) == 1 and session_databases(warehouse) == 1


@pytest.mark.parametrize(
    "body, problem",
    [
        (typed_seed("rs-x", extra_key=1), "extra_key: Extra inputs are not permitted"),
        (typed_seed(""), "resources_session_id"),
        (typed_seed("rs-x", rollout="-bad"), "episode_id.rollout_id"),
        (typed_seed("rs-x", rollout="r-a1"), "reserved attempt suffix"),
        (typed_seed("rs-x", attempt=-1), "episode_id.attempt"),
        ({**typed_seed("rs-x"), "task_id": "wh-1"}, "task_id"),
        ({k: v for k, v in typed_seed("rs-x").items() if k != "episode_id"}, "episode_id"),
        (typed_seed("x" * 201), "resources_session_id"),
    ],
)
async def test_malformed_typed_seeds_say_what_to_fix(warehouse, body, problem):
    r = await warehouse.post("/seed_session", json=body)
    assert r.status_code == 422, r.text
    assert problem in r.json()["error"]["message"]
    assert all_sessions(warehouse) == 0


async def test_legacy_seed_ignores_an_old_cookie_and_keeps_its_answer(warehouse):
    first = await warehouse.post("/seed_session", json=TASK)
    assert set(first.json()) == {"session_id", "task_id"}
    assert (await warehouse.post("/close_session", json={})).json()["closed"] is True
    # The same client (it kept the closed session's cookie) starts its next rollout.
    second = await warehouse.post("/seed_session", json=TASK)
    assert second.status_code == 200, second.text
    assert second.json()["session_id"] != first.json()["session_id"]
    item = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert item.status_code == 200


async def test_concurrent_legacy_rollouts_through_one_cookie_jar(warehouse):
    async def rollout() -> float:
        seeded = await warehouse.post("/seed_session", json=TASK)
        assert seeded.status_code == 200, seeded.text
        return seeded.json()["session_id"]

    ids = await asyncio.gather(*(rollout() for _ in range(4)))
    assert len(set(ids)) == 4


# --- close ----------------------------------------------------------------------------------------
async def test_close_answers_exactly_the_id_twice_and_blocks_a_reseed(warehouse):
    await warehouse.post("/seed_session", json=typed_seed("rs-close"))
    for _ in range(2):
        r = await warehouse.post("/close_session", json=typed_close("rs-close"))
        assert r.status_code == 200 and r.json() == {"resources_session_id": "rs-close"}
    assert live(warehouse) == 0
    again = await warehouse.post("/seed_session", json=typed_seed("rs-close"))
    assert again.status_code == 409 and "closed" in again.json()["error"]["message"]


async def test_close_of_a_never_seeded_id_is_a_tombstone(warehouse):
    r = await warehouse.post("/close_session", json=typed_close("rs-ghost"))
    assert r.status_code == 200 and r.json() == {"resources_session_id": "rs-ghost"}
    assert (await warehouse.post("/close_session", json=typed_close("rs-ghost"))).status_code == 200
    late = await warehouse.post("/seed_session", json=typed_seed("rs-ghost"))
    assert late.status_code == 409
    assert all_sessions(warehouse) == 0 and session_databases(warehouse) == 0


async def test_cookieless_close_must_name_the_seeding_episode(warehouse):
    await warehouse.post("/seed_session", json=typed_seed("rs-own"))
    async with fresh_client(warehouse) as stranger:
        refused = await stranger.post("/close_session", json=typed_close("rs-own", rollout="r-9"))
        # Another episode is a conflict (NeMo Gym main's rule), no episode is forbidden.
        assert refused.status_code == 409 and "episode" in refused.json()["error"]["message"]
        legacy = await stranger.post("/close_session", json={"resources_session_id": "rs-own"})
        assert legacy.status_code == 403
        assert live(warehouse) == 1
        # Gym's cleanup may close without the cookie (its seed answer was lost): the episode
        # that seeded it is the proof.
        ok = await stranger.post("/close_session", json=typed_close("rs-own"))
        assert ok.status_code == 200 and live(warehouse) == 0


async def test_close_with_another_sessions_cookie_is_refused(warehouse):
    await warehouse.post("/seed_session", json=typed_seed("rs-a", rollout="r-a"))
    async with fresh_client(warehouse) as other:
        await other.post("/seed_session", json=typed_seed("rs-b", rollout="r-b"))
        # Right episode, wrong cookie: the cookie wins.
        r = await other.post("/close_session", json=typed_close("rs-a", rollout="r-a"))
        assert r.status_code == 403 and "cookie" in r.json()["error"]["message"]
    assert live(warehouse) == 2


async def test_close_by_id_only_closes_sessions_of_its_own_environment(
    warehouse, client_factory, settings
):
    other_env = dataclasses.replace(WAREHOUSE, name="warehouse_b")
    await warehouse.post("/seed_session", json=typed_seed("rs-shared"))
    async with client_factory(other_env, settings) as neighbour:  # same data dir, same secret
        r = await neighbour.post("/close_session", json=typed_close("rs-shared"))
        assert r.status_code == 200  # a tombstone in warehouse_b, nothing more
        assert live(warehouse) == 1
        # A cookie of the other environment's session closes nothing here either.
        neighbour.cookies.set("stategym_session", warehouse.cookies["stategym_session"])
        assert (await neighbour.post("/close_session", json={})).status_code == 403
    assert live(warehouse) == 1
    tool = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert tool.status_code == 200


def _break_release(client: httpx.AsyncClient, session_id: str, backend: str) -> Any:
    """Make writing the session's closed status fail; returns the repair."""
    sessions = client.app.state.protocol.sessions
    if backend == "sqlite":
        sessions._open.get(session_id).conn.execute("PRAGMA query_only=1")
        return lambda: None  # the failed close dropped that connection; a new one can write
    schema = sessions.backend.names.session(session_id)
    with sessions.backend.store.engine.begin() as conn:
        conn.execute(text(f'ALTER TABLE "{schema}"._stategym_meta RENAME TO meta_away'))

    def repair() -> None:
        with sessions.backend.store.engine.begin() as conn:
            conn.execute(text(f'ALTER TABLE "{schema}".meta_away RENAME TO _stategym_meta'))

    return repair


async def test_a_failed_release_is_5xx_and_not_recorded_closed(warehouse, backend):
    seeded = await warehouse.post("/seed_session", json=typed_seed("rs-fail"))
    session_id = seeded.headers["X-StateGym-Session"]
    assert (await warehouse.post("/get_item", json={"sku": "SKU-9001"})).status_code == 200
    repair = _break_release(warehouse, session_id, backend)
    r = await warehouse.post("/close_session", json=typed_close("rs-fail"))
    assert r.status_code == 503 and r.json()["error"]["type"] == "release_failed"
    record = warehouse.app.state.protocol.sessions.control.get(session_id)
    assert record.status == "open"
    # Not recorded as closed: the id still seeds (same episode: the same session) ...
    again = await warehouse.post("/seed_session", json=typed_seed("rs-fail"))
    assert again.status_code == 200
    repair()
    # ... and the retried close works.
    r = await warehouse.post("/close_session", json=typed_close("rs-fail"))
    assert r.status_code == 200 and live(warehouse) == 0


# --- lost sessions ------------------------------------------------------------------------
async def test_tool_call_on_a_closed_or_unknown_session_is_a_readable_404(warehouse):
    await warehouse.post("/seed_session", json=typed_seed("rs-lost"))
    await warehouse.post("/close_session", json=typed_close("rs-lost"))
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["type"] == "session_closed" and "closed" in error["message"]
    signer = warehouse.app.state.protocol.signer
    warehouse.cookies.set("stategym_session", signer.sign("f" * 32))
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.status_code == 404 and r.json()["error"]["message"]


async def test_verify_of_a_closed_session_is_scored_by_replay(warehouse):
    """A closed session is verified by replaying the response's calls on its snapshot
    (app/runtime/reverify.py), with the task stored at seed: the same answer as live."""
    await warehouse.post("/seed_session", json=typed_seed("rs-v"))
    live = (await warehouse.post("/verify", json={**TASK, "response": RESPONSE})).json()
    await warehouse.post("/close_session", json=typed_close("rs-v"))
    r = await warehouse.post("/verify", json={**TASK, "response": RESPONSE})
    assert r.status_code == 200
    body = r.json()
    assert body["verified_by"] == "replay" and "mask_sample" not in body
    assert body["reward"] == live["reward"]
    assert body["reward_components"] == live["reward_components"]
    assert body["response"] == RESPONSE and body["task_id"] == "wh-1"  # the request echoed


async def test_verify_of_an_unknown_session_is_a_masked_sample(warehouse):
    signer = warehouse.app.state.protocol.signer
    warehouse.cookies.set("stategym_session", signer.sign("e" * 32))
    body = (await warehouse.post("/verify", json={**TASK, "response": RESPONSE})).json()
    assert body["reward"] == 0.0 and body["mask_sample"] is True
    assert body["failure_kind"] == "session_lost"


async def test_verify_with_an_expired_cookie_is_a_masked_sample(warehouse):
    seeded = await warehouse.post("/seed_session", json=TASK)
    signer = warehouse.app.state.protocol.signer
    old = int(time.time()) - signer.max_age - 10
    warehouse.cookies.set("stategym_session", signer.sign(seeded.json()["session_id"], old))
    body = (await warehouse.post("/verify", json={**TASK, "response": RESPONSE})).json()
    assert body["mask_sample"] is True and body["failure_kind"] == "session_expired"


async def test_verify_of_a_deleted_session_is_scored_by_replay(warehouse, backend):
    seeded = await warehouse.post("/seed_session", json=TASK)
    session_id = seeded.json()["session_id"]
    sessions = warehouse.app.state.protocol.sessions
    if backend == "sqlite":
        sessions.backend.store.session_path(session_id).unlink()
    else:
        sessions.backend.store.drop_session(session_id)
    body = (await warehouse.post("/verify", json={**TASK, "response": RESPONSE})).json()
    assert body["verified_by"] == "replay" and "mask_sample" not in body


async def test_forged_cookie_is_still_a_protocol_error(warehouse):
    warehouse.cookies.set("stategym_session", "f" * 32 + ".1.forged")
    r = await warehouse.post("/verify", json={**TASK, "response": RESPONSE})
    assert r.status_code == 401


async def test_reverify_mode_is_stateless(warehouse):
    r = await warehouse.get("/reverify_mode")
    assert r.status_code == 200 and r.json() == "stateless"


async def test_cookieless_verify_replays_the_body_task(warehouse):
    """NeMo Gym's stateless reverify: no session, the task row and response are enough."""
    body = (await warehouse.post("/verify", json={**TASK, "response": RESPONSE})).json()
    assert body["verified_by"] == "replay" and isinstance(body["reward"], float)


# --- several workers ----------------------------------------------------------------------
@pytest.mark.slow  # two workers racing: ~7 s
def test_racing_typed_seeds_across_workers_make_one_database(live_server, tmp_path):
    """Two uvicorn workers: the claim lives in the control database, not in process memory."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    row = json.loads(load_environment("retail").tasks_path.read_text().splitlines()[0])
    task_data = {k: v for k, v in row.items() if k != "responses_create_params"}
    data_dir = tmp_path / "race"
    url = live_server("retail", workers=2, data_dir=data_dir)
    body = {
        "resources_session_id": "rs-workers",
        "episode_id": {"rollout_id": "r-1", "attempt": 0},
        "task_id": {"taskset": "retail", "task_id": str(row["task_id"])},
        "task_data": task_data,
    }

    def seed(_: int) -> httpx.Response:
        return httpx.post(url + "/seed_session", json=body, timeout=60)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(seed, range(16)))
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert len({a.headers["X-StateGym-Session"] for a in answers}) == 1
    assert len(list((data_dir / "sessions" / "retail").glob("*.sqlite"))) == 1
    conn = sqlite3.connect(data_dir / "control.sqlite")
    try:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    finally:
        conn.close()


# --- the control database's new table on databases that already exist ---------------------------
def test_an_older_control_database_gains_the_claims_table(tmp_path):
    from app.storage.migrations import head_revision, revision_of, upgrade_file
    from app.storage.sqlite.control import open_sqlite_control

    path = tmp_path / "control.sqlite"
    sqlite3.connect(path).close()
    upgrade_file(path, "control", "75a8d8d08ff7")  # the revision before resources_ids
    control = open_sqlite_control(path)
    try:
        assert control.close_claim("warehouse", "rs-old", None) is True
        assert control.claim("warehouse", "rs-old").state == "closed"
    finally:
        control.dispose()
    conn = sqlite3.connect(path)
    try:
        assert revision_of(conn) == head_revision("control")
    finally:
        conn.close()


def test_an_older_postgres_control_schema_gains_the_claims_table(pg_prefix):
    from app.storage.migrations import head_revision
    from app.storage.postgres.control import PgControlDB, migrate_control_schema, open_pg_control
    from app.storage.postgres.db import make_engine
    from tests.conftest import PG_URL

    engine = make_engine(PG_URL, pool_size=1)
    schema = f"{pg_prefix}_control"
    try:
        old = PgControlDB(engine, schema)
        with old.engine.begin() as conn:  # as a release before resources_ids left it
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            migrate_control_schema(conn, schema, "75a8d8d08ff7")
        control = open_pg_control(engine, schema)
        assert control.close_claim("warehouse", "rs-old", None) is True
        with engine.connect() as conn:
            version = conn.execute(text(f'SELECT version_num FROM "{schema}".alembic_version'))
            assert version.scalar_one() == head_revision("control")
    finally:
        engine.dispose()


@pytest.mark.parametrize("attempt, status", [(2.0, 200), (2.5, 422), (True, 422), ("2", 422)])
async def test_attempt_is_a_json_integer(warehouse, attempt, status):
    """JSON Schema's "integer" admits 2.0 (schemathesis sends it); booleans and text are not."""
    body = typed_seed("rs-int")
    body["episode_id"]["attempt"] = attempt
    r = await warehouse.post("/seed_session", json=body)
    assert r.status_code == status, r.text
