"""The sql environment end to end through the HTTP API (in-process ASGI app on real files):
sessions are isolated from each other, the control database and the file system, and the
verifier cases in verifier_cases.jsonl hold."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.server.api import create_app
from app.settings import Settings
from envs.sql import ENVIRONMENT
from tests.support.rollouts import gold_answer, response_object

SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
TASKS = {
    t["task_id"]: t
    for t in map(json.loads, ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines())
}
CASES = [
    json.loads(line)
    for line in (Path(__file__).resolve().parents[1] / "verifier_cases.jsonl")
    .read_text()
    .splitlines()
    if line.strip()
]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Path]]:
    data_dir = tmp_path / "data"
    app = create_app(Settings(data_dir=data_dir, secret_key=SECRET), ENVIRONMENT)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as client:
            yield client, data_dir


def _client(shared: httpx.AsyncClient) -> httpx.AsyncClient:
    """Its own cookie jar, i.e. its own session, on the same app."""
    return httpx.AsyncClient(transport=shared._transport, base_url=shared.base_url, timeout=60)


async def _sql(client: httpx.AsyncClient, statement: str) -> dict[str, Any]:
    response = await client.post("/run_sql", json={"sql": statement})
    assert response.status_code == 200, response.text
    return response.json()


async def test_two_sessions_cannot_see_or_reach_each_other(server) -> None:
    shared, data_dir = server
    task = TASKS["sql-017"]
    async with _client(shared) as a, _client(shared) as b:
        sid_a = (await a.post("/seed_session", json=task)).json()["session_id"]
        sid_b = (await b.post("/seed_session", json=task)).json()["session_id"]
        wrote = await _sql(a, "UPDATE employees SET title = 'Secret Agent' WHERE id = 42")
        assert wrote["output"]["rows_affected"] == 1
        seen_a = await _sql(a, "SELECT title FROM employees WHERE id = 42")
        seen_b = await _sql(b, "SELECT title FROM employees WHERE id = 42")
        assert seen_a["output"]["rows"] == [["Secret Agent"]]
        assert seen_b["output"]["rows"] != [["Secret Agent"]]

        file_b = data_dir / "sessions" / "sql" / f"{sid_b}.sqlite"
        assert file_b.exists()
        escape = data_dir / "escaped.sqlite"
        for statement in (
            f"ATTACH DATABASE '{file_b}' AS other",
            f"ATTACH '{data_dir / 'control.sqlite'}' AS control",
            f"ATTACH 'file:{file_b}?mode=ro' AS other",
            f"VACUUM INTO '{escape}'",
            "SELECT * FROM _stategym_meta",
            "UPDATE _stategym_meta SET value = 'closed' WHERE key = 'status'",
            "DELETE FROM _stategym_step_rows",  # the step log: what verify reads changes from
            "SELECT load_extension('libc.so.6')",
        ):
            error = (await _sql(a, statement))["error"]
            assert error["code"] == "not_allowed", (statement, error)
        assert not escape.exists()
        # B is untouched and still open; A's own session still works after the refusals.
        staff = 240 + len(task["seed"]["rows"]["employees"])  # the base's and the story's
        assert (await _sql(b, "SELECT count(*) FROM employees"))["output"]["rows"] == [[staff]]
        assert "output" in await _sql(a, "SELECT 1")
        assert sid_a != sid_b


async def test_verify_after_a_refused_statement_still_scores_gold(server) -> None:
    shared, _ = server
    task = TASKS["sql-029"]
    async with _client(shared) as client:
        assert (await client.post("/seed_session", json=task)).status_code == 200
        assert "error" in await _sql(client, "DELETE FROM invoices")
        for call in task["ground_truth"]:
            assert (
                "output" in (await client.post(f"/{call['name']}", json=call["arguments"])).json()
            )
        body = {**task, "response": response_object([], "done")}
        verified = (await client.post("/verify", json=body)).json()
    assert verified["reward"] == 1.0, verified.get("verification")


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
async def test_verifier_cases(server, case: dict[str, Any]) -> None:
    shared, _ = server
    task = TASKS[case["task_id"]]
    async with _client(shared) as client:
        assert (await client.post("/seed_session", json=task)).status_code == 200
        if "verify_body" in case:
            response = await client.post("/verify", json=case["verify_body"])
            assert response.status_code == case["expect"]["status"], response.text
            return
        calls = task["ground_truth"] if case["calls"] == "gold" else case["calls"]
        for call in calls:
            result = (await client.post(f"/{call['name']}", json=call["arguments"])).json()
            assert "output" in result, result
        answer = gold_answer(task) if case["answer"] == "gold" else case["answer"]
        body = {**task, "response": response_object([], answer)}
        verified = (await client.post("/verify", json=body)).json()
    assert verified["reward"] == case["expect"]["reward"], verified
    for name, value in case["expect"].get("components", {}).items():
        assert verified["reward_components"][name] == pytest.approx(value), (name, verified)
