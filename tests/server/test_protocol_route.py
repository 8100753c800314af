"""The protocol routes' lean handler (app/server/api.ProtocolRoute) answers exactly as FastAPI's.

Two apps on one environment: one as built, one whose protocol routes run FastAPI's own request
handler again (dependency solving, response serialisation). The same requests, successes and
failures, get the same status, body and headers from both (session ids and cookie values aside,
which are random), and both serve the same OpenAPI document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute, request_response

from app.server.api import ProtocolRoute, create_app
from app.settings import Settings
from tests.conftest import TEST_SECRET
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

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
_SESSION = re.compile(r"[0-9a-f]{32}")
_COOKIE = re.compile(r"stategym_session=[^;]*")


def fastapi_handlers(app: FastAPI) -> int:
    """Give every protocol route FastAPI's own handler back; how many there were."""
    swapped = 0
    for route in app.router.routes:
        if isinstance(route, ProtocolRoute):
            route.app = request_response(APIRoute.get_route_handler(route))
            swapped += 1
    return swapped


def normalised(response: httpx.Response) -> tuple[int, str, list[tuple[str, str]]]:
    headers = [
        (k, _COOKIE.sub("stategym_session=<cookie>", _SESSION.sub("<id>", v)))
        for k, v in response.headers.multi_items()
        if k not in ("x-process-time", "content-length")
    ]
    return response.status_code, _SESSION.sub("<id>", response.text), headers


async def conversation(client: httpx.AsyncClient) -> list[Any]:
    """Seed, calls (good, malformed, unknown), verify, close, and requests that fail."""
    out = []

    async def post(path: str, body: Any = None, raw: bytes | None = None, **kw: Any) -> None:
        if raw is not None:
            reply = await client.post(path, content=raw, **kw)
        else:
            reply = await client.post(path, json=body, **kw)
        out.append((path, normalised(reply)))

    await post("/move_stock", {"sku": "SKU-9001", "delta": -1})  # no session yet
    seeded = await client.post("/seed_session", json=TASK)
    out.append(("/seed_session", normalised(seeded)))
    await post("/move_stock", {"sku": "SKU-9001", "delta": -2, "reason": "sold"})
    await post("/move_stock", {"sku": "SKU-9001", "delta": "two"})  # invalid arguments
    await post("/move_stock", raw=b"{not json", headers={"content-type": "application/json"})
    await post("/move_stock", raw=b"[]", headers={"content-type": "application/json"})
    await post("/move_stock", raw=b"{}", headers={"content-type": "text/plain"})
    await post("/no_such_tool", {})
    verify = {**TASK, "response": {"output": [{"type": "message", "content": "3 left"}]}}
    await post("/verify", verify)
    await post("/verify", {**verify, "ground_truth": "nonsense"})  # a malformed scoring field
    await post("/close_session", {})
    await post("/close_session", {})  # already closed
    await post("/move_stock", {"sku": "SKU-9001", "delta": -1})  # on a closed session
    await post("/seed_session", {"task_id": 3, "seed": "not an object"})
    await post("/seed_session", raw=b"", headers={"content-type": "application/json"})
    return out


async def test_lean_handler_answers_as_fastapi_does(tmp_path: Path) -> None:
    answers, documents = [], []
    for name, swap in (("lean", False), ("fastapi", True)):
        settings = Settings(data_dir=tmp_path / name, secret_key=TEST_SECRET)
        app = create_app(settings, WAREHOUSE)
        if swap:
            assert fastapi_handlers(app) == 3 + len(WAREHOUSE.tools)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
                answers.append(await conversation(client))
                documents.append((await client.get("/openapi.json")).json())
    assert answers[0] == answers[1]
    statuses = [reply[0] for _path, reply in answers[0]]
    assert statuses == [401, 200, 200, 200, 400, 200, 415, 404, 200, 422, 200, 200, 404, 422, 400]
    assert documents[0] == documents[1]
