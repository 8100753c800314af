"""`openenv validate` (OpenEnv's own command, run in process: one import for all five) passes
on every environment's package under integrations/openenv/."""

from __future__ import annotations

import pytest
from openenv.cli.__main__ import app as openenv_cli
from typer.testing import CliRunner

from tests.conftest import REPO
from tests.openenv_clients.conftest import ENV_NAMES


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_openenv_validate_passes(env_name):
    folder = REPO / "integrations" / "openenv" / env_name
    done = CliRunner().invoke(openenv_cli, ["validate", str(folder)])
    assert done.exit_code == 0, done.output
    assert "PASS  static.manifest" in done.output
    assert "FAIL" not in done.output
