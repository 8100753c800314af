"""Refactors keep behaviour byte for byte: every shipped task's gold replay (twice, so refusals
run too) gives the recorded tool outputs and the recorded final database, table by table.

The digests in `tests/golden/replay_digests.json` were recorded before the environments' ORM and
Core twins were merged into one implementation per rule; see
`tests/support/replay_record.py` for what is recorded and how to diff two full records. A change
that means to alter behaviour re-blesses the file and says so in its commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.registry import environment_names
from tests.support.replay_record import REPO, digests, record_env

GOLDEN = REPO / "tests" / "golden" / "replay_digests.json"


@pytest.mark.parametrize("env_name", environment_names())
def test_gold_replays_match_the_recorded_outputs_and_states(env_name: str, tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    assert env_name in golden, (
        f"no recorded replay for {env_name}: python -m tests.support.replay_record "
        f"--env {env_name} --digests tests/golden/{GOLDEN.name}"
    )
    recorded = golden[env_name]
    now = {task_id: digests(r) for task_id, r in record_env(env_name, tmp_path).items()}
    assert sorted(now) == sorted(recorded)
    differences = []
    for task_id, expected in recorded.items():
        got = now[task_id]
        for i, (a, b) in enumerate(zip(expected["outputs"], got["outputs"], strict=True)):
            if a != b:
                differences.append(f"{task_id}: output of call {i}")
        for table in sorted(set(expected["state"]) | set(got["state"])):
            if table.startswith("_stategym_") or table == "alembic_version":
                continue  # the platform's own (meta, change tracking, step log with durations,
                # the schema revision a new migration moves)
            if table == "stategym_answer" and table not in expected["state"]:
                continue  # recorded before the answer table existed: nothing to compare
            if expected["state"].get(table) != got["state"].get(table):
                differences.append(f"{task_id}: table {table}")
    assert not differences, differences[:20]
