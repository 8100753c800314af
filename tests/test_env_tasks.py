"""Every shipped task, through the HTTP tools: the gold solution earns 1.0, doing nothing 0.0.

Also: every task row offers exactly the tools the server lists. Runs for every registered
environment (in process; `test_e2e_server.py` drives a real server).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from app.registry import ENVIRONMENTS, load_environment
from app.server.api import create_app
from tests.conftest import (
    BACKENDS,
    ENV_NAMES,
    PORTABLE_ENVS,
    REPO,
    backend_settings,
    drop_pg_schemas,
    new_pg_prefix,
    pg_unavailable_reason,
)
from tests.support.rollouts import gold_answer, load_tasks, run_rollout


def _task_params() -> list:
    params = []
    for backend in BACKENDS:
        for env in ENV_NAMES:
            path = REPO / "fixtures" / env / "tasks.jsonl"
            if not path.exists() or (backend != "sqlite" and env not in PORTABLE_ENVS):
                continue
            for task in load_tasks(path):
                # SQLite ids stay as they were, so `-k` selections keep working.
                suffix = "" if backend == "sqlite" else f"@{backend}"
                ident = f"{env}:{task['task_id']}{suffix}"
                params.append(pytest.param(backend, env, task, id=ident))
    return params


TASKS = _task_params()


@pytest.fixture(scope="session")
def shared_data_dir(tmp_path_factory) -> Path:
    # One data dir for all task tests: templates and snapshots are built once per env.
    return tmp_path_factory.mktemp("env-tasks")


@pytest.fixture(scope="session")
def shared_pg_prefix():
    """One schema prefix for this run's PostgreSQL task tests (templates built once)."""
    prefix = new_pg_prefix()
    yield prefix
    if not pg_unavailable_reason():
        drop_pg_schemas(prefix)


async def _client(env_name: str, data_dir: Path, backend: str = "sqlite", prefix: str = ""):
    if backend == "postgres":
        if pg_unavailable_reason():
            pytest.skip(pg_unavailable_reason())
        # Closed sessions' schemas go at once: hundreds of them would only bloat the catalog.
        settings = backend_settings(backend, data_dir / "pg", prefix, retention="delete_on_close")
    else:
        settings = backend_settings(backend, data_dir, None)
    app = create_app(settings, load_environment(env_name))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://stategym", timeout=60
        ) as client:
            yield client


def test_every_registered_environment_ships_tasks():
    for env in ENVIRONMENTS:
        path = REPO / "fixtures" / env / "tasks.jsonl"
        assert path.exists(), f"{env} has no {path}"
        assert len(load_tasks(path)) >= 40, env


@pytest.mark.parametrize("env_name", sorted(ENVIRONMENTS))
async def test_task_rows_offer_exactly_the_server_tools(env_name, shared_data_dir):
    async for client in _client(env_name, shared_data_dir):
        served = (await client.get("/tools")).json()["tools"]
    for task in load_tasks(REPO / "fixtures" / env_name / "tasks.jsonl"):
        assert task["responses_create_params"]["tools"] == served, task["task_id"]


@pytest.mark.parametrize("backend, env_name, task", TASKS)
async def test_gold_solution_earns_one_and_noop_earns_zero(
    backend, env_name, task, shared_data_dir, shared_pg_prefix
):
    async for client in _client(env_name, shared_data_dir, backend, shared_pg_prefix):
        calls = [
            {
                "name": c["name"],
                "arguments": c["arguments"]
                if isinstance(c["arguments"], dict)
                else json.loads(c["arguments"]),
            }
            for c in task["ground_truth"]
        ]
        gold = await run_rollout(client, task, calls, gold_answer(task))
        assert gold["reward"] == 1.0, json.dumps(gold.get("verification"), indent=1)[:3000]
        noop = await run_rollout(client, task, [], "")
        assert noop["reward"] == 0.0, task["task_id"]
