"""A wheel of this project carries what its environments need: each shipped environment's tasks,
policy and migration branch are package data, found through importlib.resources wherever it
installs.

How (the simplest way that is robust and bounded, ~15 s): `pip wheel --no-deps
--no-build-isolation` of a copy of the sources the wheel is built from (pyproject.toml,
README.md, app/, envs/; a copy, so no stale `build/` of the checkout can leak into it), the
wheel unzipped into a folder (what `pip install` of a pure-Python wheel lays out), then
`python -S` with PYTHONPATH set to ONLY that folder and a view of the project virtualenv's
site-packages without StateGym's own editable install (its `.pth`, finder and dist-info left
out). `-S` skips site-packages and their `.pth` files, so neither this checkout nor the editable
install can answer for the wheel; the dependencies come from the view, nothing is downloaded.

Alembic's own folder (env.py, script.py.mako, the control database's branch) is the checkout's
top-level `migrations/`, shipped as `app.migrations` (setup.py); the configuration is built in
code (app/storage/migrations.py), so the wheel prepares, migrates and serves without alembic.ini.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from app.registry import load_environment
from app.storage.migrations import branch_revisions, head_revision, revision_of
from tests.conftest import REPO, TEST_SECRET, free_port
from tests.support.rollouts import gold_answer, load_tasks, response_object

SHIPPED = ("airline", "ledger", "retail", "sql", "workplace")
# What the wheel is built from (setuptools reads nothing else of the checkout).
SOURCES = ("pyproject.toml", "setup.py", "README.md", "app", "envs", "migrations")

# Run inside the installed tree: every environment, its tasks and its branch, as JSON.
PROBE = """
import json, sys
from app.registry import environment_names, load_environment
out = {}
for name in environment_names():
    env = load_environment(name)
    rows = [json.loads(l) for l in env.tasks_path.read_text().splitlines() if l.strip()]
    branch = env.migrations_path
    out[name] = {
        "tasks_path": str(env.tasks_path),
        "task_ids": [r["task_id"] for r in rows],
        "migrations_path": str(branch) if branch else None,
        "revisions": sorted(p.name for p in branch.glob("*.py")) if branch else [],
        "policy": env.policy,
    }
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """(the folder the wheel was installed into, the environment that runs only from it)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=skip)
        else:
            shutil.copy2(REPO / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
        + ["-w", str(tmp / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp / "dist").glob("stategym-*.whl")
    site = tmp / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    # The project virtualenv's site-packages minus StateGym itself (the editable install).
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.startswith(("stategym-", "__editable__")) or entry.name.endswith(".pth"):
            continue
        (deps / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(deps)])}
    return site, env


def _python(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-S", *args],
        cwd=cwd,  # not the checkout: its app/ and envs/ must not be importable
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow  # a wheel build and two interpreters on it: ~15 s
def test_the_wheel_lists_the_shipped_environments(installed) -> None:
    site, env = installed
    listed = _python(["-m", "app", "envs"], env, site.parent)
    assert listed.returncode == 0, listed.stderr
    names = {line.split(":")[0].split()[0] for line in listed.stdout.splitlines() if ":" in line}
    assert set(SHIPPED) <= names, listed.stdout


@pytest.mark.slow  # a wheel build and two interpreters on it: ~15 s
def test_the_wheel_carries_each_environments_tasks_and_migration_branch(installed) -> None:
    site, env = installed
    probed = _python(["-c", PROBE], env, site.parent)
    assert probed.returncode == 0, probed.stderr
    found = json.loads(probed.stdout)
    for name in SHIPPED:
        here = load_environment(name)
        assert here.migrations_path is not None
        got = found[name]
        # Inside the installed tree, not this checkout.
        assert Path(got["tasks_path"]).is_relative_to(site), got["tasks_path"]
        assert Path(got["migrations_path"]).is_relative_to(site), got["migrations_path"]
        rows = [json.loads(x) for x in here.tasks_path.read_text().splitlines() if x.strip()]
        assert got["task_ids"] == [r["task_id"] for r in rows], name
        assert got["revisions"] == sorted(p.name for p in here.migrations_path.glob("*.py"))
        assert got["revisions"], f"{name}: no migration branch in the wheel"
        assert got["policy"] == here.policy, f"{name}: the policy (policy.md) in the wheel differs"


def _revision_at(path: Path) -> str | None:
    conn = sqlite3.connect(path)
    try:
        return revision_of(conn)
    finally:
        conn.close()


@pytest.mark.slow  # a wheel build, then prepare and a migration round trip from it: ~20 s
def test_the_wheel_builds_a_template_and_migrates_it(installed, tmp_path: Path) -> None:
    """Building a template runs the migration machinery (the branch heads, a stamp): from the
    wheel alone, with Alembic's folder inside the installed `app` package."""
    site, env = installed
    data = tmp_path / "data"
    where = _python(
        ["-c", "from app.storage.migrations import MIGRATIONS_DIR as d; print(d)"], env, site.parent
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == site / "app" / "migrations"
    prepared = _python(
        ["-m", "app", "prepare", "--env", "retail", "--data-dir", str(data)], env, site.parent
    )
    assert prepared.returncode == 0, prepared.stderr
    [template] = (data / "templates" / "retail").glob("*.sqlite")
    assert _revision_at(template) == head_revision("retail")
    # The wheel's revision scripts run both ways: down one revision, back to the head.
    migrate = ["-m", "app", "migrate"]
    down = _python(
        [*migrate, "downgrade", "retail@-1", "--env", "retail", "--data-dir", str(data)],
        env,
        site.parent,
    )
    assert down.returncode == 0, down.stderr
    assert _revision_at(template) == branch_revisions("retail")[1]
    up = _python(
        [*migrate, "upgrade", "--env", "retail", "--data-dir", str(data)], env, site.parent
    )
    assert up.returncode == 0, up.stderr
    assert _revision_at(template) == head_revision("retail")


def _rollout(base_url: str, task: dict, calls: list[dict]) -> float:
    """Seed, run the calls, verify; one cookie jar per rollout. Returns the reward."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        seeded = client.post("/seed_session", json=task)
        assert seeded.status_code == 200, seeded.text
        outputs = []
        for i, call in enumerate(calls):
            result = client.post(f"/{call['name']}", json=call["arguments"])
            assert result.status_code == 200, result.text
            arguments = json.dumps(call["arguments"])
            outputs += [
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": call["name"],
                    "arguments": arguments,
                },
                {"type": "function_call_output", "call_id": f"c{i}", "output": result.text},
            ]
        answer = gold_answer(task) if calls else "Done."
        body = {**task, "response": response_object(outputs, answer)}
        verified = client.post("/verify", json=body)
        assert verified.status_code == 200, verified.text
        return verified.json()["reward"]


@pytest.mark.slow  # a wheel build, then a server from it and two rollouts: ~20 s
def test_the_wheel_serves_a_rollout(installed, tmp_path: Path) -> None:
    """`serve` from the wheel alone: the control database is created and stamped, the template
    built, and the first shipped retail task scores 1.0 with its reference calls, 0.0 without."""
    site, env = installed
    data, port = tmp_path / "data", free_port()
    task = load_tasks(load_environment("retail").tasks_path)[0]
    serve = ["serve", "--env", "retail", "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "serve.log"  # a file, not a pipe nobody reads until the end
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "app", *serve, "--data-dir", str(data)],
            cwd=site.parent,
            env={**env, "STATEGYM_SECRET_KEY": TEST_SECRET, "STATEGYM_LOG_LEVEL": "warning"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 45
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited ({proc.returncode}):\n{log.read_text()}")
            try:
                if httpx.get(base_url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /health in 45 s"
            time.sleep(0.2)
        assert _rollout(base_url, task, task["ground_truth"]) == 1.0
        assert _rollout(base_url, task, []) == 0.0
    finally:
        proc.kill()
        proc.wait(timeout=15)
    assert _revision_at(data / "control.sqlite") == head_revision("control")
