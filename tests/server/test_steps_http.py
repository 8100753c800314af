"""Steps over HTTP: the log a live session keeps, step rewards and the trajectory check in
/verify, reverify by replay (closed, gone and cookieless sessions; `stategym reverify`), and
`stategym sessions steps`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import load_environment
from app.runtime.steps import args_text, body_text
from app.server.api import JSONResponse, create_app
from app.storage.steplog import step_log
from app.verify import session_verify
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import final_message, gold_answer, load_tasks

TASKS = {t["task_id"]: t for t in load_tasks(load_environment("retail").tasks_path)}
MULTI = TASKS["retail-044"]  # address change + two order address changes: three writing steps
CANCEL = TASKS["retail-020"]


def _args(call: dict[str, Any]) -> dict[str, Any]:
    args = call["arguments"]
    return json.loads(args) if isinstance(args, str) else args


async def _rollout(
    client: httpx.AsyncClient, task: dict[str, Any], calls: list[tuple[str, Any]], answer: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Seed, make the calls; returns (response.output items, raw bodies)."""
    seeded = await client.post("/seed_session", json=task)
    assert seeded.status_code == 200, seeded.text
    items, bodies = [], []
    for i, (name, args) in enumerate(calls):
        r = await client.post(f"/{name}", json=args)
        bodies.append(r.text)
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": name,
                "arguments": json.dumps(args),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": r.text})
    items.append(final_message(answer))
    return items, bodies


@pytest.fixture
async def retail(tmp_path, backend, request):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    settings = backend_settings(backend, tmp_path / "data", prefix)
    app = create_app(settings, load_environment("retail"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
            client.app = app  # type: ignore[attr-defined]
            client.backend = backend  # type: ignore[attr-defined]
            yield client


async def _read_log(client: Any, session_id: str) -> tuple[Any, Any, Any]:
    """(steps, change counts, changes) of a live session, read through its backend."""
    sessions = client.app.state.protocol.sessions
    handle = await sessions._handle(session_id)

    def read(conn: Any) -> tuple[Any, Any, Any]:
        with conn.begin():
            log = step_log(conn)
            assert log is not None
            return log.steps(), log.change_counts(), log.changes()

    return sessions.backend.read(handle, read)


async def test_live_session_logs_every_call_with_its_row_changes(retail):
    calls = [(c["name"], _args(c)) for c in MULTI["ground_truth"]]
    # A failing call in the middle: wrong arguments, then a refused one.
    calls.insert(2, ("get_order_details", {"order": "nope"}))
    refused = {"order_id": "#W0000000", "reason": "no longer needed"}
    calls.insert(3, ("cancel_pending_order", refused))
    items, bodies = await _rollout(retail, MULTI, calls, gold_answer(MULTI))
    body = {**MULTI, "response": {"output": items}}
    verified = (await retail.post("/verify", json=body)).json()
    steps, counts, changes = await _read_log(retail, verified["session_id"])
    assert [s.tool for s in steps] == [name for name, _ in calls]
    assert [s.output for s in steps] == bodies  # exactly what the agent was sent
    assert steps[2].outcome == "invalid_arguments" and steps[3].outcome != "ok"
    assert 3 not in counts and 4 not in counts  # failed calls change no row
    writes = [s.idx for s in steps if s.idx in counts]
    assert len(writes) == 3
    address = next(c for c in changes[writes[0]] if c.table == "addresses" or c.op == "update")
    assert address.before is not None and address.after is not None
    assert address.before != address.after
    assert verified["reward"] == 1.0
    assert verified["verification"]["trajectory"]["ok"] and "trajectory_mismatch" not in verified
    assert len(verified["step_rewards"]) == len(calls)
    assert sum(verified["step_rewards"]) == pytest.approx(1.0, abs=1e-5)
    assert [r for i, r in enumerate(verified["step_rewards"]) if i + 1 not in writes] == [0.0] * (
        len(calls) - 3
    )
    assert sum(verified["turn_rewards"]) == pytest.approx(1.0, abs=1e-5)
    assert len(verified["turn_rewards"]) == len(calls) + 1  # one call per turn, then the answer


@pytest.mark.parametrize(
    "payload",
    [
        {"output": {"rate": 1e-7, "total": 0.1 + 0.2, "neg": -0.0}},
        {"output": {"rate": 1e-7, "big": 10**30}},  # past 64 bits: rendered by json
        {"output": {"name": "Zoë 東京 \u2028", "nested": [[{"a": None}], True, 5e-324]}},
        {"output": {"when": datetime(2026, 3, 14, 10, 0), "ratio": float("nan")}},
        {"error": {"code": "invalid_arguments", "message": "x" * 20_000}},
    ],
)
def test_step_output_is_the_body_the_route_renders(payload: dict[str, Any]) -> None:
    """Byte for byte, also where json and orjson write a number differently (1e-07 / 1e-7)
    or JSON has no type for a value (a datetime, NaN): the step keeps what was sent."""
    assert body_text(payload).encode() == JSONResponse(payload).body
    args = {"query": "Zoë", "limit": 1e-7, "ids": [10**30]}
    assert json.loads(args_text(args)) == args


async def test_trajectory_check_flags_invented_calls_altered_outputs_and_missing_steps(retail):
    calls = [(c["name"], _args(c)) for c in CANCEL["ground_truth"]]
    items, _ = await _rollout(retail, CANCEL, calls, gold_answer(CANCEL))
    honest = (await retail.post("/verify", json={**CANCEL, "response": {"output": items}})).json()
    assert honest["verification"]["trajectory"]["ok"]
    edited = json.loads(json.dumps(items))
    edited[1]["output"] = json.dumps({"output": {"customer_id": "someone else"}})  # altered
    invented = {"type": "function_call", "call_id": "x", "name": "get_order_details",
                "arguments": json.dumps({"order_id": "#W9999999"})}  # fmt: skip
    edited.insert(-1, invented)
    del edited[2:4]  # the second call (and its output) is left out: an unlisted step
    seeded = await retail.post("/seed_session", json=CANCEL)
    assert seeded.status_code == 200
    for name, args in calls:
        await retail.post(f"/{name}", json=args)
    flagged = (await retail.post("/verify", json={**CANCEL, "response": {"output": edited}})).json()
    trajectory = flagged["verification"]["trajectory"]
    assert flagged["trajectory_mismatch"] is True and not trajectory["ok"]
    assert [c["call_id"] for c in trajectory["not_executed"]] == ["x"]
    assert [c["call_id"] for c in trajectory["output_differs"]] == ["c0"]
    assert [s["step"] for s in trajectory["unlisted_steps"]] == [2]
    # Step rewards still add up: the unlisted step's reward goes to the next matched call.
    assert sum(flagged["step_rewards"]) == pytest.approx(honest["step_rewards"][-1], abs=1e-5)
    assert flagged["reward"] == honest["reward"]


def _collateral_calls() -> list[tuple[str, Any]]:
    """The cancel's gold, then a change nobody asked for (the customer's default address)."""
    customer = CANCEL["seed"]["rows"]["customers"][0]["id"]
    address = {"customer_id": customer, "line1": "1 Elsewhere St", "line2": None,
               "city": "Reno", "state": "NV", "zip": "89501", "country": "USA"}  # fmt: skip
    gold = [(c["name"], _args(c)) for c in CANCEL["ground_truth"]]
    return [*gold, ("update_customer_default_address", address)]


@pytest.mark.parametrize("kind", ["gold", "noop", "collateral"])
async def test_replay_verifies_like_the_live_session(retail, kind, tmp_path):
    calls = {
        "gold": [(c["name"], _args(c)) for c in CANCEL["ground_truth"]],
        "noop": [],
        "collateral": _collateral_calls(),
    }[kind]
    items, _ = await _rollout(retail, CANCEL, calls, gold_answer(CANCEL))
    body = {**CANCEL, "response": {"output": items}}
    live = (await retail.post("/verify", json=body)).json()
    assert {"gold": 1.0, "noop": 0.0}.get(kind, live["reward"]) == live["reward"]
    if kind == "collateral":
        assert live["verification"]["changes"]["collateral"] > 0
    await retail.post("/close_session", json={})
    closed = (await retail.post("/verify", json=body)).json()
    async with httpx.AsyncClient(transport=retail._transport, base_url="http://sg") as bare:
        stateless = (await bare.post("/verify", json=body)).json()
    for replayed in (closed, stateless):
        assert replayed["verified_by"] == "replay"
        assert replayed["reward"] == live["reward"]
        assert replayed["reward_components"] == live["reward_components"]
        assert replayed["verification"]["trajectory"]["ok"], replayed["verification"]
        if "step_rewards" in live:
            assert replayed["step_rewards"] == live["step_rewards"]
            assert replayed["turn_rewards"] == live["turn_rewards"]
    # Offline, a whole file: agreements, then an edited reward is a loud disagreement.
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({**body, "reward": live["reward"]}) + "\n")
    data = ["--data-dir", str(tmp_path / "offline"), "--env", "retail"]
    ok = CliRunner().invoke(cli, ["reverify", str(rollouts), *data, "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["agree"] == 1
    rollouts.write_text(json.dumps({**body, "reward": 0.5}) + "\n")
    bad = CliRunner().invoke(cli, ["reverify", str(rollouts), *data])
    assert bad.exit_code == 1 and "DISAGREEMENT" in bad.output and "1 disagree" in bad.output


async def test_sessions_steps_prints_the_log_with_step_rewards(retail):
    calls = [(c["name"], _args(c)) for c in MULTI["ground_truth"]]
    items, _ = await _rollout(retail, MULTI, calls, gold_answer(MULTI))
    verified = (await retail.post("/verify", json={**MULTI, "response": {"output": items}})).json()
    settings = retail.app.state.protocol.sessions.settings
    args = ["sessions", "steps", verified["session_id"], "--data-dir", str(settings.data_dir)]
    pg = {}
    if settings.database_url:  # the CLI finds the server's sessions where the server keeps them
        pg = {"STATEGYM_DATABASE_URL": settings.database_url,
              "STATEGYM_PG_SCHEMA_PREFIX": settings.pg_schema_prefix}  # fmt: skip
    shown = CliRunner().invoke(cli, [*args, "--rows", "--json"], env=pg)
    assert shown.exit_code == 0, shown.output
    result = json.loads(shown.stdout)
    assert [s["tool"] for s in result["steps"]] == [name for name, _ in calls]
    assert [s["step_reward"] for s in result["steps"]] == verified["step_rewards"]
    assert sum(s["step_reward"] for s in result["steps"]) == pytest.approx(1.0, abs=1e-5)
    assert any(c["before"] != c["after"] for s in result["steps"] for c in s["changes"])
    human = CliRunner().invoke(cli, [*args, "--rows"], env=pg)
    assert human.exit_code == 0 and "update_customer_default_address" in human.output
    assert "->" in human.output
    # Where the row images cannot tell, verify undoes the log: the view's scratch allows it, and
    # keeps nothing of it (the live session verifies as before).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session_verify, "potentials_from_log", lambda *a, **k: None)
        undone = CliRunner().invoke(cli, [*args, "--json"], env=pg)
    assert undone.exit_code == 0, undone.output
    rewards = [s["step_reward"] for s in json.loads(undone.stdout)["steps"]]
    assert rewards == pytest.approx(verified["step_rewards"], abs=1e-6)
    again = (await retail.post("/verify", json={**MULTI, "response": {"output": items}})).json()
    assert again["step_rewards"] == verified["step_rewards"]
