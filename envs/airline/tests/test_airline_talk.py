"""Airline's conversational families: generated tasks whose gold earns 1, doing nothing 0, the
gold without its messages to the member less than 1, a proposal of the look-alike the member's
correction, a change of mind the other record; and `tasks check` passes a generated set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from app.cli.audit import ReplayScore
from app.core.conversation import Turn, UserScript, reply_to
from app.sdk.user import MESSAGE_USER
from envs.airline import ENVIRONMENT
from envs.airline.taskgen.talk import FAMILIES
from envs.airline.tests.test_airline_worlds import draw

ROOT = Path(__file__).resolve().parents[3]
WRITES = {t.name for t in ENVIRONMENT.tools if not t.read_only and not t.framework}
NAMES = [fn.__name__ for fn in FAMILIES]
# Draws per family: variants 0-2 in turn, both twins among them.
DRAWS = 6
DRAWN = [(name, n) for name in NAMES for n in range(DRAWS)]


@cache
def drawn(family: str) -> list[dict[str, Any]]:
    """The family's draws, built on first use (not at collection, on every xdist worker)."""
    return [draw(family, n, n % 3) for n in range(DRAWS)]


@pytest.fixture(scope="module")
def score(tmp_path_factory: pytest.TempPathFactory) -> ReplayScore:
    """A play's reward as a cookieless /verify gives it: replayed on the task's snapshot."""
    return ReplayScore(ENVIRONMENT, tmp_path_factory.mktemp("talk"), capacity=64)


def acts(task: dict[str, Any]) -> bool:
    return any(c["name"] in WRITES for c in task["ground_truth"])


def play(task: dict[str, Any], messages: list[str]) -> list[Turn]:
    user = UserScript.model_validate(task["user"])
    turns: list[Turn] = []
    for message in messages:
        turns.append(reply_to(user, turns, message))
    return turns


def messages(calls: list[dict[str, Any]]) -> list[str]:
    return [c["arguments"]["text"] for c in calls if c["name"] == MESSAGE_USER]


@pytest.mark.parametrize("family", NAMES)
def test_both_twins_and_a_user_on_every_draw(family: str) -> None:
    tasks = drawn(family)
    assert {acts(t) for t in tasks} == {True, False}, f"{family}: one twin only"
    for t in tasks:
        assert t["user"]["changes"] and t["family"] == family
        system = t["responses_create_params"]["input"][0]["content"]
        assert "message_user" in system and "confirm" in system
        if not acts(t):  # the data forbid it: a decline, no proposal confirmed
            assert t["ground_truth"][-1]["name"] == "decline_request"
            assert all(turn.act != "confirm" for turn in play(t, messages(t["ground_truth"])))


@pytest.mark.parametrize(("family", "n"), DRAWN, ids=[f"{f}-{n}" for f, n in DRAWN])
def test_gold_1_noop_0_and_acting_without_asking_below_1(
    family: str, n: int, score: ReplayScore
) -> None:
    task = drawn(family)[n]
    gold = task["ground_truth"]
    assert score(task, gold) == 1.0
    assert score(task, []) == 0.0
    if acts(task):
        silent = [c for c in gold if c["name"] != MESSAGE_USER]
        assert score(task, silent) == 0.0


def test_the_request_leaves_out_what_the_member_tells_when_asked() -> None:
    for t in drawn("talk_cancel"):
        request = t["responses_create_params"]["input"][-1]["content"]
        user = UserScript.model_validate(t["user"])
        code = user.changes[0].identifiers[0]
        assert code not in request and code not in user.unclear
        (hello,) = play(t, ["Hello, how can I help you today?"])
        assert hello.act == "unclear" and code not in hello.reply
        first = play(t, messages(t["ground_truth"])[:1])[0]
        assert first.act == "fact" and code in first.reply and "reason" in first.reply.lower()


@pytest.mark.parametrize("family", NAMES)
def test_a_proposal_of_the_look_alike_gets_the_correction(family: str, score: ReplayScore) -> None:
    for t in (t for t in drawn(family) if acts(t)):
        user = UserScript.model_validate(t["user"])
        gold = t["ground_truth"]
        said = messages(gold)
        final = user.changes[-1]
        right, wrong = final.identifiers[0], final.wrong[0]
        swapped = [*said[:-1], said[-1].replace(right, wrong)]
        turn = play(t, swapped)[-1]
        assert (turn.act, turn.reply, turn.confirms) == ("correct", final.correction, ())
        # Acting on the right record after the member said no is acting without a yes.
        calls = [_reworded(c, said[-1], swapped[-1]) for c in gold]
        assert score(t, calls) == 0.0


def _reworded(call: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    if call["name"] == MESSAGE_USER and call["arguments"]["text"] == old:
        return {**call, "arguments": {"text": new}}
    return call


def test_a_change_of_mind_moves_the_change_to_the_other_reservation() -> None:
    for t in (t for t in drawn("talk_change_cabin") if acts(t)):
        user = UserScript.model_validate(t["user"])
        first, second = play(t, messages(t["ground_truth"]))
        assert first.act == "change_of_mind" and not first.confirms
        assert second.act == "confirm" and second.confirms == ("change_cabin",)
        (write,) = [c for c in t["ground_truth"] if c["name"] in WRITES]
        assert write["arguments"]["reservation_code"] == user.changes[1].identifiers[0]
        assert user.changes[1].wrong == [user.changes[0].identifiers[0]]


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_tasks_check_passes_a_generated_set_with_them(tmp_path: Path) -> None:
    """The CLI on rows `tasks generate` writes (voices, omissions and all)."""
    out = tmp_path / "talk.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    families = [arg for name in NAMES for arg in ("--families", name)]
    cli = [sys.executable, "-m", "app", "tasks"]
    generate = [*cli, "generate", "--env", "airline", "--count", "9", "--seed", "3", "--jobs", "1"]
    made = subprocess.run(
        [*generate, *families, str(out)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["family"] for r in rows} == set(NAMES) and all(r.get("user") for r in rows)
    checked = subprocess.run(
        [*cli, "check", "--env", "airline", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]


@pytest.mark.parametrize("family", NAMES)
def test_the_shipped_set_holds_both_twins(family: str) -> None:
    """The shipped rows of each conversational family act on some rows (the change made after
    the member's confirmation) and decline on others."""
    rows = [json.loads(line) for line in ENVIRONMENT.tasks_path.read_text().splitlines()]
    shipped = [t for t in rows if t["family"] == family]
    assert {acts(t) for t in shipped} == {True, False}, family
    for t in filter(acts, shipped):
        names = [c["name"] for c in t["ground_truth"]]
        write = next(i for i, name in enumerate(names) if name in WRITES)
        assert names[write - 1] == MESSAGE_USER  # the proposal the member confirms
        assert play(t, messages(t["ground_truth"]))[-1].act == "confirm"
