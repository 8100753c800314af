"""The ecosystem-free episode core behind the OpenEnv server (app/integrations/episodes.py), on a
real SessionManager and real SQLite files: what ends an episode, what it scores, what it closes.
(OpenEnv's own clients drive the same code over its WebSocket in make test-openenv.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.integrations.episodes import Episode, TaskSets, episode_tool_schemas
from app.integrations.rollout import FINISH_TOOL, terminal_tools
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.settings import Settings
from tests.conftest import TEST_SECRET

RETAIL = load_environment("retail")


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionManager]:
    manager = SessionManager(Settings(data_dir=tmp_path, secret_key=TEST_SECRET), RETAIL)
    yield manager
    await manager.aclose()


def status(manager: SessionManager, session_id: str | None) -> str:
    assert session_id is not None
    record = manager.control.get(session_id)
    assert record is not None
    return record.status


def test_terminal_tools_follow_the_environments_tool_list():
    assert terminal_tools(["get_order_details"]) == {FINISH_TOOL}
    both = terminal_tools(["get_order_details", "submit_answer", "decline_request"])
    assert both == {FINISH_TOOL, "submit_answer", "decline_request"}
    names = [s["name"] for s in episode_tool_schemas(RETAIL)]
    assert names == [t.name for t in RETAIL.tools] + [FINISH_TOOL]


def test_task_sets_pick_by_id_index_seed_and_row():
    tasks = TaskSets(RETAIL)
    rows = tasks.rows("test")
    assert tasks.pick(task_id=rows[4]["task_id"]) == rows[4]
    assert tasks.pick(split="test", index=4) == rows[4]
    assert tasks.pick(seed=len(rows) + 4) == rows[4]
    assert tasks.pick(task=rows[2]) == rows[2]
    with pytest.raises(IndexError):
        tasks.pick(split="test", index=len(rows))
    with pytest.raises(Exception, match="no task split 'train'"):
        tasks.rows("train")


async def test_gold_then_finish_scores_one_and_closes(sessions):
    row = TaskSets(RETAIL).rows("test")[10]
    episode = Episode(sessions)
    await episode.start(row)
    *calls, last = row["ground_truth"]
    assert last["name"] == "decline_request"  # a refusal: the answer tools end an episode
    for call in calls:
        step = await episode.call(call["name"], call["arguments"])
        assert not step.done and "error" not in step.result
    end = await episode.call(last["name"], last["arguments"])
    assert end.done and end.reward == 1.0
    assert sum(end.verdict["step_rewards"]) == pytest.approx(1.0)
    assert status(sessions, episode.session_id) == "closed"
    late = await episode.call("list_products", {})
    assert late.error_kind == "execution_error" and "over" in (late.error or "")


async def test_finish_alone_scores_zero_and_a_new_start_closes_the_old_session(sessions):
    rows: list[dict[str, Any]] = TaskSets(RETAIL).rows("test")
    episode = Episode(sessions)
    first = await episode.start(rows[0])
    await episode.start(rows[1])
    assert status(sessions, first) == "closed"
    end = await episode.call(FINISH_TOOL, {})
    assert end.done and end.reward == 0.0


async def test_a_failed_tool_call_is_a_result_and_does_not_end_the_episode(sessions):
    episode = Episode(sessions)
    await episode.start(TaskSets(RETAIL).rows("test")[0])
    bad = await episode.call("get_order_details", {"order_number": "#W0000000"})
    assert "error" in bad.result and not bad.done
    unknown = await episode.call("nope", {})
    assert unknown.error_kind == "tool_not_found"
    await episode.close()
    assert status(sessions, episode.session_id) == "closed"
