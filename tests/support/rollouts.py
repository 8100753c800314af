"""Drive rollouts the way NeMo Gym's agent does: seed, forward cookies, tools, verify, close."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from app import jsonio


def load_tasks(path: Path) -> list[dict[str, Any]]:
    """The rows of a task file, new objects every call. Through orjson (app/jsonio.py): four
    times json's speed on retail's 1.7 MB, read by dozens of modules as they are collected."""
    return [jsonio.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def final_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def response_object(outputs: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    """A Responses API object whose output holds the calls made and the final answer."""
    return {"id": "resp_test", "object": "response", "output": [*outputs, final_message(answer)]}


def gold_answer(task: dict[str, Any]) -> str:
    return "Done. " + " ".join(task.get("expected_outputs") or [])


def fresh_client(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """A client on the same server with its own cookie jar (one per concurrent rollout)."""
    return httpx.AsyncClient(transport=client._transport, base_url=client.base_url, timeout=60)


async def run_rollout(
    shared: httpx.AsyncClient, task: dict[str, Any], calls: list[dict[str, Any]], answer: str
) -> dict[str, Any]:
    """One rollout through HTTP with its own cookie jar; returns the verify response."""
    async with fresh_client(shared) as client:
        return await _rollout(client, task, calls, answer)


async def _rollout(
    client: httpx.AsyncClient, task: dict[str, Any], calls: list[dict[str, Any]], answer: str
) -> dict[str, Any]:
    seeded = await client.post("/seed_session", json=task)
    assert seeded.status_code == 200, seeded.text
    outputs = []
    for i, call in enumerate(calls):
        result = await client.post(f"/{call['name']}", json=call["arguments"])
        assert result.status_code == 200, result.text
        outputs.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
            }
        )
        outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": result.text})
    verified = await client.post(
        "/verify", json={**task, "response": response_object(outputs, answer)}
    )
    assert verified.status_code == 200, verified.text
    closed = await client.post("/close_session", json={})
    assert closed.status_code == 200
    return verified.json()
