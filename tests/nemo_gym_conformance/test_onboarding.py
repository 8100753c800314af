"""NeMo Gym's onboarding check for resources servers, run on StateGym by Gym's own code.

`gym env test` imports the resources server's entry point and runs its `VERIFIER_FIXTURE`
through `nemo_gym.verifier_fixture.exercise_verifier_fixture`: full, zero, malformed and
determinism cases, each a verify request scored on a fresh server. Here that runner checks our
shim (`integrations/nemo_gym/stategym_resources/app.py`) with the fixture generated from every
environment's `verifier_cases.jsonl` (app/integrations/gym_fixture.py). Also: the shim finds
Gym's modules under 0.7.0's paths and under main's `nemo_gym.server_runtime`.
Runs in `.venv-gym` (`make test-nemo-gym`); skipped where nemo_gym is not installed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nemo_gym", reason="nemo-gym is not installed (make test-nemo-gym)")

from nemo_gym.verifier_fixture import (  # noqa: E402
    VerifierFixtureError,
    exercise_verifier_fixture,
    load_verifier_fixture,
)

from app.integrations.gym_fixture import fixture_cases, render  # noqa: E402
from app.registry import environment_names  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "integrations" / "nemo_gym" / "stategym_resources" / "app.py"


def _shim() -> Any:
    spec = importlib.util.spec_from_file_location("stategym_onboarding_shim", SHIM)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fixture_file(tmp_path_factory) -> Path:
    """Every environment's cases in Gym's format, as `--export` writes them for the shim."""
    rows: list[dict[str, Any]] = []
    for name in environment_names():
        rows += asyncio.run(fixture_cases(name))
    path = tmp_path_factory.mktemp("gym-fixture") / "verifier_fixture.jsonl"
    path.write_text(render(rows))
    return path


def _run(fixture: Any) -> tuple[Any, ...]:
    return asyncio.run(
        exercise_verifier_fixture(fixture, reward_range=(0.0, 1.0), determinism="seeded")
    )


def test_gyms_fixture_runner_passes_every_environment(fixture_file):
    cases = load_verifier_fixture(fixture_file)  # Gym's own validation of the rows
    kinds = {(case.name.split(":")[0], case.kind) for case in cases}
    for env in environment_names():
        for kind in ("full_reward", "zero_reward", "malformed", "determinism"):
            assert (env, kind) in kinds, f"{env} has no {kind} case"
    # An answer task, a refusal task and a hedged answer are among them.
    names = " ".join(case.name for case in cases)
    assert "answer" in names and "decline" in names and "hedg" in names
    fixture = dataclasses.replace(_shim().VERIFIER_FIXTURE, cases_path=fixture_file)
    results = _run(fixture)
    assert len(results) == len(cases)
    determinism = [r for r in results if r.kind == "determinism"]
    assert determinism and all(len(set(r.observed_rewards)) == 1 for r in determinism)


def test_the_runner_fails_a_case_whose_reward_is_wrong(fixture_file, tmp_path):
    rows = [json.loads(line) for line in fixture_file.read_text().splitlines()]
    full = next(row for row in rows if row["kind"] == "full_reward")
    noop = {**full, "name": "noop_claimed_full"}
    noop["request"] = {**full["request"], "response": {**full["request"]["response"]}}
    noop["request"]["response"]["output"] = full["request"]["response"]["output"][-1:]
    bad = tmp_path / "verifier_fixture.jsonl"
    others = {row["kind"]: row for row in rows if row["kind"] != "full_reward"}
    bad.write_text(render([noop, *others.values()]))
    fixture = dataclasses.replace(_shim().VERIFIER_FIXTURE, cases_path=bad)
    with pytest.raises(VerifierFixtureError, match="does not pin the upper endpoint"):
        _run(fixture)


def test_gym_modules_resolve_from_0_7_0_paths():
    base = _shim().gym_module("base_resources_server")
    assert base.__name__ == "nemo_gym.base_resources_server"
    checker = _shim().gym_module("testing.session_conformance")
    assert hasattr(checker, "check_resources_session_contract")


def test_gym_modules_resolve_from_server_runtime_when_gym_has_it(monkeypatch):
    """Gym main moves the server bases to `nemo_gym.server_runtime`: that path wins."""
    import nemo_gym.base_resources_server as real

    runtime = types.ModuleType("nemo_gym.server_runtime")
    runtime.__path__ = []  # a package
    moved = types.ModuleType("nemo_gym.server_runtime.base_resources_server")
    moved.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
    monkeypatch.setitem(sys.modules, "nemo_gym.server_runtime", runtime)
    monkeypatch.setitem(sys.modules, "nemo_gym.server_runtime.base_resources_server", moved)
    found = _shim().gym_module("base_resources_server")
    assert found is moved
    assert found.SimpleResourcesServer is real.SimpleResourcesServer


@pytest.mark.parametrize("env_name", environment_names())
def test_gym_validates_each_environments_catalog_manifest(env_name):
    """`gym env validate stategym_<env>`, Gym's own CLI, from the kit folder: the manifest agrees
    with its config and the datasets it names exist (exported here if missing; gitignored)."""
    import subprocess

    from app.cli.export import export_nemo_gym
    from app.cli.nemo_gym_config import datasets
    from app.registry import load_environment

    kit = REPO / "integrations" / "nemo_gym"
    for dataset in datasets(env_name):
        if not (kit / dataset.jsonl_fpath).exists():
            export_nemo_gym(
                load_environment(env_name), kit / dataset.jsonl_fpath, limit=dataset.limit
            )
    gym = Path(sys.executable).parent / "gym"
    run = subprocess.run(
        [str(gym), "env", "validate", f"stategym_{env_name}"],
        cwd=kit,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"stategym_{env_name}" in run.stdout and "Warning" not in run.stdout + run.stderr
