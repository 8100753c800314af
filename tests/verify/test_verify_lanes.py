"""Every verify path has a budget and its own lane (app/runtime/lanes.py, app/verify/gold.py).

The red team's case: cookieless verifies whose responses hold heavy `run_sql` calls (env sql,
each ~1 s) held the single verify thread, so another rollout's verify waited 4-9 s; a seeded
task row whose ground truth held slow calls did the same through the gold build. Here, through
HTTP (in process, each client its own peer address):

- replays, gold builds, session verifies and tool calls run on lanes of their own, and another
  client's seed, tool call and verify finish while one client's heavy replays and gold build
  are still running (an order of events, not a time);
- a client past its share of replays waits in its own queue, and past that queue gets 429 with
  Retry-After; another client is not refused; a client's heavy tool calls hold at most its
  share of the tool threads, the spare one serves another client;
- a replay past its wall-clock budget, or with more calls than the cap, is a masked sample
  with `failure_kind` and the reason; so is a task whose gold runs past the gold budget
  (remembered: the next verify does not build it again);
- a ground_truth longer than the cap is a 422 at seed and at verify.
Timings go to bench/verify_stall.py, never here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.registry import load_environment
from app.runtime.lanes import ClientGate, TooManyRequests
from app.server.api import create_app
from app.settings import Settings

HEAVY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
SQL = load_environment("sql")
ROW: dict[str, Any] = json.loads(SQL.tasks_path.read_text().splitlines()[0])
HOG, OTHER = "10.0.0.1", "10.0.0.2"


def _calls(sql: str, n: int) -> dict[str, Any]:
    output = [
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": "run_sql",
            "arguments": json.dumps({"sql": sql}),
        }
        for i in range(n)
    ]
    return {"output": output}


def _heavy_gold_row(task_id: str) -> dict[str, Any]:
    heavy = {"name": "run_sql", "arguments": {"sql": HEAVY}}
    return {**ROW, "task_id": task_id, "ground_truth": [heavy] * 6}


Clients = Callable[[str], httpx.AsyncClient]


async def _serve(settings: Settings) -> AsyncIterator[tuple[Any, Clients]]:
    app = create_app(settings, SQL)

    def client(peer: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(peer, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://sg", timeout=120)

    async with app.router.lifespan_context(app):
        yield app.state.protocol.sessions, client


@pytest.fixture
def settings(tmp_path: Path) -> Callable[..., Settings]:
    def build(**extra: Any) -> Settings:
        return Settings(data_dir=tmp_path / "data", env="sql", **extra)

    return build


async def _wait_for(check: Callable[[], bool]) -> None:
    """Until `check()` holds (a state of the server, polled; the test's own timeout bounds it)."""
    while not check():
        await asyncio.sleep(0.01)


async def test_lanes_are_separate_pools(settings) -> None:
    async for sessions, _client in _serve(settings()):
        lanes = [sessions.tool_lane, sessions.verify_lane, sessions.replay_lane, sessions.gold_lane]
        executors = {id(lane.executor) for lane in lanes} | {id(sessions.executor)}
        assert len(executors) == 5
        # Shared pools keep one thread more than a client's share.
        for lane in (sessions.tool_lane, sessions.verify_lane):
            assert lane.executor._max_workers == lane.gate.per_client + 1


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
async def test_another_clients_rollout_does_not_wait_for_heavy_replays(settings) -> None:
    config = settings(replay_budget_ms=2500, gold_budget_ms=2500, replay_queue_per_client=8)
    async for sessions, client in _serve(config):
        async with client(HOG) as hog, client(OTHER) as other:
            replays = [
                # Six calls of ~0.8 s each (the console's step budget) against a 2.5 s budget.
                asyncio.create_task(hog.post("/verify", json={**ROW, "response": _calls(HEAVY, 6)}))
                for _ in range(4)
            ]
            gold = asyncio.create_task(
                hog.post(
                    "/verify",
                    json={**_heavy_gold_row("sql-hog"), "response": _calls("SELECT 1", 1)},
                )
            )
            await _wait_for(lambda s=sessions: s.replay_lane.gate.waiting(HOG) >= 1)
            await _wait_for(lambda s=sessions: s.gold_lane.gate.in_flight(HOG) == 1)
            # Meanwhile another client's whole rollout: a fresh task (its gold built on the
            # gold lane's other thread), a tool call, a verify of its live session.
            row = {**ROW, "task_id": "sql-other"}
            assert (await other.post("/seed_session", json=row)).status_code == 200
            call = await other.post("/run_sql", json={"sql": "SELECT count(*) FROM employees"})
            assert call.status_code == 200 and "output" in call.json()
            verified = await other.post("/verify", json={**row, "response": {"output": []}})
            assert verified.status_code == 200 and "verified_by" not in verified.json()
            assert isinstance(verified.json()["reward"], float)
            assert not all(t.done() for t in replays)  # the hog's replays are still running
            answers = await asyncio.gather(*replays, gold)
        for answer in answers[:-1]:
            assert answer.status_code == 200
            got = answer.json()
            assert got.get("failure_kind") == "replay_budget", {
                k: got.get(k) for k in ("reward", "failure_reason", "replayed_calls", "mask_sample")
            }
        assert answers[-1].json()["failure_kind"] == "gold_budget"


async def test_a_client_past_its_replay_share_gets_429(settings) -> None:
    config = settings(replay_per_client=1, replay_queue_per_client=1, replay_budget_ms=1500)
    async for sessions, client in _serve(config):
        async with client(HOG) as hog, client(OTHER) as other:
            body = {**ROW, "response": _calls(HEAVY, 2)}
            first = asyncio.create_task(hog.post("/verify", json=body))
            await _wait_for(lambda s=sessions: s.replay_lane.gate.in_flight(HOG) == 1)
            second = asyncio.create_task(hog.post("/verify", json=body))
            await _wait_for(lambda s=sessions: s.replay_lane.gate.waiting(HOG) == 1)
            refused = await hog.post("/verify", json=body)
            assert refused.status_code == 429, refused.text
            assert refused.headers["Retry-After"] == "1"
            error = refused.json()["error"]
            assert error["type"] == "too_many_requests" and error["lane"] == "replays"
            assert "share" in error["message"]
            # Another client is not refused, nor queued behind the hog.
            light = await other.post("/verify", json={**ROW, "response": {"output": []}})
            assert light.status_code == 200 and light.json()["verified_by"] == "replay"
            assert not first.done() or not second.done()
            for answer in await asyncio.gather(first, second):
                assert answer.status_code == 200


async def test_a_replay_past_its_budget_or_cap_is_masked_with_the_reason(settings) -> None:
    async for _sessions, client in _serve(settings(replay_budget_ms=200, replay_max_calls=5)):
        async with client(HOG) as hog:
            over = (await hog.post("/verify", json={**ROW, "response": _calls(HEAVY, 3)})).json()
            assert over["mask_sample"] is True and over["reward"] == 0.0
            assert over["failure_kind"] == "replay_budget"
            assert "budget" in over["failure_reason"] and over["replayed_calls"] == 1
            many = {**ROW, "response": _calls("SELECT 1", 6)}
            capped = (await hog.post("/verify", json=many)).json()
            assert capped["mask_sample"] is True and capped["failure_kind"] == "replay_refused"
            assert "the limit is 5" in capped["failure_reason"]


async def test_a_gold_past_its_budget_masks_every_verify_of_the_task(settings) -> None:
    async for sessions, client in _serve(settings(gold_budget_ms=200)):
        row = _heavy_gold_row("sql-slow-gold")
        async with client(HOG) as hog:
            assert (await hog.post("/seed_session", json=row)).status_code == 200
            for _ in range(2):  # the live session's verify, then again (remembered, no rebuild)
                answer = await hog.post("/verify", json={**row, "response": {"output": []}})
                assert answer.status_code == 200
                body = answer.json()
                assert body["mask_sample"] is True and body["failure_kind"] == "gold_budget"
                assert "past the 200 ms budget" in body["failure_reason"]
        async with client(OTHER) as other:  # and cookieless
            body = (await other.post("/verify", json={**row, "response": {"output": []}})).json()
            assert body["failure_kind"] == "gold_budget"
        assert len(sessions.gold._over_budget) == 1


async def test_an_oversize_ground_truth_is_refused(settings) -> None:
    async for sessions, client in _serve(settings(ground_truth_max_calls=2)):
        call = {"name": "list_tables", "arguments": {}}
        row = {**ROW, "task_id": "sql-long", "ground_truth": [call, call, call]}
        async with client(HOG) as hog:
            for body in (row, {**row, "response": {"output": []}}):
                route = "/verify" if "response" in body else "/seed_session"
                answer = await hog.post(route, json=body)
                assert answer.status_code == 422, (route, answer.text)
                assert "ground_truth holds 3 calls; the limit is 2" in answer.text
            typed = {
                "resources_session_id": "rs-long",
                "episode_id": {"rollout_id": "r-1", "attempt": 0},
                "task_id": {"taskset": "sql", "task_id": "sql-long"},
                "task_data": {k: v for k, v in row.items() if k != "responses_create_params"},
            }
            assert (await hog.post("/seed_session", json=typed)).status_code == 422
        assert sessions.control.list() == []  # nothing was made


async def test_the_gate_keeps_each_clients_queue_apart() -> None:
    gate = ClientGate("replays", per_client=1, queue=1)
    order: list[str] = []
    release = asyncio.Event()

    async def work(client: str, name: str) -> None:
        async with gate.slot(client, may_refuse=True):
            order.append(name)
            await release.wait()

    a1 = asyncio.create_task(work("a", "a1"))
    await _wait_for(lambda: gate.in_flight("a") == 1)
    a2 = asyncio.create_task(work("a", "a2"))
    await _wait_for(lambda: gate.waiting("a") == 1)
    with pytest.raises(TooManyRequests):
        await work("a", "a3")
    b1 = asyncio.create_task(work("b", "b1"))  # not behind a's queue
    await _wait_for(lambda: "b1" in order)
    assert order == ["a1", "b1"]
    release.set()
    await asyncio.gather(a1, a2, b1)
    assert order == ["a1", "b1", "a2"] and gate.in_flight("a") == gate.in_flight("b") == 0


@pytest.mark.slow
async def test_a_client_holds_at_most_its_share_of_the_tool_threads(settings) -> None:
    """Heavy calls on six sessions of one client: two run (its share of the tool threads),
    four wait in its own queue, and the pool's spare thread serves another client's call."""
    async for sessions, client in _serve(settings()):
        gate = sessions.tool_lane.gate
        hogs = [client(HOG) for _ in range(6)]
        for hog in hogs:
            assert (await hog.post("/seed_session", json=ROW)).status_code == 200
        calls = [asyncio.create_task(h.post("/run_sql", json={"sql": HEAVY})) for h in hogs]
        await _wait_for(lambda g=gate: g.in_flight(HOG) == 2 and g.waiting(HOG) == 4)
        async with client(OTHER) as other:
            assert (await other.post("/seed_session", json=ROW)).status_code == 200
            mine = await other.post("/run_sql", json={"sql": "SELECT count(*) FROM employees"})
            assert mine.status_code == 200 and "output" in mine.json()
        assert gate.waiting(HOG) >= 1  # served while the hog still queued
        for answer in await asyncio.gather(*calls):
            assert answer.status_code == 200  # each a tool error: stopped after ~1 s
        for hog in hogs:
            await hog.aclose()


async def test_a_cancelled_waiter_gives_its_place_back() -> None:
    """A request that goes away while queued (client disconnect) leaves no slot taken."""
    gate = ClientGate("replays", per_client=1, queue=4)
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.slot("a"):
            await release.wait()

    holder = asyncio.create_task(hold())
    await _wait_for(lambda: gate.in_flight("a") == 1)
    queued = [asyncio.create_task(hold()) for _ in range(2)]
    await _wait_for(lambda: gate.waiting("a") == 2)
    queued[0].cancel()
    release.set()
    await asyncio.gather(holder, queued[1])
    with pytest.raises(asyncio.CancelledError):
        await queued[0]
    assert gate.in_flight("a") == 0 and gate.waiting("a") == 0
