"""Recorded NeMo Gym rollout rows (fixtures/nemo_gym/, both session flows) still score and report
as they did when recorded: a verify without a session replays each row's calls on the task's
snapshot, as `gym eval reverify` does, and must give the recorded reward and failure reason.
Recorded OpenEnv episodes (fixtures/openenv/) play again step for step on the episode core.

A change that moves a recorded reward on purpose records the rows again
(`python -m tests.support.record_rollouts`) and says why in its commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.integrations.episodes import Episode
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import FIXTURES, TEST_SECRET
from tests.support.record_rollouts import TASKS, step_record

FLOWS = ("legacy", "typed")
# What verify adds to the body it echoes, and NeMo Gym's bookkeeping: not part of a request.
ADDED = {"reward", "reward_components", "verification", "failure_reason", "session_id"}
ADDED |= {"step_rewards", "turn_rewards", "mask_sample", "failure_kind", "verified_by"}


def rows_of(flow: str) -> list[dict[str, Any]]:
    path = FIXTURES / "nemo_gym" / f"rollouts_{flow}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("flow", FLOWS)
async def test_recorded_rows_score_the_same_by_replay(flow: str, tmp_path: Path) -> None:
    app = create_app(
        Settings(data_dir=tmp_path, secret_key=TEST_SECRET), load_environment("retail")
    )
    rows = rows_of(flow)
    assert [r["_ng_rollout_index"] for r in rows] == list(range(5))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
            for row in rows:
                body = {k: v for k, v in row.items() if k not in ADDED and not k.startswith("_ng")}
                answer = await client.post("/verify", json=body)
                assert answer.status_code == 200, answer.text
                scored = answer.json()
                assert scored["verified_by"] == "replay"
                assert scored["reward"] == row["reward"], row["_ng_rollout_index"]
                assert scored.get("failure_reason") == row.get("failure_reason")
                assert scored["reward_components"] == row["reward_components"]


@pytest.mark.parametrize("flow", FLOWS)
def test_report_on_recorded_rows(flow: str, tmp_path: Path) -> None:
    path = FIXTURES / "nemo_gym" / f"rollouts_{flow}.jsonl"
    page = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(path), "--json", "--out", str(page)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rollouts"] == 5 and summary["mean_reward"] == pytest.approx(0.4)
    reasons = {r["reason"]: r["count"] for r in summary["failure_reasons"]}
    assert reasons == {"final state differs from gold": 2, "answer": 1}
    assert {g["family"] for g in summary["by_family"]} == {
        "cancel",
        "update_default_address",
        "lookup",
    }
    assert all(f["diff_command"] for f in summary["failed"])  # each row names its session
    html = page.read_text()
    assert all(f["session_id"] in html for f in summary["failed"])


async def test_recorded_openenv_episodes_play_again_step_for_step(tmp_path: Path) -> None:
    episodes = json.loads((FIXTURES / "openenv" / "episodes.json").read_text(encoding="utf-8"))
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
    sessions = SessionManager(settings, load_environment("retail"))
    try:
        for recorded in episodes:
            episode = Episode(sessions)
            await episode.start(TASKS[recorded["task_id"]])
            for step in recorded["steps"]:
                outcome = await episode.call(step["tool"], step["arguments"])
                assert {"arguments": step["arguments"], **step_record(outcome)} == step
            await episode.close()
    finally:
        await sessions.aclose()
    ends = [[s["reward"] for s in e["steps"] if s["done"]] for e in episodes]
    assert ends == [[1.0], [0.0], [0.0]]  # a gold refusal, finish alone, a failed lookup
