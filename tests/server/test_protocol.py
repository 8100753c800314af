"""The NeMo Gym wire contract, in process, on the warehouse test environment."""

from __future__ import annotations

import sqlite3
import time

import httpx
import pytest

from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import fresh_client, response_object

TASK = {
    "task_id": "wh-1",
    "responses_create_params": {"input": [{"role": "user", "content": "Sell two gears."}]},
    "seed": {
        "now": "2026-02-01T09:30:00",
        "rows": {
            "items": [{"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10.0}]
        },
    },
    "ground_truth": [
        {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -2, "reason": "sold"}}
    ],
    "expected_outputs": ["3 left"],
}


@pytest.fixture
def settings(tmp_path, backend, request):
    """Every protocol test runs on SQLite files and on PostgreSQL schemas."""
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    return backend_settings(backend, tmp_path / "data", prefix)


def session_exists(client: httpx.AsyncClient, session_id: str) -> bool:
    store = client.app.state.protocol.sessions.backend.store
    if hasattr(store, "session_exists"):  # PostgreSQL: the session's schema, or its archive
        with store.engine.connect() as conn:
            archived = store.archive.holds(conn, session_id)
        return store.session_exists(session_id) or archived
    path = store.session_path(session_id)
    return path.exists() or path.with_name(path.name + ".pack").exists()  # packed once closed


def dump(client: httpx.AsyncClient, session_id: str) -> list:
    """Every row of the session's database, on either backend."""
    sessions = client.app.state.protocol.sessions
    if not hasattr(sessions.backend.store, "session_exists"):
        conn = sqlite3.connect(sessions.backend.store.session_path(session_id))
        try:
            # The step log records failed calls too (docs/steps.md): not the session's state.
            return [line for line in conn.iterdump() if '"_stategym_steps"' not in line]
        finally:
            conn.close()
    schema = sessions.backend.names.session(session_id)
    tables = [t.name for t in sessions.env.metadata.sorted_tables] + ["_stategym_meta"]
    with sessions.backend.store.engine.connect() as conn:
        return [
            (name, conn.exec_driver_sql(f'SELECT * FROM "{schema}"."{name}" ORDER BY 1').all())
            for name in tables
        ]


async def seed(client: httpx.AsyncClient, task: dict = TASK) -> str:
    r = await client.post("/seed_session", json=task)
    assert r.status_code == 200, r.text
    return r.json()["session_id"]


async def test_health_and_root(warehouse):
    for path in ("/", "/health"):
        r = await warehouse.get(path)
        assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_tools_lists_typed_schemas(warehouse):
    tools = (await warehouse.get("/tools")).json()["tools"]
    # The environment's own tools, then the framework's tools every environment gets (the user,
    # then the answer tools).
    assert [t["name"] for t in tools] == [
        "get_item",
        "move_stock",
        "set_price",
        "message_user",
        "submit_answer",
        "decline_request",
    ]
    move = tools[1]
    assert move["type"] == "function" and move["strict"] is True
    assert move["parameters"]["required"] == ["sku", "delta", "reason"]
    assert move["parameters"]["additionalProperties"] is False
    assert "below zero" in move["description"]


async def test_legacy_seed_sets_signed_cookie_and_records_session(warehouse):
    session_id = await seed(warehouse)
    cookie = warehouse.cookies.get("stategym_session")
    assert cookie and cookie.startswith(session_id + ".")
    assert session_exists(warehouse, session_id)
    record = warehouse.app.state.protocol.sessions.control.get(session_id)
    assert record.task_id == "wh-1" and record.status == "open"


async def test_typed_seed_echoes_resources_session_id(warehouse):
    body = {
        "resources_session_id": "rs-42",
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "wh", "task_id": "wh-1"},
        "task_data": {k: v for k, v in TASK.items() if k != "responses_create_params"},
    }
    r = await warehouse.post("/seed_session", json=body)
    assert r.status_code == 200
    # Exactly Gym's ResourcesSeedSessionResponse: anything more fails the rollout.
    assert r.json() == {"resources_session_id": "rs-42"}
    assert "stategym_session" in r.cookies
    assert len(r.headers["X-StateGym-Session"]) == 32 and r.headers["X-StateGym-Task"] == "wh-1"
    closed = await warehouse.post(
        "/close_session", json={"resources_session_id": "rs-42", "episode_id": {"rollout_id": "r1"}}
    )
    assert closed.status_code == 200 and closed.json() == {"resources_session_id": "rs-42"}
    warehouse.cookies.clear()
    again = await warehouse.post("/seed_session", json=body)
    assert again.status_code == 409
    assert "cannot be seeded again" in again.json()["error"]["message"]


async def test_tool_call_writes_and_reads_back(warehouse):
    await seed(warehouse)
    r = await warehouse.post("/move_stock", json={"sku": "SKU-9001", "delta": -2, "reason": "sold"})
    assert r.status_code == 200 and r.json() == {"output": {"sku": "SKU-9001", "quantity": 3}}
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.json()["output"]["quantity"] == 3


@pytest.mark.parametrize(
    "args, code",
    [
        ({"sku": "SKU-9001", "delta": -99, "reason": "sold"}, "rule_violation"),
        ({"sku": "SKU-9001", "delta": "many", "reason": "sold"}, "invalid_arguments"),
        ({"sku": "SKU-9001"}, "invalid_arguments"),
        ({"sku": "SKU-9001", "delta": 1, "reason": "x", "extra": 1}, "invalid_arguments"),
        ({"sku": "NOPE", "delta": 1, "reason": "x"}, "not_found"),
        ([1, 2, 3], "invalid_arguments"),
    ],
)
async def test_failing_tool_call_is_readable_and_changes_nothing(warehouse, args, code):
    session_id = await seed(warehouse)
    before = dump(warehouse, session_id)
    r = await warehouse.post("/move_stock", json=args)
    assert r.status_code == 200
    error = r.json()["error"]
    assert error["code"] == code and error["message"]
    if code == "invalid_arguments":
        assert "move_stock takes" in error["hint"] or "JSON object" in error["message"]
    assert dump(warehouse, session_id) == before


async def test_unknown_tool_lists_known_tools(warehouse):
    await seed(warehouse)
    r = await warehouse.post("/drop_database", json={})
    assert r.status_code == 404
    assert r.json()["error"]["known_tools"] == [
        "get_item",
        "move_stock",
        "set_price",
        "message_user",
        "submit_answer",
        "decline_request",
    ]


async def test_missing_forged_and_expired_cookies_are_4xx(warehouse):
    session_id = await seed(warehouse)
    good = warehouse.cookies.get("stategym_session")
    warehouse.cookies.clear()
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.status_code == 401 and "seed_session" in r.json()["error"]["hint"]
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    signer = warehouse.app.state.protocol.signer
    cases = {
        forged: "signature",
        "../../etc/passwd": "malformed",
        signer.sign(session_id, issued=int(time.time()) - 10**8): "expired",
    }
    for value, word in cases.items():
        async with fresh_client(warehouse) as other:
            other.cookies.set("stategym_session", value)
            r = await other.post("/get_item", json={"sku": "SKU-9001"})
            assert r.status_code == 401, value
            assert word in r.json()["error"]["message"]


async def test_cookies_of_other_servers_are_ignored(warehouse):
    await seed(warehouse)
    warehouse.cookies.set("session", "agent-server-cookie")
    warehouse.cookies.set("model_server", "xyz")
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.status_code == 200 and "output" in r.json()


async def test_signed_cookie_for_unknown_session_is_404(warehouse):
    signer = warehouse.app.state.protocol.signer
    warehouse.cookies.set("stategym_session", signer.sign("0" * 32))
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.status_code == 404


async def test_close_is_idempotent_and_blocks_further_use(warehouse):
    session_id = await seed(warehouse)
    assert (await warehouse.post("/close_session", json={})).json()["closed"] is True
    assert (await warehouse.post("/close_session", json={})).json()["closed"] is False
    r = await warehouse.post("/get_item", json={"sku": "SKU-9001"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "session_closed"
    # The database outlives the rollout, for inspection.
    assert session_exists(warehouse, session_id)
    # A legacy seed is a new rollout even from a client that kept the closed session's cookie.
    r = await warehouse.post("/seed_session", json=TASK)
    assert r.status_code == 200 and r.json()["session_id"] != session_id


async def test_close_of_unknown_session_succeeds(warehouse):
    r = await warehouse.post("/close_session", json={"resources_session_id": "never-seen"})
    assert r.status_code == 200 and r.json()["closed"] is False


async def test_rollout_prefix_is_stripped(warehouse):
    r = await warehouse.post("/ng-rollout/abc-1.2_x/seed_session", json=TASK)
    assert r.status_code == 200
    r = await warehouse.post("/ng-rollout/abc-1.2_x/get_item", json={"sku": "SKU-9001"})
    assert r.json()["output"]["sku"] == "SKU-9001"


async def test_verify_echoes_request_and_scores(warehouse):
    session_id = await seed(warehouse)
    body = {**TASK, "response": response_object([], "Nothing done.")}
    r = await warehouse.post("/verify", json=body)
    result = r.json()
    assert r.status_code == 200
    assert result["responses_create_params"] == TASK["responses_create_params"]
    assert result["response"] == body["response"] and result["session_id"] == session_id
    assert result["reward"] == 0.0
    assert "items" in result["verification"]["state_diff"]
    await warehouse.post("/move_stock", json={"sku": "SKU-9001", "delta": -2, "reason": "sold"})
    r = await warehouse.post("/verify", json={**TASK, "response": response_object([], "3 left.")})
    assert r.json()["reward"] == 1.0
    assert r.json()["reward_components"]["state_match"] == 1.0
    # Right state, answer missing the expected output: 0.
    r = await warehouse.post("/verify", json={**TASK, "response": response_object([], "ok")})
    assert r.json()["reward"] == 0.0 and r.json()["verification"]["missing_outputs"] == ["3 left"]


async def test_verify_without_response_scores_outputs_as_missing(warehouse):
    await seed(warehouse)
    await warehouse.post("/move_stock", json={"sku": "SKU-9001", "delta": -2, "reason": "sold"})
    r = await warehouse.post("/verify", json=TASK)
    assert r.status_code == 200 and r.json()["reward"] == 0.0


@pytest.mark.parametrize(
    "route, content, status",
    [
        ("/seed_session", b"{not json", 400),
        ("/seed_session", b"[1, 2]", 400),
        ("/seed_session", b"", 400),
        ("/verify", b"\xff\xfe", 400),
        ("/aggregate_metrics", b"{}", 400),
    ],
)
async def test_malformed_bodies_are_4xx(warehouse, route, content, status):
    await seed(warehouse)
    r = await warehouse.post(route, content=content, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert r.json()["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"seed": "not an object"},
        {"seed": {"rows": {"no_such_table": [{"a": 1}]}}},
        {"seed": {"rows": {"items": [{"id": 1, "bogus_column": 1}]}}},
        {"seed": {"now": "yesterday"}},
        {"ground_truth": "cancel everything"},
        {"expected_outputs": [1, 2]},
    ],
)
async def test_seed_with_invalid_task_is_422(warehouse, body):
    r = await warehouse.post("/seed_session", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "invalid_task"


async def test_wrong_content_type_is_415(warehouse):
    r = await warehouse.post(
        "/seed_session", content=b"task", headers={"content-type": "text/plain"}
    )
    assert r.status_code == 415


async def test_oversized_body_is_413(warehouse):
    r = await warehouse.post(
        "/seed_session",
        content=b"{" + b" " * (3 * 1024 * 1024) + b"}",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413


async def test_aggregate_metrics_shape(warehouse):
    rows = [
        {"task_id": "a", "reward": 1.0, "reward_components": {"state_match": 1.0}},
        {"task_id": "a", "reward": 0.0, "reward_components": {"state_match": 0.0}},
        {"task_id": "b", "reward": 0.0},
    ]
    r = await warehouse.post("/aggregate_metrics", json={"verify_responses": rows})
    body = r.json()
    assert body["group_level_metrics"] == []
    assert body["agent_metrics"]["mean/reward"] == pytest.approx(1 / 3)
    assert body["key_metrics"]["pass_at_k"] == 0.5
    assert body["key_metrics"]["num_rollouts"] == 3.0


async def test_openapi_documents_tool_bodies(warehouse):
    spec = (await warehouse.get("/openapi.json")).json()
    body = spec["paths"]["/move_stock"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["required"] == ["sku", "delta", "reason"]


async def test_broken_gold_masks_the_sample(warehouse):
    broken = {
        **TASK,
        "ground_truth": [
            {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -99, "reason": "x"}}
        ],
    }
    await seed(warehouse, broken)
    result = (await warehouse.post("/verify", json=broken)).json()
    assert result["mask_sample"] is True and result["failure_kind"] == "gold_failed"
    assert result["verification"]["gold_failed_calls"][0]["name"] == "move_stock"
