"""NeMo Gym 0.7.0's own session conformance check, run against every StateGym environment.

Needs nemo-gym, which needs Python 3.13: `make test-nemo-gym` builds `.venv-gym` and runs this
module there. In StateGym's own virtualenv (no nemo_gym) the whole module is skipped, and
tests/server/test_typed_sessions.py checks the same rules without Gym's code.

Everything here goes through Gym's pydantic models (extra keys forbidden) and Starlette's
TestClient without lifespan, exactly as `check_resources_session_contract` drives a server.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

nemo_gym = pytest.importorskip("nemo_gym", reason="nemo-gym is not installed (make test-nemo-gym)")

from fastapi.testclient import TestClient  # noqa: E402
from nemo_gym.base_resources_server import (  # noqa: E402
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
)
from nemo_gym.episode_types import EpisodeId, TaskId  # noqa: E402
from nemo_gym.testing.session_conformance import check_resources_session_contract  # noqa: E402

from app.registry import environment_names, load_environment  # noqa: E402
from app.server.api import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SECRET = "conformance-secret-0123456789-abcdefghijklmnop"
PG_URL = os.environ.get("STATEGYM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# What Gym's environment servers strip from a row before it becomes task_data.
_NOT_TASK_DATA = ("responses_create_params", "agent_ref", "task_source")


def _pg_reason() -> str | None:
    try:
        from sqlalchemy import create_engine

        from app.storage.backend import sync_pg_url

        engine = create_engine(sync_pg_url(PG_URL), connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means "no server to test on"
        return f"no PostgreSQL at {PG_URL}: {exc}"
    return None


def _cases() -> list[Any]:
    cases = []
    for name in environment_names():
        cases.append(pytest.param((name, "sqlite"), id=f"{name}-sqlite"))
        marks = [pytest.mark.skipif(name == "sql", reason="the sql console runs on SQLite only")]
        cases.append(pytest.param((name, "postgres"), id=f"{name}-postgres", marks=marks))
    return cases


@pytest.fixture(params=_cases())
def served(request, tmp_path) -> tuple[Any, dict[str, Any]]:
    """(app, first task row) for one environment on one backend, on a fresh data dir."""
    env_name, backend = request.param
    extra: dict[str, Any] = {}
    if backend == "postgres":
        reason = _pg_reason()
        if reason:
            pytest.skip(reason)
        prefix = "g" + uuid.uuid4().hex[:10]
        extra = {"database_url": PG_URL, "pg_schema_prefix": prefix}
    settings = Settings(data_dir=tmp_path / "data", secret_key=SECRET, **extra)
    app = create_app(settings, load_environment(env_name))
    if backend == "postgres":
        # Gym's check runs without the lifespan, so nothing stops the schema pool's refill thread:
        # shut the manager down first, or dropping a template it is cloning from deadlocks.
        def teardown() -> None:
            asyncio.run(app.state.protocol.sessions.aclose())
            _drop_schemas(prefix)

        request.addfinalizer(teardown)
    rows = load_environment(env_name).tasks_path.read_text().splitlines()
    return app, json.loads(rows[0])


def _drop_schemas(prefix: str) -> None:
    from sqlalchemy import create_engine

    from app.storage.backend import sync_pg_url

    engine = create_engine(sync_pg_url(PG_URL))
    with engine.connect() as conn:
        names = conn.exec_driver_sql(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "\\_%",)
        ).all()
        conn.commit()
        # The step-log function's schema last (dropped first it cascades to every trigger).
        for (name,) in sorted(names, key=lambda row: row[0].endswith("_fn")):
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.commit()
    engine.dispose()


def _seed_request(row: dict[str, Any], rollout: str = "r-1") -> ResourcesSeedSessionRequest:
    return ResourcesSeedSessionRequest(
        resources_session_id=f"resources-session-{uuid.uuid4().hex}",
        episode_id=EpisodeId(rollout_id=rollout, attempt=0),
        task_id=TaskId(taskset="stategym", task_id=str(row["task_id"])),
        task_data={k: v for k, v in row.items() if k not in _NOT_TASK_DATA},
    )


def _live_sessions(app: Any) -> int:
    sessions = app.state.protocol.sessions
    return sessions.control.count_live(sessions.env.name)


def test_gym_session_contract(served):
    app, row = served
    check_resources_session_contract(app, _seed_request(row), keeps_state=True)


def test_repeated_seed_is_the_same_session_and_another_episode_conflicts(served):
    app, row = served
    client = TestClient(app, raise_server_exceptions=False)
    seed = _seed_request(row)
    first = client.post("/seed_session", json=seed.model_dump(mode="json"))
    again = client.post("/seed_session", json=seed.model_dump(mode="json"))
    for answer in (first, again):
        assert answer.status_code == 200, answer.text
        ResourcesSeedSessionResponse.model_validate(answer.json())
    assert again.cookies["stategym_session"] == first.cookies["stategym_session"]
    assert again.headers["X-StateGym-Session"] == first.headers["X-StateGym-Session"]
    assert _live_sessions(app) == 1  # no second database
    other = seed.model_copy(update={"episode_id": EpisodeId(rollout_id="r-2", attempt=0)})
    conflict = client.post("/seed_session", json=other.model_dump(mode="json"))
    assert conflict.status_code == 409 and "episode" in conflict.json()["error"]["message"]
    assert _live_sessions(app) == 1


def test_tombstone_ownership_and_lost_sessions(served):
    app, row = served
    owner = TestClient(app, raise_server_exceptions=False)
    seed = _seed_request(row)
    assert owner.post("/seed_session", json=seed.model_dump(mode="json")).status_code == 200

    # A cookieless close naming another episode may not close it (409, NeMo Gym main's rule).
    stranger = TestClient(app, raise_server_exceptions=False)
    wrong = ResourcesCloseSessionRequest(
        resources_session_id=seed.resources_session_id,
        episode_id=EpisodeId(rollout_id="someone-else"),
    )
    refused = stranger.post("/close_session", json=wrong.model_dump(mode="json"))
    assert refused.status_code == 409
    assert _live_sessions(app) == 1

    # Verify answers in Gym's verify model; the owner's close then answers exactly the id.
    body = {**seed.task_data, "responses_create_params": row["responses_create_params"]}
    body["response"] = {
        "id": "resp-1", "created_at": 0, "model": "policy", "object": "response", "output": [],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip
    verified = owner.post("/verify", json=body)
    assert verified.status_code == 200
    BaseVerifyResponse.model_validate(verified.json())
    close = ResourcesCloseSessionRequest(
        resources_session_id=seed.resources_session_id, episode_id=seed.episode_id
    )
    closed = owner.post("/close_session", json=close.model_dump(mode="json"))
    assert closed.status_code == 200
    ResourcesCloseSessionResponse.model_validate(closed.json())

    # Closed session: a tool call is a readable 404; a verify is scored by replaying the
    # response's calls on the task's snapshot (the server is stateless for reverify).
    tool = app.state.protocol.env.tools[0].name
    call = owner.post(f"/{tool}", json={})
    assert call.status_code == 404 and "closed" in call.json()["error"]["message"]
    replayed = owner.post("/verify", json=body).json()
    BaseVerifyResponse.model_validate(replayed)
    assert replayed["verified_by"] == "replay" and replayed["reward"] == verified.json()["reward"]

    # A close of a never-seeded id is a tombstone: the id can never be seeded afterwards.
    ghost = _seed_request(row)
    tomb = ResourcesCloseSessionRequest(
        resources_session_id=ghost.resources_session_id, episode_id=ghost.episode_id
    )
    assert stranger.post("/close_session", json=tomb.model_dump(mode="json")).status_code == 200
    late = stranger.post("/seed_session", json=ghost.model_dump(mode="json"))
    assert late.status_code == 409


def test_reverify_mode_is_honest(served):
    app, _row = served
    answer = TestClient(app).get("/reverify_mode")
    assert answer.status_code == 200 and answer.json() == "stateless"


def test_gym_session_contract_with_tools_over_mcp(tmp_path):
    """With `expose_tools_over_mcp`, Gym's models accept the seed answer's `resources_tools`,
    the contract still holds, and the token reaches the session's tools at `/mcp` (no lifespan,
    as Gym's TestClient drives it)."""
    settings = Settings(data_dir=tmp_path / "data", secret_key=SECRET, expose_tools_over_mcp=True)
    app = create_app(settings, load_environment("retail"))
    row = json.loads(load_environment("retail").tasks_path.read_text().splitlines()[0])
    check_resources_session_contract(app, _seed_request(row), keeps_state=True)

    client = TestClient(app, raise_server_exceptions=False)
    seed = _seed_request(row)
    first = client.post("/seed_session", json=seed.model_dump(mode="json"))
    again = client.post("/seed_session", json=seed.model_dump(mode="json"))
    parsed = ResourcesSeedSessionResponse.model_validate(first.json())
    assert set(first.json()) == {"resources_session_id", "resources_tools"}
    tools = parsed.resources_tools
    assert tools is not None and (tools.url_path, tools.transport) == ("/mcp", "http")
    assert tools.server_name == "retail"
    assert again.json()["resources_tools"] == first.json()["resources_tools"]  # a retry: same token

    rpc_headers = {**tools.headers, "Accept": "application/json, text/event-stream"}
    tool = app.state.protocol.env.tools[0].name
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    request["params"] = {"name": tool, "arguments": {}}
    answer = client.post("/mcp", json=request, headers=rpc_headers)
    over_http = client.post(f"/{tool}", json={})
    assert answer.status_code == 200, answer.text
    [content] = answer.json()["result"]["content"]
    assert content["text"] == over_http.text
