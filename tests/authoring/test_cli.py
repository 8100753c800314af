"""The CLI's own behaviour: clear errors, prepare, envs."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from app.cli.main import cli
from tests.conftest import ENV_NAMES, REPO


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_weak_secret_refuses_to_start_with_a_clear_message(tmp_path):
    result = _run("serve", "--data-dir", str(tmp_path), env={"STATEGYM_SECRET_KEY": "hunter2"})
    assert result.returncode == 2
    assert "too weak" in result.stderr and "Traceback" not in result.stderr


def test_unknown_environment_is_a_clear_error(tmp_path):
    result = _run("serve", "--env", "casino", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "unknown environment 'casino'" in result.stderr and "Traceback" not in result.stderr


def test_prepare_builds_the_template_and_envs_lists_them(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["prepare", "--env", "retail", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "templates" / "retail").glob("*.sqlite"))
    listing = runner.invoke(cli, ["envs"])
    for name in ENV_NAMES:
        assert name in listing.output
