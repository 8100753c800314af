"""Real `stategym serve --protocol openenv` servers, one per environment, driven by OpenEnv's own
clients. Runs where the openenv package is installed (`make test-openenv`); the main suite does
not collect this folder (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv", reason="openenv is not installed (make test-openenv)")

from app.registry import environment_names, load_environment  # noqa: E402
from tests.conftest import REPO, TEST_SECRET, free_port  # noqa: E402

ENV_NAMES = tuple(environment_names())
START_TIMEOUT_S = 180  # several servers start at once on two shared cores


@dataclass
class OpenEnvServer:
    env: str
    url: str
    data_dir: Path
    proc: subprocess.Popen[bytes]
    log: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        path = load_environment(self.env).tasks_path
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def live_sessions(self) -> dict[str, str]:
        """{session id: status} of every session of this server that is not closed."""
        from app.cli.sessions import inspector
        from app.storage.control import SessionQuery

        names = {"STATEGYM_DATABASE_URL", "STATEGYM_PG_SCHEMA_PREFIX", *self.extra_env}
        saved = {name: os.environ.pop(name, None) for name in names}
        os.environ.update(self.extra_env)  # the server's backend (SQLite files or PostgreSQL)
        try:
            with inspector(self.data_dir) as insp:
                records = insp.query(SessionQuery(env=self.env, limit=10_000))
        finally:
            for name, value in saved.items():
                os.environ.pop(name, None)
                if value is not None:
                    os.environ[name] = value
        return {r.id: r.status for r in records if r.status != "closed"}


def spawn(env: str, root: Path, extra_env: dict[str, str] | None = None) -> OpenEnvServer:
    """Start a server (it answers once `wait` returns)."""
    port = free_port()
    data_dir = root / env
    log = root / f"{env}.log"
    cmd = [sys.executable, "-m", "app", "serve", "--env", env, "--protocol", "openenv"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)]
    environ = {
        **os.environ,
        "STATEGYM_SECRET_KEY": TEST_SECRET,
        "STATEGYM_LOG_LEVEL": "warning",
    }
    environ.pop("STATEGYM_DATABASE_URL", None)
    environ.update(extra_env or {})
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=environ, stdout=out, stderr=subprocess.STDOUT)
    return OpenEnvServer(env, f"http://127.0.0.1:{port}", data_dir, proc, log, extra_env or {})


def wait(server: OpenEnvServer, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.env} server exited:\n{server.log.read_text()}")
        try:
            if httpx.get(server.url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{server.env} server did not answer /health:\n{server.log.read_text()}")


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, OpenEnvServer]]:
    """One OpenEnv server per environment, started together, stopped at the end."""
    root = tmp_path_factory.mktemp("openenv")
    started = {env: spawn(env, root) for env in ENV_NAMES}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        for server in started.values():
            wait(server, deadline)
        yield started
    finally:
        stop(*started.values())


def stop(*servers: OpenEnvServer) -> None:
    for server in servers:
        server.proc.terminate()
    for server in servers:
        try:
            server.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()
