"""The judge inside /verify: a rubric task scored by state and a scripted judge on 127.0.0.1."""

from __future__ import annotations

import pytest

from app.verify.judge import Judge, JudgeSettings
from tests.server.test_protocol import TASK
from tests.support.judge_server import running_judge_server
from tests.support.rollouts import response_object

RUBRIC_TASK = {**TASK, "judge": {"rubric": "Says how many gears are left.", "combine": "min"}}


@pytest.fixture(scope="module")
def judge_server():
    with running_judge_server() as server:
        yield server


async def _verify_with(warehouse, judge_server, model: str) -> dict:
    sessions = warehouse.app.state.protocol.sessions
    sessions.judge = Judge(
        JudgeSettings(
            url=judge_server.url,
            model=model,
            timeout_seconds=1.0,
            retries=0,
            retry_backoff_seconds=0.0,
        )
    )
    warehouse.cookies.clear()
    await warehouse.post("/seed_session", json=RUBRIC_TASK)
    await warehouse.post("/move_stock", json={"sku": "SKU-9001", "delta": -2, "reason": "sold"})
    body = {**RUBRIC_TASK, "response": response_object([], "There are 3 left.")}
    result = (await warehouse.post("/verify", json=body)).json()
    await sessions.judge.aclose()
    return result


async def test_judge_grade_enters_the_reward(warehouse, judge_server):
    good = await _verify_with(warehouse, judge_server, "correct")
    assert good["reward_components"]["judge"] == 1.0 and good["reward"] == 1.0
    bad = await _verify_with(warehouse, judge_server, "wrong")
    assert bad["reward_components"]["judge"] == 0.0 and bad["reward"] == 0.0
    record = warehouse.app.state.protocol.sessions.control.get(bad["session_id"])
    assert record.reward == 0.0  # the stored reward includes the judge


async def test_failed_judge_masks_the_sample(warehouse, judge_server):
    result = await _verify_with(warehouse, judge_server, "malformed")
    assert result["failure_kind"] == "judge_failed" and result["mask_sample"] is True
    assert result["failure_reason"]
