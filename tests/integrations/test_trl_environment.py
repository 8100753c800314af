"""The TRL `environment_factory` class against a real server, driven by TRL's documented rules
(trl 1.16 GRPOTrainer): tools are the public functions of the class, each with a Google-style
docstring; `reset(**row)` seeds; tools answer text; `get_reward()` verifies and closes."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.integrations.trl import bind_tools, environment_class, tool_method
from app.registry import load_environment
from tests.conftest import ENV_NAMES, REPO, start_server, stop_server
from tests.support.rollouts import gold_answer, load_tasks

RETAIL_ROWS = load_tasks(load_environment("retail").tasks_path)


def trl_tools(env: Any) -> dict[str, Any]:
    """What GRPOTrainer offers the model: public functions on the class, less reset/get_reward
    (`inspect.getmembers(type(env), predicate=inspect.isfunction)`, trl/trainer/grpo_trainer.py)."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def open_sessions(data_dir: Path) -> list[str]:
    from app.cli.sessions import inspector
    from app.storage.control import SessionQuery

    with inspector(data_dir) as insp:
        return [r.id for r in insp.query(SessionQuery(limit=10_000)) if r.status != "closed"]


@pytest.fixture(scope="module")
def retail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[type[Any], Path]]:
    """One real retail server for the module (a uvicorn start is the slow part)."""
    data_dir = tmp_path_factory.mktemp("trl")
    proc, url = start_server("retail", data_dir)
    try:
        yield environment_class(url, "RetailEnv"), data_dir
    finally:
        stop_server(proc)


def test_tools_are_the_servers_plus_finish_with_parseable_docstrings(retail):
    cls, _ = retail
    env = cls()
    served = {t["name"]: t for t in load_environment("retail").tool_schemas()}
    tools = trl_tools(env)
    assert set(tools) == {*served, "finish"}
    for name, method in tools.items():
        doc = inspect.getdoc(method)
        assert doc, name
        params = inspect.signature(method).parameters
        if name == "finish":
            assert list(params) == ["message"]
            continue
        schema = served[name]["parameters"]
        assert set(params) == set(schema["properties"]), name
        for pname in params:  # Google style: one `name: description` line under Args:
            assert params[pname].annotation is not inspect.Parameter.empty
            assert re.search(rf"\n    {pname}: \S", doc.split("Args:", 1)[1]), (name, pname)


def test_transformers_reads_every_tool_schema(retail):
    """TRL hands the methods to the chat template, which runs transformers' get_json_schema."""
    transformers_utils = pytest.importorskip("transformers.utils")
    cls, _ = retail
    served = {t["name"]: t["parameters"] for t in load_environment("retail").tool_schemas()}
    for name, method in trl_tools(cls()).items():
        schema = transformers_utils.get_json_schema(method)["function"]
        assert schema["name"] == name
        if name == "finish":
            continue
        assert set(schema["parameters"]["properties"]) == set(served[name]["properties"])
        for pname, pschema in served[name]["properties"].items():
            enum = pschema.get("enum")
            if enum:
                assert schema["parameters"]["properties"][pname]["enum"] == enum


@pytest.mark.parametrize("index", [0, 5, 20])
def test_gold_calls_score_one_and_the_session_is_closed(retail, index):
    cls, data_dir = retail
    row = RETAIL_ROWS[index]
    env = cls()
    prompt = env.reset(**row)
    assert prompt is not None and "Northwind" in prompt  # no `prompt` column: the task's text
    tools = trl_tools(env)
    for call in row["ground_truth"]:
        answer = tools[call["name"]](**call["arguments"])
        assert isinstance(answer, str) and "error" not in json.loads(answer), answer
    tools["finish"](message=gold_answer(row))
    assert env.get_reward() == 1.0
    assert env.verdict is not None and "step_rewards" in env.verdict
    assert open_sessions(data_dir) == []


def test_a_conversational_task_scores_one_through_the_user_tool(retail):
    """The simulated user is a tool method like any other (docs/conversations.md)."""
    cls, _ = retail
    row = next((r for r in RETAIL_ROWS if r.get("user")), None)
    assert row is not None, "the shipped retail set has conversational tasks"
    env = cls()
    env.reset(**row)
    tools = trl_tools(env)
    replies = []
    for call in row["ground_truth"]:
        answer = json.loads(tools[call["name"]](**call["arguments"]))
        assert "error" not in answer, answer
        if call["name"] == "message_user":
            replies.append(answer["output"]["reply"])
    tools["finish"](message=gold_answer(row))
    assert replies and env.get_reward() == 1.0


def test_doing_nothing_scores_zero(retail):
    cls, data_dir = retail
    env = cls()
    row = RETAIL_ROWS[3]
    # A dataset row as TRL passes it: the prompt column plus the task as JSON.
    assert env.reset(prompt=[{"role": "user", "content": "hi"}], task=json.dumps(row)) is None
    assert env.get_reward() == 0.0
    assert open_sessions(data_dir) == []


def test_tool_errors_come_back_as_text_and_reset_closes_the_previous_session(retail):
    cls, data_dir = retail
    env = cls()
    env.reset(**RETAIL_ROWS[1])
    first = open_sessions(data_dir)
    tools = trl_tools(env)
    answer = tools["get_order_details"](order_id="#W0000000")
    assert "error" in json.loads(answer)
    env.reset(**RETAIL_ROWS[2])
    assert len(open_sessions(data_dir)) == 1 and open_sessions(data_dir) != first
    tools["finish"]()
    assert "over" in tools["list_products"]()
    env.get_reward()
    assert open_sessions(data_dir) == []


def test_a_class_serves_one_tool_set(retail):
    cls, _ = retail
    cls()
    airline = load_environment("airline").tool_schemas()
    with pytest.raises(ValueError, match="environment_class"):
        bind_tools(cls, airline)
    fresh = environment_class("http://unused", "AirlineEnv")
    assert bind_tools(fresh, airline) == {t["name"] for t in airline}


def test_tool_names_trl_could_not_call_are_refused():
    for bad in ("reset", "get_reward", "_private", "not-an-identifier"):
        with pytest.raises(ValueError, match="cannot be a TRL tool"):
            tool_method({"name": bad, "description": "x", "parameters": {}})


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_transformers_reads_the_tools_of_every_environment(env_name):
    transformers_utils = pytest.importorskip("transformers.utils")
    for tool in load_environment(env_name).tool_schemas():
        schema = transformers_utils.get_json_schema(tool_method(tool))["function"]
        assert set(schema["parameters"]["properties"]) == set(tool["parameters"]["properties"])


def test_the_example_script_runs_rollouts_as_grpo_trainer_does(retail):
    cls, _ = retail
    environ = {**os.environ, "STATEGYM_URL": cls.url, "PYTHONPATH": str(REPO)}
    script = REPO / "scripts" / "trl_rollouts.py"
    done = subprocess.run(
        [sys.executable, str(script), "--env", "retail", "--limit", "2"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mean reward 1.000 over 2 rollouts" in done.stdout
