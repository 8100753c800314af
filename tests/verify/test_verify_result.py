"""The verify result's payload keeps the key order a dict built stage by stage had: failure
fields where they were first set (with the scored evidence, after the step fields, after a
replay's fields when the judge set them), the task mismatch last. Recorded results are hashed
as bytes (tests/verify/test_verify_identical.py), so the order is part of the contract."""

from __future__ import annotations

from app.verify.judge import Judge, JudgeSettings, apply_judge
from app.verify.result import Evidence, VerifyResult
from tests.support.rollouts import response_object

RUBRIC_TASK = {"judge": {"rubric": "names the refund"}}


def _scored(reason: str | None = None) -> VerifyResult:
    result = VerifyResult(reward=0.5, components={"state_match": 0.5}, evidence=Evidence({}))
    if reason:
        result.set_reason(reason, "scored")
    result.step_rewards, result.turn_rewards = [0.5], [0.5]
    return result


def test_a_reason_from_scoring_stays_before_the_step_fields() -> None:
    result = _scored("state differs")
    result.mask("gold_failed", "the reference failed", "verify")
    assert list(result.to_payload()) == [
        "reward",
        "reward_components",
        "verification",
        "failure_reason",
        "step_rewards",
        "turn_rewards",
        "mask_sample",
        "failure_kind",
    ]
    assert result.to_payload()["failure_reason"] == "the reference failed"


def test_a_mask_set_before_any_reason_comes_first() -> None:
    result = _scored()
    result.trajectory_mismatch = True
    result.mask("user_simulator", "the simulator failed", "verify")
    result.add_reason("invariants violated", "verify")
    payload = result.to_payload()
    assert list(payload) == [
        "reward",
        "reward_components",
        "verification",
        "step_rewards",
        "turn_rewards",
        "trajectory_mismatch",
        "mask_sample",
        "failure_kind",
        "failure_reason",
    ]
    assert payload["failure_reason"] == "the simulator failed; invariants violated"


async def test_a_judge_failure_goes_after_the_replay_fields() -> None:
    result = _scored()
    result.verified_by, result.replayed_calls = "replay", 1
    judge = Judge(JudgeSettings(url=None))  # unconfigured: every grade fails
    judged = await apply_judge(result, RUBRIC_TASK, response_object([], "the refund"), judge, "s")
    judged.task_mismatch = ["expected_state"]
    assert list(judged.to_payload()) == [
        "reward",
        "reward_components",
        "verification",
        "step_rewards",
        "turn_rewards",
        "verified_by",
        "replayed_calls",
        "failure_kind",
        "failure_reason",
        "mask_sample",
        "task_mismatch",
    ]
    assert "failure_kind" not in result.to_payload()  # the judge changed a copy


async def test_a_masked_replay_the_judge_grades_gets_its_components_last() -> None:
    result = VerifyResult.masked("replay_budget", "the replay took too long")
    result.verified_by, result.replayed_calls = "replay", 3
    judge = Judge(JudgeSettings(url=None))
    judged = await apply_judge(result, RUBRIC_TASK, response_object([], "the refund"), judge, "s")
    payload = judged.to_payload()
    assert list(payload) == [
        "reward",
        "mask_sample",
        "failure_kind",
        "failure_reason",
        "verified_by",
        "replayed_calls",
        "reward_components",
        "verification",
    ]
    assert payload["failure_kind"] == "judge_failed" and payload["reward_components"] == {}
    assert payload["verification"] == {
        "judge": {
            "error": "not_configured",
            "message": ("no judge configured (STATEGYM_JUDGE_URL unset)"),
        }
    }
