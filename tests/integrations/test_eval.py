"""`stategym eval` end to end: a scripted OpenAI-compatible policy server (tests/support/
policy_server.py) reached with the real `openai` client, StateGym in process or served.

What must hold: the gold policy earns 1 and a no-op or deviating one 0 (the reward is verify's);
a model endpoint that fails masks the rollout instead of scoring it; transient failures are
retried; both APIs (Chat Completions, Responses) work; a rerun resumes (no model request for a
finished rollout); the rows are NeMo Gym rollout rows that `stategym report` and `stategym
reverify` read; pass@k / pass^k are the unbiased estimators.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.evaluation.runner import EvalError, ModelSpec, RunSpec, run
from app.evaluation.scores import pass_at, pass_hat, summarize
from app.registry import load_environment
from tests.conftest import REPO
from tests.support import chaos
from tests.support.policy_server import running_policy_server
from tests.support.rollouts import load_tasks

ENV = "retail"


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    rows = load_tasks(load_environment(ENV).tasks_path)
    # A lookup, a write and a refusal at least: the first rows of each kind.
    picked: dict[str, dict[str, Any]] = {}
    for row in rows:
        kind = (
            "decline"
            if row.get("expected_decline")
            else "write"
            if row.get("family") != "lookup"
            else "lookup"
        )
        picked.setdefault(kind, row)
    return list(picked.values())


def _spec(tasks, out: Path, model: str, data_dir: Path, **extra: Any) -> RunSpec:
    base = {"k": 2, "concurrency": 4, "env": load_environment(ENV), "data_dir": data_dir}
    api = extra.pop("api", "chat")
    return RunSpec(
        tasks=tasks,
        out=out,
        model=ModelSpec(base_url=extra.pop("url"), name=model, api=api, retries=2, timeout=30),
        **{**base, **extra},
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_gold_policy_earns_one_and_a_rerun_resumes(tasks, tmp_path, api):
    out = tmp_path / "rollouts.jsonl"
    with running_policy_server(tasks) as server:
        spec = _spec(tasks, out, "gold", tmp_path / "data", url=server.url, api=api)
        rows = asyncio.run(run(spec))
        assert len(rows) == 2 * len(tasks)
        assert all(r["reward"] == 1.0 and not r.get("mask_sample") for r in rows), [
            (r["task_id"], r["reward"], r.get("failure_reason")) for r in rows
        ]
        assert {r["eval_api"] for r in rows} == {api}
        asked = len(server.requests)
        again = asyncio.run(run(spec))
        assert len(server.requests) == asked, "a finished rollout was played again"
        assert sorted(json.dumps(r, sort_keys=True) for r in again) == sorted(
            json.dumps(r, sort_keys=True) for r in rows
        )
    lines = out.read_text().splitlines()
    assert len(lines) == 2 * len(tasks)
    assert {
        (json.loads(line)["task_id"], json.loads(line)["_ng_rollout_index"]) for line in lines
    } == {(t["task_id"], s) for t in tasks for s in range(2)}


@pytest.mark.parametrize("model", ["noop", "deviate"])
def test_a_policy_that_does_not_do_the_task_earns_zero(tasks, tmp_path, model):
    with running_policy_server(tasks) as server:
        spec = _spec(tasks, tmp_path / "r.jsonl", model, tmp_path / "data", url=server.url, k=1)
        rows = asyncio.run(run(spec))
    assert [r["reward"] for r in rows] == [0.0] * len(tasks)
    assert not any(r.get("mask_sample") for r in rows)


def test_a_failing_model_masks_the_rollout_and_a_rerun_plays_it_again(tasks, tmp_path):
    out = tmp_path / "r.jsonl"
    with running_policy_server(tasks) as server:
        rows = asyncio.run(run(_spec(tasks, out, "broken", tmp_path / "d", url=server.url, k=1)))
        assert all(r["mask_sample"] and r["failure_kind"] == "model_error" for r in rows)
        assert "500" in rows[0]["failure_reason"]
        assert summarize(rows, 1)["masked"] == len(tasks)
        asked = len(server.requests)
        asyncio.run(run(_spec(tasks, out, "broken", tmp_path / "d", url=server.url, k=1)))
        assert len(server.requests) > asked, "a masked rollout must be played again on a rerun"


def test_transient_failures_are_retried_and_bad_json_arguments_do_not_reach_the_server(
    tasks, tmp_path
):
    with running_policy_server(tasks) as server:
        flaky = asyncio.run(
            run(_spec(tasks, tmp_path / "f.jsonl", "flaky", tmp_path / "d", url=server.url, k=1))
        )
        bad = asyncio.run(
            run(_spec(tasks, tmp_path / "b.jsonl", "badjson", tmp_path / "d", url=server.url, k=1))
        )
    assert [r["reward"] for r in flaky] == [1.0] * len(tasks)
    assert [r["reward"] for r in bad] == [1.0] * len(tasks)
    outputs = [
        item["output"]
        for item in bad[0]["response"]["output"]
        if item["type"] == "function_call_output"
    ]
    assert "not a JSON object" in outputs[0]


def test_a_file_of_another_model_is_not_resumed(tasks, tmp_path):
    out = tmp_path / "r.jsonl"
    with running_policy_server(tasks) as server:
        asyncio.run(run(_spec(tasks[:1], out, "gold", tmp_path / "d", url=server.url, k=1)))
        with pytest.raises(EvalError, match="holds rollouts of model 'gold'"):
            asyncio.run(run(_spec(tasks[:1], out, "noop", tmp_path / "d", url=server.url, k=1)))


def test_a_torn_last_line_is_dropped_and_replayed(tasks, tmp_path):
    out = tmp_path / "r.jsonl"
    with running_policy_server(tasks) as server:
        asyncio.run(run(_spec(tasks, out, "gold", tmp_path / "d", url=server.url, k=1)))
        lines = out.read_text().splitlines()
        out.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
        rows = asyncio.run(run(_spec(tasks, out, "gold", tmp_path / "d", url=server.url, k=1)))
    assert len(rows) == len(tasks) and all(r["reward"] == 1.0 for r in rows)
    assert all(json.loads(line) for line in out.read_text().splitlines())


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_the_command_against_a_served_stategym_writes_rows_report_and_reverify_read(
    tasks, tmp_path
):
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    served = chaos.start(tmp_path / "served")
    out = tmp_path / "rollouts.jsonl"
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        with running_policy_server(tasks) as server:
            argv = [
                sys.executable, "-m", "app", "eval", "--url", served.url, "--tasks", str(task_file),
                "--model-base-url", server.url, "--model", "gold", "-k", "3", "--out", str(out),
                "--concurrency", "3",
            ]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=300)
    finally:
        chaos.stop_group(served)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pass@3 1.000" in done.stdout and "pass^3 1.000" in done.stdout
    calibration = json.loads(out.with_suffix(".calibration.json").read_text())
    assert {t["task_id"] for t in calibration["tasks"]} == {t["task_id"] for t in tasks}
    assert calibration["mixed_band"] == []
    report = subprocess.run(
        [sys.executable, "-m", "app", "report", str(out), "--json"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["mean_reward"] == 1.0
    reverified = subprocess.run(
        [sys.executable, "-m", "app", "reverify", str(out), "--data-dir", str(tmp_path / "re")],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert reverified.returncode == 0, reverified.stdout + reverified.stderr
    assert f"{3 * len(tasks)} agree, 0 disagree" in reverified.stdout


def test_the_command_in_process_prints_the_figures_and_refuses_what_it_cannot_run(tasks, tmp_path):
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(t) + "\n" for t in tasks[:2]))
    out = tmp_path / "o.jsonl"
    runner = CliRunner()
    with running_policy_server(tasks) as server:
        argv = ["eval", "--tasks", str(task_file), "--model-base-url", server.url,
                "--model", "gold", "--out", str(out), "--data-dir", str(tmp_path)]  # fmt: skip
        neither = runner.invoke(cli, argv)
        assert neither.exit_code == 2 and "--env" in neither.output
        done = runner.invoke(cli, [*argv, "--env", ENV, "-k", "2", "--json"])
    assert done.exit_code == 0, done.output
    figures = json.loads(done.stdout)
    assert figures["pass@2"] == 1.0 and figures["by_env"][ENV]["rollouts"] == 4
    report = runner.invoke(cli, ["report", str(out), "--json"])
    assert report.exit_code == 0 and json.loads(report.stdout)["mean_reward"] == 1.0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    refused = runner.invoke(cli, [*argv[:2], str(empty), *argv[3:], "--env", ENV])
    assert refused.exit_code == 1 and "no tasks" in refused.output


def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators():
    assert pass_at(4, 0, 1) == 0.0 and pass_at(4, 4, 4) == 1.0
    assert pass_at(4, 1, 1) == pytest.approx(0.25)
    assert pass_at(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_hat(4, 2, 2) == pytest.approx(1 / 6)  # C(2,2)/C(4,2)
    assert pass_hat(4, 3, 1) == pytest.approx(0.75)
    rows = [
        {"task_id": "a", "reward": 1.0, "env": "e", "family": "f", "difficulty": 1},
        {"task_id": "a", "reward": 0.0, "env": "e", "family": "f", "difficulty": 1},
        {"task_id": "b", "reward": 1.0, "env": "e", "family": "g", "difficulty": 2},
        {"task_id": "b", "reward": 1.0, "env": "e", "family": "g", "difficulty": 2},
        {"task_id": "c", "reward": 0.0, "mask_sample": True},
    ]
    summary = summarize(rows, 2)
    assert summary["masked"] == 1 and summary["tasks"] == 2
    assert summary["pass@1"] == 0.75 and summary["pass^2"] == 0.5 and summary["pass@2"] == 1.0
    assert summary["calibration"]["mixed_band"] == ["a"]
    assert summary["by_family"]["f"]["success"] == 0.5


def _conversational() -> dict[str, Any]:
    """retail-020 (cancel a pending order) with a user who must confirm the cancel first."""
    from tests.support.explorer_runs import CANCEL, PENDING

    proposal = f"I will cancel order {PENDING}. Do you confirm?"
    return {
        **CANCEL,
        "task_id": "retail-020-talk",
        "user": {
            "goal": f"Cancel order {PENDING}.",
            "changes": [
                {
                    "tools": ["cancel_pending_order"],
                    "identifiers": [PENDING],
                    "yes": "Yes, cancel it.",
                    "correction": f"No: {PENDING}.",
                }
            ],
            "unclear": "I want an order cancelled.",
        },
        "ground_truth": [
            {"name": "message_user", "arguments": {"text": proposal}},
            *CANCEL["ground_truth"],
        ],
    }


@pytest.mark.parametrize("user", ["scripted", "faithful"])
def test_a_conversational_task_with_the_scripted_or_an_llm_user(tmp_path, user):
    from tests.support.user_model_server import running_user_model

    task = _conversational()
    with running_policy_server([task]) as server, running_user_model() as (user_url, _seen):
        extra: dict[str, Any] = {"k": 1}
        if user != "scripted":
            extra["user_model"] = ModelSpec(base_url=user_url, name=user, timeout=5)
        rows = asyncio.run(
            run(
                _spec(
                    [task], tmp_path / "out.jsonl", "gold", tmp_path / "d", url=server.url, **extra
                )
            )
        )
        silent = asyncio.run(
            run(
                _spec(
                    [task], tmp_path / "deviate.jsonl", "deviate", tmp_path / "d2", url=server.url
                )
            )
        )
    (row,) = rows
    assert row["reward"] == 1.0, row.get("failure_reason")
    talk = row["verification"]["conversation"]
    assert talk["simulator"] == (["scripted"] if user == "scripted" else ["llm:faithful"])
    assert talk["changes_confirmed"] == 1
    assert silent[0]["reward"] == 0.0
