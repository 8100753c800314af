"""A wheel of this project carries what its environments need: each shipped environment's tasks
and migration branch are package data, found through importlib.resources wherever it installs.

How (the simplest way that is robust and bounded, ~15 s): `pip wheel --no-deps
--no-build-isolation` of a copy of the sources the wheel is built from (pyproject.toml,
README.md, app/, envs/; a copy, so no stale `build/` of the checkout can leak into it), the
wheel unzipped into a folder (what `pip install` of a pure-Python wheel lays out), then
`python -S` with PYTHONPATH set to ONLY that folder and a view of the project virtualenv's
site-packages without StateGym's own editable install (its `.pth`, finder and dist-info left
out). `-S` skips site-packages and their `.pth` files, so neither this checkout nor the editable
install can answer for the wheel; the dependencies come from the view, nothing is downloaded.

Not in the wheel yet: Alembic's script folder and the control database's branch (`migrations/`,
`alembic.ini` of the checkout), which `app/storage/migrations.py` opens before any branch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from app.registry import load_environment
from tests.conftest import REPO

SHIPPED = ("airline", "ledger", "retail", "sql", "workplace")
# What the wheel is built from (setuptools reads nothing else of the checkout).
SOURCES = ("pyproject.toml", "README.md", "app", "envs")

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
