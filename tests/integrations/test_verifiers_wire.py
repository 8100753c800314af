"""What verifiers 0.4.0's `NeMoGymTaskset` does against a NeMo Gym server, step by step, against a
real StateGym (verifiers/v1/tasksets/nemo_gym/taskset.py and toolset.py):
- seed: POST the whole row, `raise_for_status()`, keep the cookies; when the answer has `mcp`
  (`{url_path, headers}`), tools go over MCP to `url + url_path` with those headers, else
  `POST /<tool>` with the cookies, the body text as the result, `isError = not is_success`;
- verify: the row plus `response`; `reward` popped, then `del result["responses_create_params"],
  result["response"]` (a KeyError if either is missing); numeric top-level fields become metrics;
- it never calls `/close_session`: STATEGYM_CLOSE_ON_VERIFY=true closes the session at verify,
  and without it the idle timeout (STATEGYM_SESSION_IDLE_TTL_SECONDS) closes what is left open.

verifiers itself needs mcp 2.x, StateGym mcp 1.x: the two cannot share a virtualenv, so the
package's own run lives in tests/verifiers_taskset/ (docs/integrations.md says how to run it).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.registry import load_environment
from app.server.mcp_access import TOKEN_HEADER
from tests.conftest import start_server, stop_server
from tests.support.rollouts import gold_answer, load_tasks, response_object

ROWS = load_tasks(load_environment("retail").tasks_path)
SETTINGS = {"STATEGYM_EXPOSE_TOOLS_OVER_MCP": "true", "STATEGYM_CLOSE_ON_VERIFY": "true"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("verifiers")
    proc, url = start_server("retail", data_dir, extra_env=SETTINGS)
    try:
        yield url, data_dir
    finally:
        stop_server(proc)


def open_sessions(data_dir: Path) -> list[str]:
    from app.cli.sessions import inspector
    from app.storage.control import SessionQuery

    with inspector(data_dir) as insp:
        return [r.id for r in insp.query(SessionQuery(limit=10_000)) if r.status != "closed"]


async def taskset_rollout(url: str, row: dict[str, Any], *, gold: bool) -> dict[str, Any]:
    """One NeMoGymTask: setup (seed), the harness's tool calls, the `nemo_gym` reward."""
    async with httpx.AsyncClient(timeout=60) as http:
        seeded = await http.post(f"{url}/seed_session", json=row)
        seeded.raise_for_status()
        cookies = dict(seeded.cookies)
        metadata = seeded.json().get("mcp")
        assert metadata is not None
        mcp_url = f"{url}/{metadata['url_path'].lstrip('/')}"
        outputs: list[dict[str, Any]] = []
        async with (
            httpx.AsyncClient(headers=metadata["headers"], timeout=60) as mcp_http,
            streamable_http_client(mcp_url, http_client=mcp_http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = [t.name for t in (await session.list_tools()).tools]
            for i, call in enumerate(row["ground_truth"] if gold else []):
                assert call["name"] in listed
                result = await session.call_tool(call["name"], call["arguments"])
                assert not result.isError, result.content
                args = json.dumps(call["arguments"])
                outputs.append(
                    {"type": "function_call", "call_id": f"c{i}", "name": call["name"]}
                    | {"arguments": args}
                )
                text = result.content[0].text  # type: ignore[union-attr]
                outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": text})
        answer = gold_answer(row) if gold else ""
        async with httpx.AsyncClient(cookies=cookies, timeout=60) as state_http:  # state.post
            verified = await state_http.post(
                f"{url}/verify", json=row | {"response": response_object(outputs, answer)}
            )
        verified.raise_for_status()
        result = verified.json()
        reward = result.pop("reward")
        del result["responses_create_params"], result["response"]
        metrics = {k: float(v) for k, v in result.items() if isinstance(v, (bool, int, float))}
        return {"reward": float(reward), "metrics": metrics, "info": result}


async def test_legacy_seed_answers_the_mcp_key_verifiers_reads(server):
    url, _ = server
    async with httpx.AsyncClient(timeout=30) as http:
        answer = (await http.post(f"{url}/seed_session", json=ROWS[0])).json()
        await http.post(f"{url}/close_session", json={})
    block = answer["resources_tools"]
    # verifiers refuses an `mcp` block without `transport: "http"`.
    assert answer["mcp"] == {"url_path": "/mcp", "transport": "http", "headers": block["headers"]}
    assert set(answer["mcp"]["headers"]) == {TOKEN_HEADER}


@pytest.mark.parametrize("index", [0, 7, 30])
async def test_gold_scores_one_noop_zero_and_verify_closes(server, index):
    url, data_dir = server
    row = ROWS[index]
    gold = await taskset_rollout(url, row, gold=True)
    noop = await taskset_rollout(url, row, gold=False)
    assert gold["reward"] == 1.0, gold["info"].get("failure_reason")
    assert noop["reward"] == 0.0
    assert open_sessions(data_dir) == []  # verifiers never closes; close_on_verify did


async def test_direct_http_path_without_mcp(tmp_path):
    """With MCP off the seed answer has no `mcp`: tools go to POST /<tool> with the cookie."""
    proc, url = start_server("retail", tmp_path, extra_env={"STATEGYM_CLOSE_ON_VERIFY": "true"})
    row = ROWS[7]
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            seeded = await http.post(f"{url}/seed_session", json=row)
            seeded.raise_for_status()
            assert "mcp" not in seeded.json()
            outputs = []  # the client's jar carries the seed's cookie, as state.post does
            for i, call in enumerate(row["ground_truth"]):
                answer = await http.post(f"{url}/{call['name']}", json=call["arguments"])
                assert answer.is_success  # isError = not is_success
                outputs += [
                    {"type": "function_call", "call_id": f"c{i}", "name": call["name"]}
                    | {"arguments": json.dumps(call["arguments"])},
                    {"type": "function_call_output", "call_id": f"c{i}", "output": answer.text},
                ]
            body = row | {"response": response_object(outputs, gold_answer(row))}
            verified = await http.post(f"{url}/verify", json=body)
            verified.raise_for_status()
            assert verified.json()["reward"] == 1.0
        assert open_sessions(tmp_path) == []
    finally:
        stop_server(proc)


@pytest.mark.slow
async def test_a_session_verifiers_leaves_open_is_closed_by_the_idle_timeout(tmp_path):
    """Without close_on_verify nothing closes a verifiers rollout's session but the reaper:
    a second of idleness here (an hour by default), the reaper's pass every second."""
    idle = {"STATEGYM_SESSION_IDLE_TTL_SECONDS": "1", "STATEGYM_REAPER_INTERVAL_SECONDS": "1"}
    proc, url = start_server(
        "retail", tmp_path, extra_env={"STATEGYM_EXPOSE_TOOLS_OVER_MCP": "true", **idle}
    )
    try:
        gold = await taskset_rollout(url, ROWS[7], gold=True)
        assert gold["reward"] == 1.0, gold["info"].get("failure_reason")
        # close_on_verify is off (its default): only the reaper closes the session.
        deadline = time.monotonic() + 15
        while open_sessions(tmp_path) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert open_sessions(tmp_path) == []
    finally:
        stop_server(proc)
