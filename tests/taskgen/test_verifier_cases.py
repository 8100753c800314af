"""Every environment's verifier cases (`envs/<env>/verifier_cases.jsonl`), through HTTP in process.

A case names a task of `envs/<env>/tasks.jsonl`, the calls an agent makes ("gold" or a list)
and its final answer ("gold" = "Done. " + expected outputs), and the reward / components it must
get; a malformed case sends `verify_body` to /verify and expects an HTTP status. Optional
`overrides` are merged into the task row (e.g. {"reward_mode": "partial"}). Every case runs twice:
the same input must get the same reward and components.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.registry import ENVIRONMENTS, load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, gold_answer, load_tasks, run_rollout

_OPS = {
    "gt": float.__gt__,
    "gte": float.__ge__,
    "lt": float.__lt__,
    "lte": float.__le__,
    "eq": float.__eq__,
}


def _cases() -> list:
    params = []
    for env in sorted(ENVIRONMENTS):
        # Beside the environment's tasks (an installed plugin's too:
        # tests/authoring/test_plugins.py).
        path = load_environment(env).tasks_path.parent / "verifier_cases.jsonl"
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                case = json.loads(line)
                params.append(pytest.param(env, case, id=f"{env}:{n}:{case.get('case', '?')}"))
    return params


CASES = _cases()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    # Shared across cases: templates, snapshots and gold states are built once per env.
    return tmp_path_factory.mktemp("verifier-cases")


def _tasks(env: str) -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in load_tasks(load_environment(env).tasks_path)}


def _calls(case: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]]:
    calls = task["ground_truth"] if case["calls"] == "gold" else case["calls"]
    return [
        {
            "name": c["name"],
            "arguments": c["arguments"]
            if isinstance(c["arguments"], dict)
            else json.loads(c["arguments"]),
        }
        for c in calls
    ]


def holds(actual: float, expected: Any) -> bool:
    """A number must match (within 1e-6); {"gt": 0, "lt": 1, ...} must all hold."""
    if isinstance(expected, dict):
        return all(_OPS[op](float(actual), float(v)) for op, v in expected.items())
    return abs(float(actual) - float(expected)) <= 1e-6


def check_expectations(case: dict[str, Any], result: dict[str, Any]) -> list[str]:
    expect, wrong = case["expect"], []
    if "reward" in expect and not holds(result["reward"], expect["reward"]):
        wrong.append(f"reward {result['reward']} !~ {expect['reward']}")
    for name, want in expect.get("components", {}).items():
        got = result["reward_components"].get(name)
        if got is None or not holds(got, want):
            wrong.append(f"{name} {got} !~ {want}")
    return wrong


async def _malformed(client: httpx.AsyncClient, task: dict[str, Any], body: Any) -> httpx.Response:
    async with fresh_client(client) as c:
        seeded = await c.post("/seed_session", json=task)
        assert seeded.status_code == 200, seeded.text
        return await c.post(
            "/verify", content=json.dumps(body), headers={"content-type": "application/json"}
        )


@pytest.mark.parametrize("env_name, case", CASES)
async def test_verifier_case(env_name, case, data_dir):
    task = {**_tasks(env_name)[case["task_id"]], **case.get("overrides", {})}
    settings = Settings(data_dir=data_dir / env_name, secret_key=TEST_SECRET)
    app = create_app(settings, load_environment(env_name))
    outcomes = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as client:
            for _ in range(2):
                if "verify_body" in case:
                    r = await _malformed(client, task, case["verify_body"])
                    assert r.status_code == case["expect"]["status"], r.text
                    assert "error" in r.json() and r.json()["error"]["message"]
                    outcomes.append(r.status_code)
                    continue
                answer = gold_answer(task) if case["answer"] == "gold" else case["answer"]
                result = await run_rollout(client, task, _calls(case, task), answer)
                wrong = check_expectations(case, result)
                assert not wrong, f"{wrong}\n" + json.dumps(result.get("verification"))[:3000]
                outcomes.append((result["reward"], result["reward_components"]))
    assert outcomes[0] == outcomes[1], "the same input twice must get the same verdict"


def test_every_case_names_a_shipped_task_and_a_known_kind():
    for param in CASES:
        env, case = param.values
        assert case["task_id"] in _tasks(env), param.id
        assert ("verify_body" in case) != ("calls" in case and "answer" in case), param.id
        assert (
            "status" in case["expect"]
            if "verify_body" in case
            else (set(case["expect"]) <= {"reward", "components"})
        ), param.id


def test_the_expectation_matcher_can_fail():
    case = {"expect": {"reward": 1.0, "components": {"partial_credit": {"gt": 0, "lt": 1}}}}
    good = {"reward": 1.0, "reward_components": {"partial_credit": 0.5}}
    assert check_expectations(case, good) == []
    bad = {"reward": 0.0, "reward_components": {"partial_credit": 1.0}}
    assert len(check_expectations(case, bad)) == 2
