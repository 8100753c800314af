"""Issue 20's lean baselines (bench/lean_server.py), one per environment, over real HTTP.

For every shipped task of every environment, on the lean server's FastAPI app (TestClient: the
same routes, cookie and middleware uvicorn serves): the gold rollout (seed -> every gold call ->
verify -> close) answers without an error and scores 1.0; a rollout that does nothing scores
below 1 on every task whose gold writes. This is what makes the StateGym/lean ratio of
`python -m bench.targets --only rollout` compare like with like.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.registry import load_environment
from app.storage.sqlite.store import Store
from bench.lean_server import COOKIE, ENVS, create_app
from bench.rollout import env_tasks, verify_body
from bench.targets import LEAN_ENVS

WRITE_VERBS = ("insert", "update", "delete", "replace", "with")


def _writes(env_name: str, task: dict[str, Any]) -> bool:
    """Whether the task's gold changes state: a write tool (for sql, a data-changing statement)."""
    env = load_environment(env_name)
    for call in task["ground_truth"]:
        if call["name"] == "run_sql":
            if call["arguments"]["sql"].lstrip().split()[0].lower() in WRITE_VERBS:
                return True
        elif not env.tool_named(call["name"]).read_only:  # type: ignore[union-attr]
            return True
    return False


def _rollout(client: TestClient, task: dict[str, Any], calls: list[dict[str, Any]]) -> float:
    client.cookies.clear()
    seeded = client.post("/seed_session", json=task)
    assert seeded.status_code == 200 and COOKIE in seeded.cookies, seeded.text
    for call in calls:
        reply = client.post(f"/{call['name']}", json=call["arguments"])
        assert reply.status_code == 200, reply.text
        assert "output" in reply.json(), (task["task_id"], call, reply.json())
    verdict = client.post("/verify", json=verify_body(task))
    assert verdict.status_code == 200, verdict.text
    closed = client.post("/close_session", json={})
    assert closed.json() == {"status": "ok", "closed": True}
    return float(verdict.json()["reward"])


def test_every_environment_has_a_lean_server() -> None:
    assert set(LEAN_ENVS) == set(ENVS) == {"retail", "airline", "ledger", "sql", "workplace"}


@pytest.mark.parametrize("env_name", sorted(ENVS))
def test_lean_server_scores_every_gold_rollout(env_name: str, tmp_path: Path) -> None:
    store = Store(tmp_path, load_environment(env_name))
    store.template_image()  # builds the template file the lean server reads its base rows from
    app = create_app(env_name, str(store.template_path), "s" * 48)
    tasks = env_tasks(env_name)
    writing = [t for t in tasks if _writes(env_name, t)]
    with TestClient(app) as client:
        gold = [_rollout(client, t, t["ground_truth"]) for t in tasks]
        noop = [_rollout(client, t, []) for t in writing]
        unsigned = client.post("/verify", json={}, cookies={COOKIE: "forged"})
    assert sum(gold) / len(gold) == 1.0, [t["task_id"] for t, r in zip(tasks, gold) if r != 1]
    assert len(writing) >= len(tasks) // 3, len(writing)  # every env ships writing tasks
    assert all(r < 1.0 for r in noop), [t["task_id"] for t, r in zip(writing, noop) if r >= 1]
    assert unsigned.status_code == 401
