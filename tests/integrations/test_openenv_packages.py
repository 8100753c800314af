"""integrations/openenv/<env>/ (OpenEnv packages) exist for every environment and are what
scripts/gen_openenv_packages.py writes; `openenv validate` runs on them in make test-openenv."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ENV_NAMES, REPO


def test_every_environment_has_a_current_openenv_package():
    script = REPO / "scripts" / "gen_openenv_packages.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for env in ENV_NAMES:
        folder = REPO / "integrations" / "openenv" / env
        assert (folder / "openenv.yaml").is_file() and (folder / "server" / "Dockerfile").is_file()
