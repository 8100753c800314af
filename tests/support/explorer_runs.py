"""Real retail rollouts for the run explorer's tests (in-process and in Chromium), either backend.

retail-020 (cancel an order) three ways: `pass` (the gold calls, reward 1), `fail` (looks the
order up, then a cancel of the wrong order is refused: an error step, reward 0), `fork` (forked
from `pass` after its second step, then cancels: lineage); and `refusal`: retail-011 asks to
cancel a delivered order, the cancel is refused by the tool and the agent declines.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.support.rollouts import gold_answer, load_tasks, response_object

TASKS = {t["task_id"]: t for t in load_tasks(load_environment("retail").tasks_path)}
CANCEL = TASKS["retail-020"]
DELIVERED = TASKS["retail-011"]
PENDING = "#W90200010"  # the order retail-020 cancels


def gold_calls(task: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            c["name"],
            c["arguments"] if isinstance(c["arguments"], dict) else json.loads(c["arguments"]),
        )
        for c in task["ground_truth"]
    ]


async def _play(
    client: httpx.AsyncClient, calls: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    for i, (name, args) in enumerate(calls):
        result = await client.post(f"/{name}", json=args)
        assert result.status_code < 500, result.text
        outputs.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": name,
                "arguments": json.dumps(args),
            }
        )
        outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": result.text})
    return outputs


async def _finish(
    client: httpx.AsyncClient, task: dict[str, Any], outputs: list[dict[str, Any]], answer: str
) -> dict[str, Any]:
    body = {**task, "response": response_object(outputs, answer)}
    verified = await client.post("/verify", json=body)
    assert verified.status_code == 200, verified.text
    assert (await client.post("/close_session", json={})).status_code == 200
    return verified.json()


async def _build(settings: Settings) -> dict[str, str]:
    app = create_app(settings, load_environment("retail"))
    ids: dict[str, str] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)

        def client(cookie: str | None = None) -> httpx.AsyncClient:
            cookies = {"stategym_session": cookie} if cookie else None
            return httpx.AsyncClient(transport=transport, base_url="http://sg", cookies=cookies)

        calls = gold_calls(CANCEL)
        async with client() as c:
            await c.post("/seed_session", json=CANCEL)
            first = await _play(c, calls[:2])
            forked = await c.post("/fork_session", json={"n": 1, "at_step": 2})
            assert forked.status_code == 200, forked.text
            child = forked.json()["sessions"][0]
            rest = await _play(c, calls[2:])
            verified = await _finish(c, CANCEL, first + rest, gold_answer(CANCEL))
            assert verified["reward"] == 1.0
            ids["pass"] = verified["session_id"]
        async with client(child["cookie"]) as c:
            rest = await _play(c, calls[2:])
            verified = await _finish(c, CANCEL, first + rest, gold_answer(CANCEL))
            assert verified["reward"] == 1.0
            ids["fork"] = verified["session_id"]
        async with client() as c:
            await c.post("/seed_session", json=CANCEL)
            wrong = {**calls[2][1], "order_number": "#W0000000"}
            outputs = await _play(c, [*calls[:2], (calls[2][0], wrong)])
            verified = await _finish(c, CANCEL, outputs, "I could not cancel it.")
            assert verified["reward"] == 0.0
            ids["fail"] = verified["session_id"]
        async with client() as c:
            await c.post("/seed_session", json=DELIVERED)
            refused = gold_calls(DELIVERED)
            cancel = ("cancel_pending_order", {"order_number": "#W90110007",
                      "customer_id": 101100, "reason": "no_longer_needed"})  # fmt: skip
            outputs = await _play(c, [*refused, cancel])
            answer = "Order W90110007 was already delivered, so I cannot cancel it."
            verified = await _finish(c, DELIVERED, outputs, answer)
            ids["refusal"] = verified["session_id"]
    return ids


def build_explorer_runs(settings: Settings) -> dict[str, str]:
    """Run the four rollouts against a real retail server on `settings`; returns their ids."""
    return asyncio.run(_build(settings))


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
