"""Ledger's conversational families (taskgen/talk.py) through HTTP on a real server: the gold's
conversation earns 1, doing nothing 0, acting without asking 0, a proposal of the look-alike is
corrected; generated sets of them pass `tasks check` (which probes acting without asking)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.core.conversation import Turn, UserScript, reply_to
from app.sdk.seed_builder import own_world
from app.server.api import create_app
from app.settings import Settings
from app.taskgen.driver import Request, generate
from app.taskgen.splits import split_names
from envs.ledger import ENVIRONMENT
from envs.ledger.taskgen import TASKGEN, build_task, talk
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, response_object

FAMILIES = (talk.talk_transfer, talk.talk_fee, talk.talk_change_mind)
WRITES = {t.name for t in ENVIRONMENT.tools if not t.read_only and not t.framework}


@cache
def drawn(family: str) -> tuple[dict[str, Any], ...]:
    """The first draws of a family: at least two the data allows and one it forbids."""
    fn = next(f for f in FAMILIES if f.__name__ == family)
    tasks: list[dict[str, Any]] = []
    for i in range(40):
        rng = random.Random(f"talk/{family}/{i}")
        names = split_names(TASKGEN.names, "train")
        rng.shuffle(names)
        with own_world(random.Random(f"talk/{family}/{i}/world")):
            tasks.append(build_task(1, fn, i % 2, rng, names))
        allowed = [t for t in tasks if "expected_decline" not in t]
        if len(allowed) >= 2 and len(tasks) > len(allowed):
            return (*allowed[:2], next(t for t in tasks if "expected_decline" in t))
    raise AssertionError(f"{family}: 40 draws without both twins")


def every() -> list[dict[str, Any]]:
    return [t for f in FAMILIES for t in drawn(f.__name__)]


def allowed() -> list[dict[str, Any]]:
    return [t for t in every() if "expected_decline" not in t]


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET), ENVIRONMENT)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            yield c


async def rollout(
    shared: httpx.AsyncClient, task: dict[str, Any], calls: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[Any]]:
    """One rollout of `calls`: the verify response and each call's output."""
    async with fresh_client(shared) as c:
        assert (await c.post("/seed_session", json=task)).status_code == 200
        items: list[dict[str, Any]] = []
        outputs: list[Any] = []
        for i, call in enumerate(calls):
            r = await c.post(f"/{call['name']}", json=call["arguments"])
            assert r.status_code == 200, r.text
            outputs.append(r.json().get("output"))
            args = json.dumps(call["arguments"])
            items += [
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": call["name"],
                    "arguments": args,
                },
                {"type": "function_call_output", "call_id": f"c{i}", "output": r.text},
            ]
        body = {**task, "response": response_object(items, "")}
        verified = await c.post("/verify", json=body)
        assert verified.status_code == 200, verified.text
        await c.post("/close_session", json={})
    return verified.json(), outputs


def test_each_family_asks_before_it_acts_and_its_twins_share_the_script() -> None:
    for family in FAMILIES:
        *yes, no = drawn(family.__name__)
        for task in (*yes, no):
            assert task["family"] == family.__name__ and task["user"]["changes"], task["task_id"]
            prompt = task["responses_create_params"]["input"][0]["content"]
            assert "message_user" in prompt and "confirm" in prompt
        for task in yes:
            names = [c["name"] for c in task["ground_truth"]]
            write = next(i for i, n in enumerate(names) if n in WRITES)
            assert names[write - 1] == "message_user" and names.count("message_user") >= 2
        # The forbidden twin reads, then declines: no write, no proposal of what it declines.
        assert not {c["name"] for c in no["ground_truth"]} & WRITES
        assert no["ground_truth"][-1]["name"] == "decline_request"


def test_facts_come_only_when_asked_and_the_request_leaves_them_out() -> None:
    for task in every():
        script = UserScript.model_validate(task["user"])
        request = task["responses_create_params"]["input"][1]["content"]
        hello = reply_to(script, [], "Hello! How can I help you today?")
        assert (hello.act, hello.reply) == ("unclear", script.unclear)
        if task["family"] == "talk_transfer":  # who, which account and how much: all withheld
            assert all(f.value not in request for f in script.facts), request
        for fact in script.facts:
            assert fact.value not in script.unclear, task["task_id"]


async def test_golds_earn_1_and_doing_nothing_0(client: httpx.AsyncClient) -> None:
    for task in every():
        gold, outputs = await rollout(client, task, task["ground_truth"])
        assert gold["reward"] == 1.0, (task["task_id"], gold.get("failure_reason"))
        replies = [
            o["reply"]
            for o, c in zip(outputs, task["ground_truth"], strict=True)
            if c["name"] == "message_user"
        ]
        assert replies and all(r for r in replies)
        nothing, _ = await rollout(client, task, [])
        assert nothing["reward"] == 0.0, task["task_id"]


async def test_acting_without_asking_earns_0(client: httpx.AsyncClient) -> None:
    for task in allowed():
        silent = [c for c in task["ground_truth"] if c["name"] != "message_user"]
        result, _ = await rollout(client, task, silent)
        assert result["reward"] == 0.0, task["task_id"]
        assert result["verification"]["conversation"]["unconfirmed_writes"], task["task_id"]


def _proposal(task: dict[str, Any]) -> int:
    """The index of the gold's last proposal (the message just before its write)."""
    names = [c["name"] for c in task["ground_truth"]]
    return next(i for i, n in enumerate(names) if n in WRITES) - 1


async def test_a_proposal_of_the_look_alike_is_corrected_and_acting_on_it_earns_0(
    client: httpx.AsyncClient,
) -> None:
    for task in allowed():
        script = UserScript.model_validate(task["user"])
        gold = task["ground_truth"]
        at = _proposal(task)
        history: list[Turn] = []
        for c in gold[:at]:
            if c["name"] == "message_user":
                history.append(reply_to(script, history, c["arguments"]["text"]))
        change = script.changes[history[-1].stage if history else 0]
        right, wrong = change.identifiers[0], change.wrong[0]
        text = gold[at]["arguments"]["text"].replace(right, wrong)
        turn = reply_to(script, history, text)
        assert (turn.act, turn.reply, turn.confirms) == ("correct", change.correction, ())
        # Through the server: the correction is the reply, and a write after it earns 0.
        calls = [*gold[:at], {"name": "message_user", "arguments": {"text": text}}, gold[at + 1]]
        result, outputs = await rollout(client, task, calls)
        assert outputs[at] == {"reply": change.correction}
        assert result["reward"] == 0.0, task["task_id"]


def test_a_change_of_mind_is_proposed_then_only_the_new_wish_is_made() -> None:
    for task in allowed():
        if task["family"] != "talk_change_mind":
            continue
        script = UserScript.model_validate(task["user"])
        first, final = script.changes
        turns: list[Turn] = []
        for c in task["ground_truth"]:
            if c["name"] == "message_user":
                turns.append(reply_to(script, turns, c["arguments"]["text"]))
        assert [t.act for t in turns] == ["change_of_mind", "confirm"]
        (write,) = [c for c in task["ground_truth"] if c["name"] in WRITES]
        assert first.change_of_mind is not None
        assert write["arguments"]["from_account"] == final.identifiers[0] in first.change_of_mind
        assert first.identifiers[0] in final.wrong


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_generated_conversations_pass_tasks_check(tmp_path: Path) -> None:
    families = tuple(f.__name__ for f in FAMILIES)
    items = list(generate(Request("ledger", 9, seed=5, families=families), 1))
    tasks: list[dict[str, Any]] = items[:-1]  # type: ignore[assignment]  # the summary is last
    assert len(tasks) == 9 and {t["family"] for t in tasks} == set(families)
    assert {t["kind"] for t in tasks} == {"write", "refusal"}
    path = tmp_path / "talk.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks))
    result = CliRunner().invoke(cli, ["tasks", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"]
