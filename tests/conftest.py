"""Shared fixtures: settings on a fresh data dir, in-process clients, a real uvicorn server."""

from __future__ import annotations

import functools
import gc
import importlib.util
import inspect
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.registry import environment_names, load_environment
from app.runtime.collector import SERVER_GC_THRESHOLDS
from app.sdk.environment import Environment
from app.server.api import create_app
from app.settings import Settings
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

REPO = Path(__file__).resolve().parent.parent
# Shared data of the suite and the docs that belongs to no one environment (fixtures/README.md).
FIXTURES = REPO / "fixtures"
# Every registered environment, and those that run on every backend (all but the SQLite-only
# sql console): tests take their lists from the registry, never by hand.
ENV_NAMES = tuple(environment_names())
PORTABLE_ENVS = tuple(n for n in ENV_NAMES if "sqlite" not in load_environment(n).requires)
# Step rewards' wall-clock backstop (500 ms by default) makes a verify's answer depend on how
# loaded the machine is: on a busy CI runner a PostgreSQL verify passed it and left its step
# rewards out. Tests get a minute; tests/verify/test_step_budget.py sets the budget it tests.
os.environ.setdefault("STATEGYM_STEP_REWARD_BUDGET_MS", "60000")
# A test process starts hundreds of servers in process: each would freeze whatever the tests
# before it left alive (app/runtime/collector.py). Servers started by tests keep Python's
# collector; tests/integrations/test_collector.py turns it on where it tests it.
os.environ.setdefault("STATEGYM_GC_SETTLE", "false")
# ... but a worker's heap is a server's: every module, five environments, cached states, all alive
# to the end, which each full collection walked at Python's thresholds (tests/verify: 17 of them,
# ~8% of the worker's CPU). Collected as a server is, without the freeze.
gc.set_threshold(*SERVER_GC_THRESHOLDS)
TEST_SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
# tests/openenv_clients/ drives OpenEnv servers with OpenEnv's own clients: it runs in its own
# virtualenv (make test-openenv), and is not collected where the openenv package is missing.
collect_ignore = [] if importlib.util.find_spec("openenv") else ["openenv_clients"]
# tests/verifiers_taskset/ runs verifiers' own NeMoGymTaskset (make test-verifiers): verifiers
# needs mcp 2.x, StateGym mcp 1.x, so it never shares this virtualenv.
collect_ignore.append("verifiers_taskset")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET)


# --- PostgreSQL backend --------------------------------------------------------------------------
# PostgreSQL cases run when a server answers at STATEGYM_TEST_PG_URL and are skipped otherwise.
# Each test gets its own schema prefix, and every schema it created is dropped afterwards.
PG_URL = os.environ.get("STATEGYM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgres")
_pg_reachable: list[str | None] = []


def pg_unavailable_reason() -> str | None:
    """None when PostgreSQL answers at PG_URL, else why the PostgreSQL cases are skipped."""
    if not _pg_reachable:
        try:
            from sqlalchemy import create_engine

            from app.storage.backend import sync_pg_url

            engine = create_engine(sync_pg_url(PG_URL), connect_args={"connect_timeout": 3})
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            engine.dispose()
            _pg_reachable.append(None)
        except Exception as exc:  # noqa: BLE001 - any failure means "no server to test on"
            _pg_reachable.append(f"no PostgreSQL at STATEGYM_TEST_PG_URL ({PG_URL}): {exc}")
    return _pg_reachable[0]


def new_pg_prefix() -> str:
    import secrets

    return "t" + secrets.token_hex(5)


def drop_pg_schemas(prefix: str) -> int:
    """Drop every schema under `prefix` (one transaction each: a big CASCADE exhausts locks)."""
    from sqlalchemy import create_engine

    from app.storage.backend import sync_pg_url

    engine = create_engine(sync_pg_url(PG_URL))
    try:
        with engine.connect() as conn:
            names = [
                row[0]
                for row in conn.exec_driver_sql(
                    "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                    (prefix + "\\_%",),
                )
            ]
            conn.commit()
            # The step-log function's schema last: dropping it first would cascade to every
            # session's triggers in one transaction.
            for name in sorted(names, key=lambda n: n.endswith("_fn")):
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                conn.commit()
        return len(names)
    finally:
        engine.dispose()


def backend_settings(backend: str, data_dir: Path, prefix: str | None, **extra) -> Settings:
    if backend == "postgres":
        # No schema pool unless a test asks for one: its background clones would load the shared
        # PostgreSQL for every test that seeds (tests/storage/test_pg_schema_pool.py tests the
        # pool).
        extra = {"database_url": PG_URL, "pg_schema_prefix": prefix, "pg_schema_pool": 0, **extra}
    return Settings(data_dir=data_dir, secret_key=TEST_SECRET, **extra)


@pytest.fixture
def pg_prefix() -> Iterator[str]:
    """A fresh schema prefix on a reachable PostgreSQL (skips otherwise); dropped after."""
    reason = pg_unavailable_reason()
    if reason:
        pytest.skip(reason)
    prefix = new_pg_prefix()
    yield prefix
    drop_pg_schemas(prefix)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Parametrises a test over both storage backends (PostgreSQL skipped when unreachable)."""
    reason = pg_unavailable_reason() if request.param == "postgres" else None
    if reason:
        pytest.skip(reason)
    return request.param


async def _client_for(settings: Settings, env: Environment) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
async def warehouse(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client_for(settings, WAREHOUSE):
        yield client


@pytest.fixture
def client_factory(settings: Settings):
    """Open an in-process client for any environment: `async with client_factory(env) as c`."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def factory(env: Environment, custom: Settings | None = None):
        async for client in _client_for(custom or settings, env):
            yield client

    return factory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(env: str, data_dir: Path, *, workers: int = 1, extra_env: dict | None = None):
    """Start `stategym serve` on a free port; returns (process, base_url) once it answers."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "app",
        "serve",
        "--env",
        env,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--workers",
        str(workers),
    ]
    environ = {
        **os.environ,
        "STATEGYM_SECRET_KEY": TEST_SECRET,
        "STATEGYM_LOG_LEVEL": "warning",
        "STATEGYM_GC_SETTLE": "true",  # a process of its own: the collector as served
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"server exited early ({proc.returncode}):\n{out}")
        try:
            if httpx.get(base_url + "/health", timeout=1).status_code == 200:
                return proc, base_url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not answer /health within 60 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start real servers: `url = live_server("retail")`; all are stopped after the test."""
    procs = []

    def start(env: str, workers: int = 1, data_dir: Path | None = None, **extra_env: str) -> str:
        proc, url = start_server(
            env, data_dir or tmp_path / "live", workers=workers, extra_env=extra_env
        )
        procs.append(proc)
        return url

    yield start
    for proc in procs:
        stop_server(proc)


@pytest.fixture
def depot(monkeypatch: pytest.MonkeyPatch) -> Iterator[Environment]:
    """The `depot` test environment (tests/support/depot_env.py) registered for the test, with
    its migration branch (tests/support/migrations/depot/) beside the shipped ones: the real
    Alembic machinery upgrades and downgrades its databases."""
    from alembic.script import ScriptDirectory

    from app import registry
    from app.storage import migrations
    from app.storage.postgres import migrate as pg_migrate
    from tests.support import depot_env

    monkeypatch.setitem(registry.ENVIRONMENTS, "depot", depot_env.__name__)
    config = migrations.alembic_config()
    locations = [str(p) for p in [*migrations.version_locations(), depot_env.MIGRATIONS]]
    config.set_main_option("version_locations", " ".join(locations))
    script = ScriptDirectory.from_config(config)
    for module in (migrations, pg_migrate):  # both hold the script directory's getter
        monkeypatch.setattr(module, "_script", lambda: script)
    migrations.head_revision.cache_clear()
    migrations.branch_revisions.cache_clear()
    yield depot_env.ENVIRONMENT
    migrations.head_revision.cache_clear()
    migrations.branch_revisions.cache_clear()


# PostgreSQL in `make test` is a smoke check: the backend's own contract (test_postgres.py, how
# a call begins, the step function) and a sample of shipped rollouts (test_env_tasks.py).
# Every other PostgreSQL case (the pg_*.py storage modules, inspection, and the PostgreSQL half
# of every module parametrised over both backends) runs in `make test-slow`, which CI runs too:
# the SQLite half proves the same code above the storage interface in `make test`.
POSTGRES_IN_MAKE_TEST = {
    "test_env_tasks.py",
    "test_pg_begin.py",
    "test_pg_step_function.py",
    "test_postgres.py",
}


# A sweep parametrised over the environments runs in `make test` on retail; its copies for the
# other four run in `make test-slow` (CI runs both). A test of one environment's own behaviour
# lives in envs/<name>/tests and runs in `make test` (the sql console's sandbox, refusals, ...).
SLOW_SWEEP_ENVS = re.compile(r"\[.*\b(airline|ledger|workplace|sql)\b")
# ... but `envs check`, the author's contract, runs in `make test` on sql, its cheapest
# environment (retail's is the slow one: tests/taskgen/test_env_contract.py).
CONTRACT_ON_SQL = "test_every_registered_environment_meets_the_contract[sql]"


# The `server` and `postgres` markers (pyproject.toml; `make test-fast` leaves both out) are put
# on by what a test uses, so a new test is marked without anyone remembering to: `server` when
# the test or a fixture it uses starts a real HTTP server (uvicorn in a process or a thread),
# `postgres` when it is a PostgreSQL case (a `postgres` parameter, or the `pg_prefix` fixture or
# PG_URL in its code).
SERVER_STARTERS = re.compile(
    r"\b(start_server|chaos\.start|running_policy_server|running_judge_server|live_server"
    r"|start_browse|start_explorer|_start_shim)\(|\[\"serve\", \"--env\""
)
SERVER_FIXTURES = {"live_server"}
# Modules of slow tests only whose collection alone costs seconds (schemathesis builds its
# coverage cases as it collects): not even imported unless the marker expression selects `slow`.
SLOW_ONLY_MODULES = {"test_hostile_fuzz_slow.py"}
POSTGRES_CODE = re.compile(r"\b(PG_URL|pg_unavailable_reason)\b")


def _sources(item: pytest.Item) -> Iterator[str]:
    """The code of the test function and of every fixture it uses that lives in this repo."""
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)  # pytest's fixture closure of the item
    for defs in info.name2fixturedefs.values() if info is not None else ():
        funcs += [d.func for d in defs]
    for func in funcs:
        source = _source_of(func)
        if source:
            yield source


_SOURCES: dict[object, str] = {}


def _source_of(func: object) -> str:
    if func not in _SOURCES:
        try:
            path = inspect.getsourcefile(func)  # type: ignore[arg-type]
            # This file's own fixtures are judged by name (SERVER_FIXTURES, pg_prefix, the
            # `backend` parameter): their code names PostgreSQL for the SQLite cases too.
            mine = (
                path is not None
                and Path(path).resolve().is_relative_to(REPO)
                and Path(path).resolve() != Path(__file__).resolve()
                and _may_match(path)
            )
            _SOURCES[func] = inspect.getsource(func) if mine else ""  # type: ignore[arg-type]
        except (TypeError, OSError):
            _SOURCES[func] = ""
    return _SOURCES[func]


@functools.cache
def _may_match(path: str) -> bool:
    """Whether the file names a server starter or PostgreSQL at all: most do not, and then no
    function of theirs does (tokenizing each one's source was a second of every collection)."""
    text = Path(path).read_text()
    return bool(SERVER_STARTERS.search(text) or POSTGRES_CODE.search(text))


def _auto_markers(item: pytest.Item) -> None:
    names = set(getattr(item, "fixturenames", ()))
    spec = getattr(item, "callspec", None)
    sources = list(_sources(item))
    if names & SERVER_FIXTURES or any(SERVER_STARTERS.search(s) for s in sources):
        item.add_marker(pytest.mark.server)
    if (
        "pg_prefix" in names
        or (spec is not None and "postgres" in spec.params.values())
        or any(POSTGRES_CODE.search(s) for s in sources)
    ):
        item.add_marker(pytest.mark.postgres)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in SLOW_ONLY_MODULES and not _selects(config, "slow"):
        return True
    return None


def _selects(config: pytest.Config, marker: str) -> bool:
    """Whether `-m` keeps a test that carries only `marker` (no expression keeps every test)."""
    from _pytest.mark.expression import Expression  # what `-m` itself evaluates with

    expression = config.getoption("markexpr")
    if not expression:
        return True

    def carries(name: str, /, **kwargs: str | int | bool | None) -> bool:
        return name == marker and not kwargs

    return Expression.compile(expression).evaluate(carries)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        _auto_markers(item)
        if SLOW_SWEEP_ENVS.search(item.name) and item.name != CONTRACT_ON_SQL:
            item.add_marker(pytest.mark.slow)
            continue
        if item.get_closest_marker("postgres") and item.path.name not in POSTGRES_IN_MAKE_TEST:
            item.add_marker(pytest.mark.slow)
