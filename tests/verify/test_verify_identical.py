"""Verify results stay byte for byte what they were: every shipped task's gold, no-op, partial
and wrong rollouts, verified twice (per-task caches warm, other tasks' entries in between), as
stored, and replayed after close, give the recorded JSON (rewards, components, evidence, step
and turn rewards, failure reasons).

The digests in `tests/golden/verify_digests.json` were recorded before verify's work was cut
(change units counted once, per-task caches); see `tests/support/verify_record.py` for what is
recorded and how to diff two full records. A change that means to alter verify re-blesses the
file and says so in its commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.registry import environment_names
from tests.support.verify_record import REPO, digests, record_env

GOLDEN = REPO / "tests" / "golden" / "verify_digests.json"


@pytest.mark.parametrize("env_name", environment_names())
def test_verify_results_match_the_recorded_ones(env_name: str, tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    assert env_name in golden, (
        f"no recorded verify for {env_name}: python -m tests.support.verify_record "
        f"--env {env_name} --digests tests/golden/{GOLDEN.name}"
    )
    recorded = golden[env_name]
    now = digests(record_env(env_name, tmp_path))
    assert sorted(now) == sorted(recorded)
    differences = [
        f"{task_id}: {key}"
        for task_id, expected in sorted(recorded.items())
        for key in sorted(set(expected) | set(now[task_id]))
        if expected.get(key) != now[task_id].get(key)
    ]
    assert not differences, differences[:20]
