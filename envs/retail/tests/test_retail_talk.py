"""Retail's conversational families (envs/retail/taskgen/talk.py): the customer tells what the
request leaves out only when asked, corrects a proposal of the look-alike, changes their mind
once; the gold asks before it acts, and acting without asking earns nothing. Built through the
real generator, played through the real server and `tasks check`."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.core.conversation import UserScript, reply_to
from app.sdk.taskgen import own_world
from app.server.api import create_app
from app.settings import Settings
from envs.retail import ENVIRONMENT
from envs.retail.taskgen import NAMES, PLAN, build_task
from tests.conftest import TEST_SECRET
from tests.support.rollouts import run_rollout

TALK = ("talk_cancel", "talk_return", "talk_switch")
FAMILIES = {fn.__name__: fn for fn, _ in PLAN}
ORDER = re.compile(r"#W\d+")


def story(name: str, k: int, n: int) -> dict[str, Any]:
    """Story n of family `name`, variant k, in its own world (as every generated draw is)."""
    names = list(NAMES)
    random.Random(n).shuffle(names)
    with own_world(random.Random(f"world/{name}/{k}/{n}")):
        return build_task(1, FAMILIES[name], k, random.Random(f"talk/{name}/{k}/{n}"), names)


@cache
def stories() -> dict[tuple[str, int, int], dict[str, Any]]:
    """Eight draws of each variant of each family, built on first use (not at collection)."""
    return {(name, k, n): story(name, k, n) for name in TALK for k in (0, 1) for n in range(8)}


def acting() -> list[dict[str, Any]]:
    return [t for t in stories().values() if "expected_decline" not in t]


def declining() -> list[dict[str, Any]]:
    return [t for t in stories().values() if "expected_decline" in t]


def _script(task: dict[str, Any]) -> UserScript:
    return UserScript.model_validate(task["user"])


def _talk(task: dict[str, Any]) -> list[Any]:
    """The scripted user's turns for the gold's messages, in order."""
    turns: list[Any] = []
    for c in task["ground_truth"]:
        if c["name"] == "message_user":
            turns.append(reply_to(_script(task), turns, c["arguments"]["text"]))
    return turns


def test_every_talk_family_is_planned_and_both_acts_and_declines() -> None:
    for name in TALK:
        assert name in FAMILIES
        outcomes: Counter[str | None] = Counter(
            t.get("expected_decline") for (f, _k, _n), t in stories().items() if f == name
        )
        declined = sum(v for code, v in outcomes.items() if code is not None)
        assert 3 <= declined <= 13 and outcomes[None] >= 3, (name, outcomes)
        assert len(outcomes) >= 3, (name, outcomes)  # acting + at least two rules


def test_the_request_leaves_out_what_the_customer_tells_when_asked() -> None:
    for t in acting():
        if t["family"] == "talk_switch":
            continue
        request = t["responses_create_params"]["input"][-1]["content"]
        script = _script(t)
        target = script.changes[-1].identifiers[0]
        assert target not in request, t["task_id"]
        assert not ORDER.search(script.unclear), script.unclear
        turns = _talk(t)
        assert "fact" in [turn.act for turn in turns], t["task_id"]
        # What the customer tells is needed: the request alone does not say which order.
        assert all(f.reply not in request for f in script.facts)


def test_the_gold_asks_proposes_with_the_ids_and_acts_on_the_last_change_only() -> None:
    for t in acting():
        turns = _talk(t)
        script = _script(t)
        acts = [turn.act for turn in turns]
        assert acts[-1] == "confirm" and turns[-1].stage == len(script.changes), acts
        if t["family"] == "talk_switch":
            assert acts == ["change_of_mind", "confirm"], acts
            old, new = script.changes
            assert old.change_of_mind and set(new.wrong) <= set(old.identifiers)
            writes = [c for c in t["ground_truth"] if c["name"] in new.tools]
            assert len(writes) == 1 and old.identifiers[-1] not in json.dumps(writes)
        last = [c for c in t["ground_truth"] if c["name"] == "message_user"][-1]
        assert "proceed?" in last["arguments"]["text"] or "correct?" in last["arguments"]["text"]


def test_a_proposal_naming_the_look_alike_gets_the_correction() -> None:
    tried = 0
    for t in acting():
        script = _script(t)
        change = script.changes[-1]
        if not change.wrong:
            continue
        messages = [
            c["arguments"]["text"] for c in t["ground_truth"] if c["name"] == "message_user"
        ]
        # The id telling the change from its look-alike is its last (an order, a card).
        wrong_proposal = messages[-1].replace(change.identifiers[-1], change.wrong[0])
        turns: list[Any] = []
        for text in messages[:-1]:
            turns.append(reply_to(script, turns, text))
        turn = reply_to(script, turns, wrong_proposal)
        assert (turn.act, turn.confirms, turn.reply) == ("correct", (), change.correction)
        tried += 1
    assert tried >= 6


def test_declining_twins_need_no_confirmation_and_name_the_order() -> None:
    for t in declining():
        script = _script(t)
        assert script.changes == [] and script.done != script.unclear
        decline = t["ground_truth"][-1]
        assert decline["name"] == "decline_request"
        assert decline["arguments"]["subject"] in t["expected_decline_subject"]
        assert ORDER.fullmatch(decline["arguments"]["subject"])


@pytest.fixture
async def client(tmp_path: Path) -> Any:
    app = create_app(Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET), ENVIRONMENT)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            yield c


def _few() -> list[dict[str, Any]]:
    """Two acting and one declining story per family."""
    picked: list[dict[str, Any]] = []
    for name in TALK:
        picked += [t for t in acting() if t["family"] == name][:2]
        picked += [t for t in declining() if t["family"] == name][:1]
    return picked


async def test_gold_earns_1_nothing_0_and_acting_without_asking_0(client) -> None:
    for t in _few():
        gold = t["ground_truth"]
        result = await run_rollout(client, t, gold, "Done.")
        assert result["reward"] == 1.0, (t["task_id"], result.get("failure_reason"))
        nothing = await run_rollout(client, t, [], "")
        assert nothing["reward"] == 0.0, t["task_id"]
        if "expected_decline" in t:
            continue
        silent = [c for c in gold if c["name"] != "message_user"]
        result = await run_rollout(client, t, silent, "Done.")
        assert result["reward"] == 0.0, t["task_id"]
        assert result["verification"]["conversation"]["unconfirmed_writes"], t["task_id"]


async def test_the_served_user_corrects_the_look_alike_and_a_write_after_it_scores_0(
    client,
) -> None:
    t = next(x for x in acting() if x["family"] == "talk_return")
    change = _script(t).changes[0]
    messages = [c for c in t["ground_truth"] if c["name"] == "message_user"]
    wrong = messages[-1]["arguments"]["text"].replace(change.identifiers[0], change.wrong[0])
    write = t["ground_truth"][-1]
    calls = [*t["ground_truth"][:-2], {"name": "message_user", "arguments": {"text": wrong}}, write]
    result = await run_rollout(client, t, calls, "Done.")
    assert result["reward"] == 0.0
    assert result["verification"]["conversation"]["unconfirmed_writes"]


@pytest.mark.slow
def test_tasks_check_passes_on_a_generated_conversational_set(tmp_path: Path) -> None:
    out = tmp_path / "talk.jsonl"
    families = [a for name in TALK for a in ("--families", name)]
    args = ["--env", "retail", "--count", "12", "--seed", "3", "--jobs", "1", *families]
    made = CliRunner().invoke(cli, ["tasks", "generate", *args, str(out)])
    assert made.exit_code == 0, made.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["family"] for r in rows} == set(TALK) and all(r.get("user") for r in rows)
    checked = CliRunner().invoke(
        cli, ["tasks", "check", "--env", "retail", "--data-dir", str(tmp_path / "d"), str(out)]
    )
    assert checked.exit_code == 0, checked.output
    assert "all 12 tasks OK" in checked.output
