"""Tools over MCP, driven by the official `mcp` client against real uvicorn servers.

Coverage, to bound time: every environment lists exactly `GET /tools`; every retail task's gold
replayed over MCP earns 1.0 and its no-op 0.0, and three tasks of each other environment do the
same; the retail server runs two workers (the token names the session, not process memory);
PostgreSQL runs a few rollouts too. Tokens: forged, cookie-as-token, expired and closed-session
tokens are refused; two sessions never see each other's state. `stategym mcp` runs over stdio.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from pydantic import BaseModel, ConfigDict

from app.registry import ENVIRONMENTS, load_environment
from app.server.cookies import CookieSigner
from app.server.mcp_access import TOKEN_HEADER, check_tool_names
from app.verify.steps.tool_calls import plain_tool_name, with_plain_tool_names
from tests.conftest import PG_URL, REPO, TEST_SECRET, start_server, stop_server
from tests.support.rollouts import gold_answer, load_tasks, response_object

MCP_ON = {"STATEGYM_EXPOSE_TOOLS_OVER_MCP": "true"}
OTHER_ENVS = sorted(set(ENVIRONMENTS) - {"retail"})
TASKS_PER_OTHER_ENV = 2


class MCPServerMetadata(BaseModel):
    """NeMo Gym 0.7.0's model of the `resources_tools` block (extra keys forbidden)."""

    model_config = ConfigDict(extra="forbid")
    server_name: str
    url_path: str
    transport: str
    headers: dict[str, str]


def tasks_of(env: str) -> list[dict[str, Any]]:
    return load_tasks(load_environment(env).tasks_path)


def spread(tasks: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """n tasks spread over the file (families and difficulties vary along it)."""
    step = max(1, len(tasks) // n)
    return tasks[::step][:n]


@pytest.fixture(scope="module")
def retail_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One retail server with MCP on and two workers, shared by this module's retail tests."""
    proc, url = start_server(
        "retail", tmp_path_factory.mktemp("mcp-retail"), workers=2, extra_env=MCP_ON
    )
    yield url
    stop_server(proc)


@asynccontextmanager
async def mcp_client(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    # A fresh connection per request spreads the calls over the server's workers.
    limits = httpx.Limits(max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(headers=headers or {}, timeout=30, limits=limits) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def seed(http: httpx.AsyncClient, task: dict[str, Any]) -> dict[str, Any]:
    seeded = await http.post("/seed_session", json=task)
    assert seeded.status_code == 200, seeded.text
    block = MCPServerMetadata.model_validate(seeded.json()["resources_tools"])
    assert block.url_path == "/mcp" and block.transport == "http"
    assert set(block.headers) == {TOKEN_HEADER}
    return seeded.json()["resources_tools"]


async def mcp_rollout(url: str, task: dict[str, Any], calls: list[dict], answer: str) -> dict:
    """Seed and verify over HTTP (cookie), every tool call over MCP (token)."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        tools = await seed(http, task)
        outputs: list[dict[str, Any]] = []
        async with mcp_client(url + tools["url_path"], tools["headers"]) as session:
            for i, call in enumerate(calls):
                result = await session.call_tool(call["name"], call["arguments"])
                assert not result.isError, result.content[0].text
                # What an MCP harness records: the namespaced name.
                name = f"mcp__{tools['server_name']}__{call['name']}"
                args = json.dumps(call["arguments"])
                outputs.append(
                    {"type": "function_call", "call_id": f"c{i}", "name": name, "arguments": args}
                )
                text = result.content[0].text
                outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": text})
        body = {**task, "response": response_object(outputs, answer)}
        verified = await http.post("/verify", json=body)
        assert verified.status_code == 200, verified.text
        assert (await http.post("/close_session", json={})).status_code == 200
        # The echo keeps the names the model emitted.
        assert verified.json()["response"]["output"][: len(outputs)] == outputs
        return verified.json()


async def assert_gold_and_noop(url: str, tasks: list[dict[str, Any]]) -> None:
    # A few rollouts at once, as a collector runs them (and the server's workers share them).
    limit = asyncio.Semaphore(4)

    async def both(task: dict[str, Any]) -> None:
        async with limit:
            gold = await mcp_rollout(url, task, task["ground_truth"], gold_answer(task))
            assert gold["reward"] == 1.0, (task["task_id"], gold.get("failure_reason"))
            noop = await mcp_rollout(url, task, [], "")
            assert noop["reward"] == 0.0, task["task_id"]

    await asyncio.gather(*(both(task) for task in tasks))


async def assert_lists_exactly_the_http_tools(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        served = (await http.get("/tools")).json()["tools"]
    async with mcp_client(url + "/mcp") as session:  # listing needs no token
        listed = (await session.list_tools()).tools
    as_http = [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.inputSchema,
            "strict": True,
        }
        for t in listed
    ]
    assert as_http == served


# --- every environment -------------------------------------------------------------------------
@pytest.mark.slow  # load test: make test-slow (CI runs it)
async def test_retail_lists_http_tools_and_every_task_scores_over_mcp(retail_url):
    await assert_lists_exactly_the_http_tools(retail_url)
    await assert_gold_and_noop(retail_url, tasks_of("retail"))


@pytest.mark.slow  # retail over MCP is in `make test`; the other four add ~13 s there
@pytest.mark.parametrize("env_name", OTHER_ENVS)
async def test_other_envs_list_http_tools_and_score_over_mcp(env_name, tmp_path):
    proc, url = start_server(env_name, tmp_path / "data", extra_env=MCP_ON)
    try:
        await assert_lists_exactly_the_http_tools(url)
        await assert_gold_and_noop(url, spread(tasks_of(env_name), TASKS_PER_OTHER_ENV))
    finally:
        stop_server(proc)


@pytest.mark.slow  # two server processes cloning PostgreSQL schemas: make test-slow
async def test_postgres_backend_scores_over_mcp(tmp_path, pg_prefix):
    pg = {"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": pg_prefix, **MCP_ON}
    proc, url = start_server("retail", tmp_path / "data", workers=2, extra_env=pg)
    try:
        await assert_gold_and_noop(url, spread(tasks_of("retail"), 3))
    finally:
        stop_server(proc)


# --- tokens ------------------------------------------------------------------------
RETAIL_020 = next(t for t in tasks_of("retail") if t["task_id"] == "retail-020")
ORDER = {"order_number": "#W90200010"}


async def refusal(url: str, token: str | None, *, listing: bool = False) -> dict[str, Any]:
    """The JSON-RPC error data a call (or a listing) with `token` gets."""
    headers = {TOKEN_HEADER: token} if token is not None else {}
    async with mcp_client(url + "/mcp", headers) as session:
        with pytest.raises(McpError) as refused:
            if listing:
                await session.list_tools()
            else:
                await session.call_tool("get_order_details", ORDER)
    return refused.value.error.data


async def test_forged_cookie_expired_and_missing_tokens_are_refused(retail_url):
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        tools = await seed(http, RETAIL_020)
        token = tools["headers"][TOKEN_HEADER]
        cookie = http.cookies["stategym_session"]
    session_id = token.split(".")[0]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    other_id = f"{session_id[:-1]}{'0' if session_id[-1] != '0' else '1'}"
    expired = CookieSigner(TEST_SECRET, 60, purpose="mcp-token").sign(session_id, issued=1)
    for bad in (forged, cookie, f"{other_id}.{token.split('.', 1)[1]}", expired, "garbage", None):
        data = await refusal(retail_url, bad)
        kind = "session_expired" if bad == expired else "no_session"
        assert data["status"] == 401 and data["error"]["type"] == kind, (bad, data)
    assert (await refusal(retail_url, forged, listing=True))["status"] == 401
    # And the token is no cookie either.
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        http.cookies.set("stategym_session", token)
        assert (await http.post("/get_order_details", json=ORDER)).status_code == 401


async def test_closed_session_token_is_refused(retail_url):
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        tools = await seed(http, RETAIL_020)
        cookie = http.cookies["stategym_session"]
        assert (await http.post("/close_session", json={})).status_code == 200
    data = await refusal(retail_url, tools["headers"][TOKEN_HEADER])
    # What `POST /<tool>` answers for it: NeMo Gym's 404 for a lost session.
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        http.cookies.set("stategym_session", cookie)
        over_http = await http.post("/get_order_details", json=ORDER)
    assert data == {"status": over_http.status_code, **over_http.json()}
    assert data["status"] == 404 and data["error"]["type"] == "session_closed"


async def test_two_sessions_tokens_never_see_each_others_state(retail_url):
    async with (
        httpx.AsyncClient(base_url=retail_url, timeout=30) as http_a,
        httpx.AsyncClient(base_url=retail_url, timeout=30) as http_b,
    ):
        tools_a, tools_b = await seed(http_a, RETAIL_020), await seed(http_b, RETAIL_020)
        async with (
            mcp_client(retail_url + "/mcp", tools_a["headers"]) as a,
            mcp_client(retail_url + "/mcp", tools_b["headers"]) as b,
        ):
            before_b = (await b.call_tool("get_order_details", ORDER)).content[0].text
            for call in RETAIL_020["ground_truth"]:  # cancels the order, on A only
                assert not (await a.call_tool(call["name"], call["arguments"])).isError
            after_a = (await a.call_tool("get_order_details", ORDER)).content[0].text
            after_b = (await b.call_tool("get_order_details", ORDER)).content[0].text
        assert after_b == before_b and after_a != after_b
        assert json.loads(after_a)["output"]["status"] == "cancelled"
        # HTTP (cookie) and MCP (token) reach the same session and answer the same text.
        assert (await http_b.post("/get_order_details", json=ORDER)).text == after_b
        rewards = []
        for http in (http_a, http_b):
            verified = await http.post("/verify", json={**RETAIL_020, "response": None})
            rewards.append(verified.json()["reward"])
        assert rewards == [1.0, 0.0]


async def test_one_rollout_mixes_http_and_mcp_calls(retail_url):
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        tools = await seed(http, RETAIL_020)
        async with mcp_client(retail_url + "/mcp", tools["headers"]) as session:
            for i, call in enumerate(RETAIL_020["ground_truth"]):
                if i % 2:
                    assert not (await session.call_tool(call["name"], call["arguments"])).isError
                else:
                    answer = await http.post(f"/{call['name']}", json=call["arguments"])
                    assert "output" in answer.json()
        verified = await http.post("/verify", json={**RETAIL_020, "response": None})
        assert verified.json()["reward"] == 1.0


async def test_in_process_app_without_lifespan_serves_mcp_under_a_rollout_prefix(settings):
    """Gym's conformance check drives the app with no lifespan; /mcp must still answer."""
    from app.server.api import create_app

    app = create_app(settings.model_copy(update={"expose_tools_over_mcp": True}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sg") as http:
        tools = await seed(http, RETAIL_020)
        async with (
            httpx.AsyncClient(transport=transport, headers=tools["headers"]) as mcp_http,
            streamable_http_client("http://sg/ng-rollout/r-1/mcp", http_client=mcp_http) as (
                read,
                write,
                _,
            ),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("get_order_details", ORDER)
        assert result.content[0].text == (await http.post("/get_order_details", json=ORDER)).text
    await app.state.protocol.sessions.aclose()


async def test_a_crash_in_a_call_is_a_500_error_that_quotes_nothing(settings, monkeypatch):
    from app.server.api import create_app

    app = create_app(settings.model_copy(update={"expose_tools_over_mcp": True}))
    sessions = app.state.protocol.sessions

    async def crash(*_args: Any) -> dict[str, Any]:
        raise RuntimeError("/secret/path in a message")

    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as http:
            tools = await seed(http, RETAIL_020)
        monkeypatch.setattr(sessions, "call_tool", crash)
        async with (
            httpx.AsyncClient(transport=transport, headers=tools["headers"]) as mcp_http,
            streamable_http_client("http://sg/mcp", http_client=mcp_http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            with pytest.raises(McpError) as crashed:
                await session.call_tool("get_order_details", ORDER)
    assert crashed.value.error.data == {
        "status": 500,
        "error": {"type": "internal_error", "message": "RuntimeError"},
    }
    assert "secret" not in crashed.value.error.message


async def test_tool_errors_are_error_results_and_unknown_tools_protocol_errors(retail_url):
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        tools = await seed(http, RETAIL_020)
        over_http = await http.post("/get_order_details", json={"order_number": 7})
        async with mcp_client(retail_url + "/mcp", tools["headers"]) as session:
            result = await session.call_tool("get_order_details", {"order_number": 7})
            assert result.isError and result.content[0].text == over_http.text
            assert result.structuredContent == over_http.json()
            with pytest.raises(McpError) as unknown:
                await session.call_tool("verify", {})
        assert unknown.value.error.data["status"] == 404
        assert "verify" not in unknown.value.error.data["error"]["known_tools"]


async def test_seed_answers_resources_tools_in_both_shapes_only_when_on(retail_url, tmp_path):
    typed = {
        "resources_session_id": "rollout-7",
        "episode_id": {"rollout_id": "r7", "attempt": 0},
        "task_id": {"taskset": "retail", "task_id": "retail-020"},
        "task_data": {k: v for k, v in RETAIL_020.items() if k != "responses_create_params"},
    }
    async with httpx.AsyncClient(base_url=retail_url, timeout=30) as http:
        block = await seed(http, typed)
        again = (await http.post("/seed_session", json=typed)).json()
    assert block["server_name"] == "retail"
    # Exactly Gym's ResourcesSeedSessionResponse keys; a retried seed gets the same token.
    assert set(again) == {"resources_session_id", "resources_tools"}
    assert again["resources_tools"] == block
    proc, url = start_server("retail", tmp_path / "off")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert "resources_tools" not in (await http.post("/seed_session", json=typed)).json()
            assert (await http.post("/mcp", json={})).status_code == 404  # not mounted
    finally:
        stop_server(proc)


# --- stdio ------------------------------------------------------------------------
async def test_stdio_mode_serves_one_task_and_verifies_on_exit(tmp_path):
    task = RETAIL_020
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "mcp", "--env", "retail", "--task", task["task_id"], "--verify-on-exit"]
        + ["--data-dir", str(tmp_path / "data")],
        env={"STATEGYM_SECRET_KEY": TEST_SECRET, "PATH": "/usr/bin:/bin"},
        cwd=str(REPO),
    )
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.serverInfo.name == "retail" and "Northwind" in init.instructions
                listed = [t.name for t in (await session.list_tools()).tools]
                assert listed == [t.name for t in load_environment("retail").tools]
                for call in task["ground_truth"]:
                    result = await session.call_tool(call["name"], call["arguments"])
                    assert not result.isError, result.content[0].text
    report = stderr.read_text()
    assert "reward: 1.0" in report, report
    assert '"state_diff": {}' in report


def test_stdio_mode_refuses_an_unknown_task(tmp_path):
    from typer.testing import CliRunner

    from app.cli.main import cli

    result = CliRunner().invoke(
        cli, ["mcp", "--env", "retail", "--task", "nope", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "no task 'nope'" in result.output


# --- names ------------------------------------------------------------------------
def test_reserved_names_are_never_tools():
    for name in ENVIRONMENTS:
        check_tool_names(load_environment(name))
    retail = load_environment("retail")
    for reserved in ("verify", "seed_session", "close_session", "aggregate_metrics", "mcp"):
        clash = dataclasses.replace(retail.tools[0], name=reserved)
        with pytest.raises(ValueError, match="collides"):
            check_tool_names(dataclasses.replace(retail, tools=(*retail.tools, clash)))


def test_mcp_call_names_map_back_to_plain_names():
    tools = {"get_order_details", "a__b"}
    assert plain_tool_name("mcp__retail__get_order_details", tools) == "get_order_details"
    assert plain_tool_name("mcp__stategym__retail__get_order_details", tools) == "get_order_details"
    assert plain_tool_name("mcp__s__a__b", tools) == "a__b"
    assert plain_tool_name("mcp__retail__unknown", tools) == "mcp__retail__unknown"
    assert plain_tool_name("get_order_details", tools) == "get_order_details"
    call = {"type": "function_call", "name": "mcp__retail__get_order_details", "call_id": "1"}
    response = {"output": [call, "junk", {"type": "message"}]}
    plain = with_plain_tool_names(response, tools)
    assert plain["output"][0]["name"] == "get_order_details"
    assert response["output"][0]["name"] == "mcp__retail__get_order_details"  # not mutated


def test_nemo_gym_shim_turns_the_yaml_key_into_settings():
    import importlib.util

    path = REPO / "integrations" / "nemo_gym" / "stategym_resources" / "app.py"
    spec = importlib.util.spec_from_file_location("stategym_shim_for_mcp", path)
    assert spec and spec.loader
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    on = shim.settings_environment({"expose_tools_over_mcp": True}, "stategym_retail")
    assert on == {
        "STATEGYM_EXPOSE_TOOLS_OVER_MCP": "true",
        "STATEGYM_MCP_SERVER_NAME": "stategym_retail",
    }
    assert shim.settings_environment({"expose_tools_over_mcp": False}, "x") == {}
    named = {"expose_tools_over_mcp": True, "settings": {"mcp_server_name": "shop"}}
    assert shim.settings_environment(named, "x")["STATEGYM_MCP_SERVER_NAME"] == "shop"
    with pytest.raises(SystemExit, match="true or false"):
        shim.settings_environment({"expose_tools_over_mcp": "yes"}, "x")
    from app.settings import Settings

    assert Settings(expose_tools_over_mcp="true", mcp_server_name="stategym_retail")
