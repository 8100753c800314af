"""OpenEnv's own clients (`GenericEnvClient`, `MCPToolClient`) drive `stategym serve --protocol
openenv` over its WebSocket: gold replays score 1.0, doing nothing scores 0.0, sessions are
isolated, and no session outlives its connection."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient

from app.registry import load_environment
from tests.conftest import PG_URL
from tests.openenv_clients.conftest import ENV_NAMES, OpenEnvServer, spawn, stop, wait

# Replays in flight at once per test: enough to overlap sessions, few enough for two cores.
PARALLEL = 8


def gold_message(row: dict[str, Any]) -> str:
    """The final reply a gold rollout gives: the row's expected outputs, if it has any."""
    return "Done. " + " ".join(row.get("expected_outputs") or [])


ANSWER_TOOLS = ("submit_answer", "decline_request")


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "call_tool", "tool_name": name, "arguments": arguments}


async def play(url: str, row: dict[str, Any], *, gold: bool) -> dict[str, Any]:
    """One episode on its own WebSocket: reset to the row's task, its gold calls (or none),
    then `finish`. Returns what the checks need."""
    async with GenericEnvClient(base_url=url) as env:
        reset = await env.reset(task_id=row["task_id"])
        assert not reset.done and reset.observation["task_id"] == row["task_id"]
        results = []
        calls = row["ground_truth"] if gold else []
        end = None
        for i, gold_call in enumerate(calls):
            step = await env.step(call(gold_call["name"], gold_call["arguments"]))
            assert step.observation.get("error") is None, step.observation
            results.append(step.observation["result"])
            # The answer tools end an episode: a gold that submits or declines ends with it.
            last = i == len(calls) - 1 and gold_call["name"] in ANSWER_TOOLS
            assert step.done == last, step.observation
            if last:
                end = step
        if end is None:
            message = gold_message(row) if gold else ""
            end = await env.step(call("finish", {"message": message}))
        state = await env.state()
    return {"end": end, "state": state, "results": results, "reset": reset}


async def play_all(url: str, rows: list[dict[str, Any]], *, gold: bool) -> list[dict[str, Any]]:
    limit = asyncio.Semaphore(PARALLEL)

    async def one(row: dict[str, Any]) -> dict[str, Any]:
        async with limit:
            return await play(url, row, gold=gold)

    return await asyncio.gather(*(one(row) for row in rows))


async def _wait_until_closed(server: OpenEnvServer, session_ids: set[str]) -> dict[str, str]:
    """The sessions among `session_ids` still open once closing had time to land (closes run
    after the socket is gone, so they are polled for, up to 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        still = {k: v for k, v in server.live_sessions().items() if k in session_ids}
        if not still or time.monotonic() > deadline:
            return still
        await asyncio.sleep(0.2)  # lets this loop finish closing our own sockets


async def test_every_retail_gold_scores_one_and_no_session_stays_open(servers):
    server = servers["retail"]
    rows = server.rows()
    played = await play_all(server.url, rows, gold=True)
    for row, run in zip(rows, played, strict=True):
        end = run["end"]
        assert end.done is True, row["task_id"]
        assert end.reward == 1.0, (row["task_id"], end.metadata)
        assert "verification" in end.metadata and "step_rewards" in end.metadata
        assert sum(end.metadata["step_rewards"]) == pytest.approx(end.reward)
        ends_itself = row["ground_truth"][-1]["name"] in ANSWER_TOOLS  # else `finish` ends it
        assert run["state"]["step_count"] == len(row["ground_truth"]) + (0 if ends_itself else 1)
    session_ids = {run["state"]["session_id"] for run in played}
    assert len(session_ids) == len(rows)
    assert await _wait_until_closed(server, session_ids) == {}


async def test_reset_then_finish_scores_zero_on_every_retail_task(servers):
    server = servers["retail"]
    played = await play_all(server.url, server.rows(), gold=False)
    assert {run["end"].reward for run in played} == {0.0}
    assert all(run["end"].done for run in played)


@pytest.mark.parametrize("env_name", [e for e in ENV_NAMES if e != "retail"])
async def test_three_tasks_of_every_other_environment(servers, env_name):
    server = servers[env_name]
    rows = server.rows()[:3]
    gold = await play_all(server.url, rows, gold=True)
    noop = await play_all(server.url, rows, gold=False)
    assert [run["end"].reward for run in gold] == [1.0, 1.0, 1.0]
    assert [run["end"].reward for run in noop] == [0.0, 0.0, 0.0]


async def test_32_concurrent_sessions_do_not_see_each_other(servers):
    """Gold and no-op episodes of the same tasks, all on the server at once: each scores what it
    did itself, so no call landed in another episode's database."""
    server = servers["retail"]
    writes = [r for r in server.rows() if len(r["ground_truth"]) > 1][:16]
    assert len(writes) == 16
    runs = await asyncio.gather(
        *(play(server.url, row, gold=True) for row in writes),
        *(play(server.url, row, gold=False) for row in writes),
    )
    assert [run["end"].reward for run in runs] == [1.0] * 16 + [0.0] * 16
    assert len({run["state"]["session_id"] for run in runs}) == 32


async def test_a_dropped_connection_leaves_no_open_session(servers):
    server = servers["retail"]
    row = next(r for r in server.rows() if len(r["ground_truth"]) > 1)
    env = GenericEnvClient(base_url=server.url)
    await env.connect()
    await env.reset(task_id=row["task_id"])
    first = row["ground_truth"][0]
    await env.step(call(first["name"], first["arguments"]))
    session_id = (await env.state())["session_id"]
    assert session_id in server.live_sessions()
    env._ws.transport.abort()  # the TCP connection dies: no close frame, no goodbye
    assert await _wait_until_closed(server, {session_id}) == {}


async def test_mcp_tool_client_lists_and_calls_tools_on_the_reset_session(servers):
    server = servers["retail"]
    row = next(r for r in server.rows() if len(r["ground_truth"]) > 1)
    async with MCPToolClient(base_url=server.url) as env:
        tools = await env.list_tools()
        expected = [t["name"] for t in load_environment("retail").tool_schemas()] + ["finish"]
        assert [t.name for t in tools] == expected
        reset = await env.reset(task_id=row["task_id"])
        assert reset.observation.metadata["task_id"] == row["task_id"]
        *calls, last = row["ground_truth"]
        for gold_call in calls:
            await env.call_tool(gold_call["name"], **gold_call["arguments"])
        if last["name"] in ANSWER_TOOLS:  # the answer tools end the episode themselves
            end = await env.step(
                CallToolAction(tool_name=last["name"], arguments=last["arguments"])
            )
        else:
            await env.call_tool(last["name"], **last["arguments"])
            end = await env.step(CallToolAction(tool_name="finish", arguments={"message": ""}))
        assert end.done is True
        assert end.reward == 1.0


async def test_reset_by_split_and_index_seeds_the_task_the_task_api_names(servers):
    server = servers["airline"]
    async with httpx.AsyncClient(base_url=server.url) as http:
        splits = (await http.get("/airline/splits")).json()
        assert splits == [{"name": "test", "type": "test"}]
        count = (await http.post("/airline/num_tasks", json={"split": "test"})).json()
        assert count == {"num_tasks": len(server.rows())}
        task = (await http.post("/airline/task", json={"split": "test", "index": 5})).json()
        assert task["task"]["id"] == server.rows()[5]["task_id"]
        bad = await http.post("/airline/task", json={"split": "test", "index": 10_000})
        assert bad.status_code == 400
    async with GenericEnvClient(base_url=server.url) as env:
        reset = await env.reset(split="test", index=5)
        assert reset.observation["task_id"] == task["task"]["id"]
        assert reset.observation["prompt"] == task["task"]["prompt"]


async def test_tool_output_is_the_json_post_tool_answers(servers):
    """The same call on the same seeded task answers the same JSON over both protocols."""
    from app.server.api import create_app
    from app.settings import Settings
    from tests.conftest import TEST_SECRET

    server = servers["retail"]
    row = next(r for r in server.rows() if len(r["ground_truth"]) > 1)
    run = await play(server.url, row, gold=True)
    settings = Settings(data_dir=server.data_dir.parent / "nemo", secret_key=TEST_SECRET)
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as http,
    ):
        assert (await http.post("/seed_session", json=row)).status_code == 200
        over_http = []
        for gold_call in row["ground_truth"]:
            answer = await http.post(f"/{gold_call['name']}", json=gold_call["arguments"])
            over_http.append(answer.json())
    assert run["results"] == over_http


async def test_errors_are_readable_and_the_episode_goes_on(servers):
    server = servers["retail"]
    row = server.rows()[0]
    async with GenericEnvClient(base_url=server.url) as env:
        early = await env.step(call("list_products", {}))
        assert "reset" in early.observation["error"]["message"]
        with pytest.raises(RuntimeError, match="no task 'retail-999'"):
            await env.reset(task_id="retail-999")
        with pytest.raises(RuntimeError, match="outside split"):
            await env.reset(split="test", index=999)
        await env.reset(task_id=row["task_id"])  # the socket survived both refusals
        unknown = await env.step(call("no_such_tool", {}))
        assert unknown.observation["error"]["error_type"] == "tool_not_found"
        bad_args = await env.step(call("get_order_details", {"order_id": 12}))
        assert "error" in bad_args.observation["result"] and not bad_args.done
        end = await env.step(call("finish", {}))
        assert end.done
        after = await env.step(call("finish", {}))
        assert "over" in after.observation["error"]["message"]
        reset = await env.reset(task_id=row["task_id"])  # the same socket, a new episode
        assert not reset.done and (await env.state())["step_count"] == 0


async def test_postgres_backend(tmp_path, pg_prefix):
    """The same episodes with sessions as PostgreSQL schemas: gold 1.0, no-op 0.0, closed."""
    pg = {"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": pg_prefix}
    server = spawn("retail", tmp_path, pg)
    try:
        wait(server, time.monotonic() + 180)
        rows = [r for r in server.rows() if len(r["ground_truth"]) > 1][:3]
        gold = await play_all(server.url, rows, gold=True)
        noop = await play_all(server.url, rows, gold=False)
        assert [run["end"].reward for run in gold] == [1.0, 1.0, 1.0]
        assert [run["end"].reward for run in noop] == [0.0, 0.0, 0.0]
        ids = {run["state"]["session_id"] for run in gold + noop}
        assert await _wait_until_closed(server, ids) == {}
    finally:
        stop(server)


async def test_a_conversational_task_scores_one_and_acting_without_asking_zero(servers):
    """The user is a tool: OpenEnv's client talks to it with `message_user` like any other."""
    server = servers["retail"]
    # A task whose user wants a change (a declining twin asks the user to confirm nothing).
    talk = [row for row in server.rows() if (row.get("user") or {}).get("changes")]
    assert talk, "the shipped retail set has conversational tasks"
    row = talk[0]
    (run,) = await play_all(server.url, [row], gold=True)
    assert run["end"].reward == 1.0, run["end"].metadata
    replies = [
        r
        for c, r in zip(row["ground_truth"], run["results"], strict=True)
        if c["name"] == "message_user"
    ]
    assert replies and all(r["output"]["reply"] for r in replies), replies
    silent = {
        **row,
        "ground_truth": [c for c in row["ground_truth"] if c["name"] != "message_user"],
    }
    (rude,) = await play_all(server.url, [silent], gold=True)
    assert rude["end"].reward == 0.0
