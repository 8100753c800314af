"""Conversational workplace tasks (taskgen/talk.py), generated as training draws them and scored
by the replay verifier: the gold earns 1, doing nothing 0, the gold without its messages to the
user (acting without asking) 0; the scripted user corrects a proposal of a look-alike and
changes their mind once; the twins go both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.cli.reverify import _Envs, reverify_row
from app.core.conversation import UserScript, reply_to
from app.taskgen.conversation import CONVERSATION_RULE
from app.taskgen.draw import choices, draw
from app.taskgen.registry import load_generator
from envs.workplace.policy import POLICY

GEN = load_generator("workplace")
FAMILIES = ["talk_deal_amount", "talk_task_pick", "talk_reassign_mind"]


def _draws(family: str, n: int, seed: int = 11) -> list[dict[str, Any]]:
    pool = choices(GEN, "train", [family])
    return [t for i in range(n) if (t := draw(GEN, "train", seed, i, pool).task) is not None]


def _response(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "output": [
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": c["name"],
                "arguments": json.dumps(c["arguments"]),
            }
            for i, c in enumerate(calls)
        ]
    }


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> _Envs:
    return _Envs(tmp_path_factory.mktemp("talk"), "workplace")


@pytest.mark.parametrize("family", FAMILIES)
def test_conversational_tasks_pay_the_gold_and_not_acting_without_asking(
    family: str, envs: _Envs
) -> None:
    tasks = _draws(family, 8)
    assert len(tasks) >= 6
    assert {bool(t.get("expected_decline")) for t in tasks} == {True, False}, "twins both ways"
    for t in tasks:

        def score(calls: list[dict[str, Any]], t: dict[str, Any] = t) -> float:
            return float(reverify_row(envs, {**t, "response": _response(calls)}, 20)["reward"])

        gold = t["ground_truth"]
        assert t["user"] and sum(c["name"] == "message_user" for c in gold) >= 1
        system = t["responses_create_params"]["input"][0]["content"]
        assert system == f"{POLICY}\n\n{CONVERSATION_RULE}"
        assert score(gold) == 1.0, t["task_id"]
        assert score([]) == 0.0, t["task_id"]
        if not t.get("expected_decline"):
            assert t["kind"] == "write"
            silent = [c for c in gold if c["name"] != "message_user"]
            assert score(silent) == 0.0, t["task_id"]
            # Asking, then acting without the proposal the user says yes to: 0 as well.
            last = max(i for i, c in enumerate(gold) if c["name"] == "message_user")
            assert score(gold[:last] + gold[last + 1 :]) == 0.0, t["task_id"]
        else:
            assert t["kind"] == "refusal" and gold[-1]["arguments"]["subject"]


def _messages(t: dict[str, Any]) -> list[str]:
    return [c["arguments"]["text"] for c in t["ground_truth"] if c["name"] == "message_user"]


@pytest.mark.parametrize("family", ["talk_deal_amount", "talk_task_pick"])
def test_the_user_tells_facts_only_when_asked_and_corrects_a_look_alike(family: str) -> None:
    for t in _draws(family, 6)[:4]:
        script = UserScript.model_validate(t["user"])
        change = script.changes[0]
        assert change.wrong
        opening = reply_to(script, [], "Hello, how can I help you today?")
        assert opening.act == "unclear"
        assert not any(f.value in opening.reply for f in script.facts)
        asked = reply_to(script, [], _messages(t)[0])
        assert asked.act == "fact" and script.facts[0].value in asked.reply
        right = _messages(t)[-1] if not t.get("expected_decline") else None
        if right is None:
            continue
        wrong = right.replace(change.identifiers[0], change.wrong[0])
        corrected = reply_to(script, [asked], wrong)
        assert (corrected.act, corrected.confirms) == ("correct", ())
        assert reply_to(script, [asked], right).confirms == tuple(change.tools)


def test_the_user_changes_their_mind_once() -> None:
    for t in _draws("talk_reassign_mind", 6)[:4]:
        script = UserScript.model_validate(t["user"])
        first, *rest = _messages(t)
        mind = reply_to(script, [], first)
        assert (mind.act, mind.confirms, mind.stage) == ("change_of_mind", (), 1)
        again = reply_to(script, [mind], first)
        assert again.act == "correct"
        if rest:
            assert reply_to(script, [mind], rest[0]).confirms == ("reassign_task",)


@pytest.mark.slow
def test_a_generated_set_passes_tasks_check(tmp_path: Path) -> None:
    out = tmp_path / "talk.jsonl"
    args = ["tasks", "generate", "--env", "workplace", "--count", "9", "--seed", "7"]
    args += ["--jobs", "1", *[x for f in FAMILIES for x in ("--families", f)], str(out)]
    runner = CliRunner()
    made = runner.invoke(cli, args)
    assert made.exit_code == 0, made.output
    checked = runner.invoke(cli, ["tasks", "check", str(out)])
    assert checked.exit_code == 0, checked.output
    assert "all 9 tasks OK" in " ".join(checked.output.split())
