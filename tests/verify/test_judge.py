"""LLM-as-judge against a scripted judge server on 127.0.0.1: grades, combination, failures
(masked, never cached), retries, concurrency bound, both OpenAI API shapes."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.errors import InvalidTask
from app.verify.judge import Judge, JudgeSettings, apply_judge, parse_grade
from app.verify.result import Evidence, VerifyResult
from tests.support.judge_server import running_judge_server
from tests.support.rollouts import response_object

RUBRIC = "The answer must state the refund of $42.50 and the return code."
ANSWER = "Your refund of $42.50 is on its way; your return code is RC-1001."


@pytest.fixture(scope="module")
def judge_server():
    with running_judge_server() as server:
        yield server


@pytest.fixture
async def make_judge(judge_server):
    judges: list[Judge] = []

    def make(model: str, **overrides) -> Judge:
        values = {
            "url": judge_server.url,
            "model": model,
            "timeout_seconds": 5.0,
            "retries": 0,
            "retry_backoff_seconds": 0.0,
            **overrides,
        }
        judge = Judge(JudgeSettings(**values))
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.aclose()


def _task(**judge) -> dict:
    return {
        "task_id": "t-1",
        "responses_create_params": {
            "input": [
                {"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": "Please return my kettle and tell me the refund."},
            ]
        },
        "judge": {"rubric": RUBRIC, **judge},
    }


def _state_result(reward: float = 1.0) -> VerifyResult:
    return VerifyResult(
        reward=reward, components={"state_match": reward}, evidence=Evidence({"state_diff": {}})
    )


async def _apply(judge: Judge, task: dict, answer: str = ANSWER, reward: float = 1.0) -> dict:
    try:
        result = await apply_judge(
            _state_result(reward), task, response_object([], answer), judge, session_id="sess-42"
        )
        return result.to_payload()
    finally:
        await judge.aclose()


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
async def test_correct_grade_enters_components_in_both_api_shapes(
    api, make_judge, judge_server, monkeypatch
):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-123")
    judge = make_judge("correct", api=api, api_key_env="MY_JUDGE_KEY")
    before = len(judge_server.requests)
    result = await _apply(judge, _task(weight=0.5), reward=0.0)
    assert result["reward_components"]["judge"] == 1.0
    assert result["reward_components"]["state_reward"] == 0.0
    assert result["reward"] == 0.5  # weighted: half state (0), half judge (1)
    assert result["verification"]["judge"]["reason"] == "The answer meets the rubric."
    assert "mask_sample" not in result
    [call] = judge_server.requests[before:]
    assert call["api"] == ("chat" if api == "chat_completions" else "responses")
    assert call["authorization"] == "Bearer sk-test-123"
    prompt = str(call["body"]["messages" if api == "chat_completions" else "input"])
    assert RUBRIC in prompt and ANSWER in prompt and "return my kettle" in prompt


@pytest.mark.parametrize(
    "judge_spec, reward",
    [
        ({"combine": "weighted", "weight": 0.25}, 0.75),
        ({"combine": "min"}, 0.0),
        ({"combine": "gate"}, 0.0),
    ],
)
async def test_wrong_grade_lowers_the_reward_per_combine_mode(judge_spec, reward, make_judge):
    result = await _apply(make_judge("wrong"), _task(**judge_spec))
    assert result["reward_components"]["judge"] == 0.0
    assert result["reward"] == reward
    assert "misses the refund amount" in result["failure_reason"]


async def test_gate_keeps_the_state_reward_when_the_judge_passes(make_judge):
    result = await _apply(make_judge("half", api="responses"), _task(combine="gate", threshold=0.5))
    assert result["reward_components"]["judge"] == 0.5  # a fenced JSON block is accepted
    assert result["reward"] == 1.0


async def test_malformed_output_masks_the_sample_after_retries(make_judge, judge_server):
    before = len(judge_server.calls("malformed"))
    result = await _apply(make_judge("malformed", retries=2), _task())
    assert len(judge_server.calls("malformed")) - before == 3  # first try + 2 retries
    assert result["failure_kind"] == "judge_failed"
    assert result["mask_sample"] is True
    assert result["reward"] == 1.0  # the state-only reward, untouched
    assert "judge" not in result["reward_components"]
    assert "malformed" in result["failure_reason"]


async def test_timeout_masks_the_sample(make_judge):
    result = await _apply(make_judge("slow", timeout_seconds=0.3), _task())
    assert result["failure_kind"] == "judge_failed" and result["mask_sample"] is True
    assert "timeout" in result["failure_reason"]
    assert result["verification"]["judge"]["error"] == "timeout"


async def test_http_500_is_retried_and_401_is_not(make_judge, judge_server):
    before = len(judge_server.calls("error500"))
    failed = await _apply(make_judge("error500", retries=2), _task())
    assert len(judge_server.calls("error500")) - before == 3
    assert failed["mask_sample"] is True and "HTTP 500" in failed["failure_reason"]
    before = len(judge_server.calls("error401"))
    refused = await _apply(make_judge("error401", retries=2), _task())
    assert len(judge_server.calls("error401")) - before == 1
    assert refused["mask_sample"] is True and "HTTP 401" in refused["failure_reason"]


async def test_a_retry_recovers_from_one_failure(make_judge):
    result = await _apply(make_judge("flaky", retries=1), _task(rubric="flaky rubric"))
    assert result["reward_components"]["judge"] == 1.0 and "mask_sample" not in result


async def test_failures_are_never_cached_successes_are(make_judge, judge_server):
    judge = make_judge("malformed")
    before = len(judge_server.calls("malformed"))
    for _ in range(2):
        result = await apply_judge(
            _state_result(), _task(), response_object([], ANSWER), judge, "s"
        )
        assert result.mask_sample is True
    assert len(judge_server.calls("malformed")) - before == 2  # asked again: nothing cached

    judge = make_judge("correct")
    before = len(judge_server.calls("correct"))
    first, again, other = [
        (
            await apply_judge(_state_result(), _task(), response_object([], text), judge, "s")
        ).to_payload()
        for text in ("answer A", "answer A", "answer B")
    ]
    assert len(judge_server.calls("correct")) - before == 2  # A once, B once
    assert first["verification"]["judge"]["cached"] is False
    assert again["verification"]["judge"]["cached"] is True
    assert again["reward"] == first["reward"] and other["reward_components"]["judge"] == 1.0
    await judge.aclose()


async def test_concurrency_is_bounded(make_judge, judge_server):
    judge = make_judge("sleepy", max_concurrency=2, cache_size=0)
    judge_server.max_in_flight = 0
    results = await asyncio.gather(
        *(
            apply_judge(
                _state_result(), _task(), response_object([], f"answer {i}"), judge, f"s{i}"
            )
            for i in range(6)
        )
    )
    await judge.aclose()
    assert [(r.components or {})["judge"] for r in results] == [1.0] * 6
    assert 1 <= judge_server.max_in_flight <= 2


async def test_every_call_is_logged_with_the_session_id(make_judge, caplog):
    caplog.set_level(logging.INFO, logger="stategym.judge")
    await _apply(make_judge("correct"), _task(rubric="log rubric"))
    await _apply(make_judge("error500"), _task(rubric="log rubric"))
    lines = [r.getMessage() for r in caplog.records if r.name == "stategym.judge"]
    assert any("session=sess-42" in m and "score=1.000" in m for m in lines)
    assert any("session=sess-42" in m and "http_error" in m for m in lines)


async def test_tasks_without_a_rubric_are_untouched_and_cost_nothing(make_judge, judge_server):
    before = len(judge_server.requests)
    plain = _state_result(0.0)
    judge = make_judge("correct")
    assert (
        await apply_judge(plain, {"task_id": "x"}, response_object([], ANSWER), judge, "s") is plain
    )
    empty = await _apply(judge, _task(), answer="   ")
    assert empty["reward_components"]["judge"] == 0.0 and empty["reward"] == 0.5
    assert len(judge_server.requests) == before


async def test_no_configured_judge_masks_rubric_tasks():
    result = await _apply(Judge(JudgeSettings(url=None)), _task())
    assert result["failure_kind"] == "judge_failed" and result["mask_sample"] is True


@pytest.mark.parametrize(
    "spec",
    [
        "grade it",
        {"rubric": ""},
        {"rubric": "x", "combine": "max"},
        {"rubric": "x", "weight": 2},
        {"rubric": "x", "threshold": True},
    ],
)
async def test_a_malformed_judge_field_is_an_invalid_task(spec):
    task = {**_task(), "judge": spec}
    judge = Judge(JudgeSettings(url="http://127.0.0.1:9/v1"))
    with pytest.raises(InvalidTask):
        await apply_judge(_state_result(), task, response_object([], ANSWER), judge, "s")
    await judge.aclose()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "8/10",
        "[1]",
        '{"score": "1"}',
        '{"score": 1.5}',
        '{"score": true}',
        '{"reason": "no score"}',
        '{"score": NaN}',
    ],
)
def test_parse_grade_is_strict(text):
    from app.verify.judge import JudgeError

    with pytest.raises(JudgeError):
        parse_grade(text)


def test_judge_settings_come_from_the_environment_and_are_documented(monkeypatch):
    monkeypatch.setenv("STATEGYM_JUDGE_URL", "https://judge.example/v1/")
    monkeypatch.setenv("STATEGYM_JUDGE_API", "responses")
    monkeypatch.setenv("STATEGYM_JUDGE_MAX_CONCURRENCY", "3")
    settings = JudgeSettings()
    assert (settings.url, settings.api, settings.max_concurrency) == (
        "https://judge.example/v1",
        "responses",
        3,
    )
    for name, field in JudgeSettings.model_fields.items():
        assert field.description, name
    with pytest.raises(ValueError):
        JudgeSettings(url="file:///etc/passwd")
    with pytest.raises(ValueError):
        JudgeSettings(api_key_env="NOT A NAME")


def test_every_judge_setting_is_documented_in_the_nemo_gym_page():
    from tests.conftest import REPO

    page = (REPO / "docs" / "nemo_gym.md").read_text()
    for name in JudgeSettings.model_fields:
        assert f"`{name.upper()}`" in page, name
