"""Every shipped task, through the HTTP tools: the gold solution earns 1.0, doing nothing 0.0.

Also: every task row offers exactly the tools the server lists. Runs for every registered
environment (in process; `test_e2e_server.py` drives a real server). One app per (backend,
environment) serves all of that environment's tasks, as a real server would: starting one per task
cost more than the rollouts themselves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from app.registry import ENVIRONMENTS, load_environment
from app.server.api import create_app
from tests.conftest import (
    BACKENDS,
    ENV_NAMES,
    PORTABLE_ENVS,
    backend_settings,
    drop_pg_schemas,
    new_pg_prefix,
    pg_unavailable_reason,
)
from tests.support.rollouts import gold_answer, load_tasks, run_rollout

SQLITE_SAMPLE = 3
PG_SAMPLE = 16


def _task_params() -> list:
    params = []
    for backend in BACKENDS:
        for env in ENV_NAMES:
            path = load_environment(env).tasks_path
            if not path.exists() or (backend != "sqlite" and env not in PORTABLE_ENVS):
                continue
            for n, task in enumerate(load_tasks(path)):
                # SQLite ids stay as they were, so `-k` selections keep working.
                suffix = "" if backend == "sqlite" else f"@{backend}"
                ident = f"{env}:{task['task_id']}{suffix}"
                # `make test` runs every SAMPLE-th task of each file (files are ordered by family
                # and difficulty, so the sample spans both), `make test-slow` the rest: every
                # shipped task's gold and no-op are verified in `make test` anyway, against
                # their recorded digests (test_verify_identical.py, test_replay_identical.py).
                # PostgreSQL costs ~1 s a task (a schema clone per seed): a sparser sample.
                sampled = n % (SQLITE_SAMPLE if backend == "sqlite" else PG_SAMPLE) == 0
                marks = () if sampled else (pytest.mark.slow,)
                params.append(pytest.param(backend, env, task, id=ident, marks=marks))
    return params


TASKS = _task_params()
# The module's async tests share one event loop, so the apps below can outlive a test.
pytestmark = pytest.mark.asyncio(loop_scope="module")
ClientFor = Callable[[str, str], Awaitable[httpx.AsyncClient]]


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


@asynccontextmanager
async def _client(
    env_name: str, data_dir: Path, backend: str = "sqlite", prefix: str = ""
) -> AsyncIterator[httpx.AsyncClient]:
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


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client_for(shared_data_dir: Path, shared_pg_prefix: str) -> AsyncIterator[ClientFor]:
    """`await client_for(backend, env)`: that environment's app, started on first use."""
    async with AsyncExitStack() as stack:
        started: dict[tuple[str, str], httpx.AsyncClient] = {}

        async def get(backend: str, env_name: str) -> httpx.AsyncClient:
            if (backend, env_name) not in started:
                client = _client(env_name, shared_data_dir, backend, shared_pg_prefix)
                started[backend, env_name] = await stack.enter_async_context(client)
            return started[backend, env_name]

        yield get


def test_every_registered_environment_ships_tasks():
    for env in ENVIRONMENTS:
        path = load_environment(env).tasks_path
        assert path.exists(), f"{env} has no {path}"
        assert len(load_tasks(path)) >= 40, env


@pytest.mark.parametrize("env_name", sorted(ENVIRONMENTS))
async def test_task_rows_offer_exactly_the_server_tools(env_name, client_for):
    client = await client_for("sqlite", env_name)
    served = (await client.get("/tools")).json()["tools"]
    for task in load_tasks(load_environment(env_name).tasks_path):
        assert task["responses_create_params"]["tools"] == served, task["task_id"]


@pytest.mark.parametrize("backend, env_name, task", TASKS)
async def test_gold_solution_earns_one_and_noop_earns_zero(backend, env_name, task, client_for):
    client = await client_for(backend, env_name)
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
