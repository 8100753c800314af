"""Answers are state: the framework's submit_answer / decline_request tools, their table, and how
verify scores them, on a small test environment, both backends, through HTTP in process."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
import pytest
from pydantic import Field

from app.core.tasks import task_from_data
from app.errors import InvalidTask
from app.sdk.answer import ANSWER_TABLE
from app.sdk.environment import Environment, ToolArgs, ToolContext, tool
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import fresh_client, response_object
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

ENV = dataclasses.replace(
    WAREHOUSE,
    decline_reasons={
        "negative_stock": "stock can never go below zero",
        "unknown_item": "the item does not exist",
    },
)
SEED = {
    "now": "2026-02-01T09:30:00",
    "rows": {
        "items": [{"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10}]
    },
}
LOOKUP = {
    "task_id": "wh-lookup",
    "seed": SEED,
    "ground_truth": [
        {"name": "get_item", "arguments": {"sku": "SKU-9001"}},
        {"name": "submit_answer", "arguments": {"answer": "10.00"}},
    ],
    "expected_answer": {"kind": "amount", "value": "10.00"},
}
REFUSAL = {
    "task_id": "wh-refuse",
    "seed": SEED,
    "ground_truth": [
        {"name": "get_item", "arguments": {"sku": "SKU-9001"}},
        {"name": "decline_request", "arguments": {"reason": "negative_stock", "message": "no"}},
    ],
    "expected_decline": "negative_stock",
}
ACTION = {
    "task_id": "wh-action",
    "seed": SEED,
    "ground_truth": [
        {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -2, "reason": "sold"}}
    ],
}
ACTION_AND_ANSWER = {
    **ACTION,
    "task_id": "wh-action-answer",
    "ground_truth": [
        *ACTION["ground_truth"],
        {"name": "submit_answer", "arguments": {"answer": 3}},
    ],
    "expected_answer": {"kind": "number", "value": 3},
}


@pytest.fixture
async def client(tmp_path, backend, request) -> Any:
    from app.server.api import create_app

    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    app = create_app(backend_settings(backend, tmp_path / "data", prefix), ENV)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            yield c


async def rollout(
    shared: httpx.AsyncClient, task: dict, calls: list[tuple[str, dict]], text: str = ""
) -> dict:
    """Seed, call each tool over HTTP, verify with the response those calls make; the verify
    answer, with every tool body under `_outputs`."""
    async with fresh_client(shared) as c:
        assert (await c.post("/seed_session", json=task)).status_code == 200
        items, bodies = [], []
        for i, (name, args) in enumerate(calls):
            r = await c.post(f"/{name}", json=args)
            assert r.status_code == 200, r.text
            bodies.append(r.json())
            items += [
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": name,
                    "arguments": json.dumps(args),
                },
                {"type": "function_call_output", "call_id": f"c{i}", "output": r.text},
            ]
        response = response_object(items, text)
        verified = await c.post("/verify", json={**task, "response": response})
        assert verified.status_code == 200, verified.text
        await c.post("/close_session", json={})
    return {**verified.json(), "_outputs": bodies}


def sums_to_reward(result: dict) -> bool:
    return (
        abs(sum(result["step_rewards"]) - result["reward"]) <= 1e-9
        and abs(sum(result["turn_rewards"]) - result["reward"]) <= 1e-9
    )


def gold_calls(task: dict) -> list[tuple[str, dict]]:
    return [(c["name"], c["arguments"]) for c in task["ground_truth"]]


async def test_every_environment_lists_the_answer_tools_with_strict_schemas(client):
    tools = {t["name"]: t for t in (await client.get("/tools")).json()["tools"]}
    submit, decline = tools["submit_answer"], tools["decline_request"]
    assert submit["strict"] and decline["strict"]
    assert decline["parameters"]["properties"]["reason"]["enum"] == [
        "negative_stock",
        "unknown_item",
    ]
    assert "negative_stock: stock can never go below zero" in decline["description"]
    assert decline["parameters"]["required"] == ["reason", "message", "subject"]
    subject = decline["parameters"]["properties"]["subject"]["anyOf"]
    assert {"type": "null"} in subject  # a subject, a list of them, or none
    assert {"type": "array", "items": {"type": "string"}} in subject


async def test_a_second_submission_is_refused_and_changes_nothing(client):
    async with fresh_client(client) as c:
        await c.post("/seed_session", json=LOOKUP)
        first = (await c.post("/submit_answer", json={"answer": "10.00"})).json()
        assert first == {"output": {"submitted": "10.00"}}
        for name, args in [
            ("submit_answer", {"answer": "11.00"}),
            ("decline_request", {"reason": "unknown_item", "message": "x"}),
        ]:
            again = (await c.post(f"/{name}", json=args)).json()
            assert again["error"]["code"] == "already_submitted"
            assert again["error"]["message"] == "an answer was already submitted"
        verified = await c.post("/verify", json={**LOOKUP, "response": response_object([], "")})
        assert verified.json()["verification"]["answer"]["submitted"] == "10.00"


async def test_bad_answer_arguments_are_readable_tool_errors(client):
    async with fresh_client(client) as c:
        await c.post("/seed_session", json=REFUSAL)
        for name, args in [
            ("decline_request", {"reason": "because", "message": "x"}),
            ("submit_answer", {"answer": {"a": 1}}),
            ("submit_answer", {"answer": [[1]]}),
            ("submit_answer", {}),
            ("submit_answer", {"answer": "x" * 5000}),
        ]:
            body = (await c.post(f"/{name}", json=args)).json()
            assert body["error"]["code"] == "invalid_arguments", (name, args, body)
        # Nothing was written: a valid decline still goes through.
        ok = await c.post("/decline_request", json={"reason": "negative_stock", "message": "no"})
        assert ok.json() == {"output": {"declined": "negative_stock"}}


async def test_a_seed_cannot_write_the_answer_table_and_codes_are_checked(client):
    forged = {**LOOKUP, "seed": {**SEED, "rows": {**SEED["rows"], ANSWER_TABLE: [{"id": 1}]}}}
    r = await client.post("/seed_session", json=forged)
    assert r.status_code == 422 and ANSWER_TABLE in r.text
    r = await client.post("/seed_session", json={**REFUSAL, "expected_decline": "too_late"})
    assert r.status_code == 422 and "negative_stock" in r.text


@pytest.mark.parametrize(
    "row, fix",
    [
        ({"expected_answer": {"kind": "money", "value": "1"}}, "not a kind"),
        ({"expected_answer": {"kind": "amount", "value": "1 or 2"}}, "not one amount"),
        ({"expected_answer": {"kind": "date", "value": "soon"}}, "not one date"),
        ({"expected_answer": {"kind": "id", "value": "A1"}, "expected_decline": "x"}, "not both"),
    ],
)
def test_task_rows_with_bad_answers_are_refused(row, fix):
    with pytest.raises(InvalidTask, match=fix):
        task_from_data(row)


class _Args(ToolArgs):
    answer: str = Field(description="An answer.")


def test_an_environment_cannot_define_a_reserved_tool():
    @tool
    def submit_answer(db: Any, args: _Args, ctx: ToolContext) -> None:
        """Mine."""

    with pytest.raises(ValueError, match="reserved"):
        dataclasses.replace(WAREHOUSE, tools=(*WAREHOUSE.tools, submit_answer))
    assert isinstance(ENV, Environment)


async def test_answer_task_scored_by_value(client):
    cases: list[tuple[Any, float]] = [
        ("10.00", 1.0),
        ("$10", 1.0),
        (10, 1.0),
        ("10.00 USD", 1.0),
        ("10.00 or 11.00", 0.0),
        (["10.00", "11.00"], 0.0),
        ("q11.00q 10.00", 0.0),
        ("10.001", 0.0),
        ("about 10", 0.0),
    ]
    for answer, reward in cases:
        got = await rollout(client, LOOKUP, [("submit_answer", {"answer": answer})])
        assert got["reward"] == reward, (answer, got.get("failure_reason"))
        assert got["reward_components"]["answer_match"] == reward
        assert got["verification"]["answer"]["ok"] is bool(reward)
        if not reward:
            assert got["verification"]["answer"]["reason"], answer
        assert sums_to_reward(got), (answer, got["step_rewards"])
    nothing = await rollout(client, LOOKUP, [("get_item", {"sku": "SKU-9001"})])
    assert nothing["reward"] == 0.0 and "nothing was submitted" in nothing["failure_reason"]
    assert nothing["step_rewards"] == [0.0]  # a read-only step earns nothing
    declined = await rollout(
        client, LOOKUP, [("decline_request", {"reason": "unknown_item", "message": "?"})]
    )
    assert declined["reward"] == 0.0


async def test_refusals_are_exact(client):
    gold = await rollout(client, REFUSAL, gold_calls(REFUSAL))
    assert gold["reward"] == 1.0 and gold["reward_components"]["decline_match"] == 1.0
    assert gold["step_rewards"] == [0.0, 1.0]  # the decline is paid where it is made
    for calls, why in [
        ([("get_item", {"sku": "SKU-9001"})], "nothing was declined"),
        ([("decline_request", {"reason": "unknown_item", "message": "x"})], "declined as"),
        ([("submit_answer", {"answer": "no"})], "answered a request"),
    ]:
        got = await rollout(client, REFUSAL, calls)
        assert got["reward"] == 0.0 and why in got["failure_reason"], got["failure_reason"]
        assert got["verification"]["decline"]["ok"] is False
        assert sums_to_reward(got)
    # Declining AND doing the forbidden thing: the state does not match gold.
    both = await rollout(
        client,
        REFUSAL,
        [
            ("move_stock", {"sku": "SKU-9001", "delta": -1, "reason": "x"}),
            ("decline_request", {"reason": "negative_stock", "message": "no"}),
        ],
    )
    assert both["reward"] == 0.0 and sums_to_reward(both)


TWO_ITEMS = {
    **SEED,
    "rows": {
        "items": [
            *SEED["rows"]["items"],
            {"id": 9002, "sku": "SKU-9002", "name": "Cog", "quantity": 1, "price": 4},
            {"id": 9003, "sku": "SKU-9003", "name": "Nut", "quantity": 9, "price": 1},
        ]
    },
}
ONE_SUBJECT = {**REFUSAL, "task_id": "wh-one", "expected_decline_subject": ["SKU-9001"]}
SEVERAL = {
    "task_id": "wh-several",
    "seed": TWO_ITEMS,
    "ground_truth": [
        {"name": "get_item", "arguments": {"sku": "SKU-9001"}},
        {"name": "get_item", "arguments": {"sku": "SKU-9002"}},
        {
            "name": "decline_request",
            "arguments": {
                "reason": "negative_stock",
                "message": "no",
                "subject": ["SKU-9001", "SKU-9002"],
            },
        },
    ],
    "expected_decline": "negative_stock",
    "expected_decline_records": ["SKU-9001", "SKU-9002"],
}


def _decline(subject: Any) -> list[tuple[str, dict]]:
    return [("decline_request", {"reason": "negative_stock", "message": "no", "subject": subject})]


@pytest.mark.parametrize(
    "subject, paid",
    [
        ("SKU-9001", True),
        ("item #sku-9001", True),  # an honest spelling names the record
        (["SKU-9001"], True),
        ("SKU-9003", False),  # another record of the same world
        ("SKU-9001, SKU-9003", False),  # naming more records than it concerns
        (["SKU-9003", "SKU-9001"], False),
        (None, False),
    ],
)
async def test_a_decline_names_the_one_record_it_concerns(client, subject, paid):
    got = await rollout(client, {**ONE_SUBJECT, "seed": TWO_ITEMS}, _decline(subject))
    assert got["reward"] == (1.0 if paid else 0.0), got["failure_reason"]
    assert got["verification"]["decline"]["submitted_subject"] == subject


@pytest.mark.parametrize(
    "subject, paid",
    [
        (["SKU-9001", "SKU-9002"], True),
        (["sku-9002", "#SKU-9001"], True),  # any order and spelling
        ("SKU-9001 and SKU-9002", True),
        ("SKU-9001", False),  # one of the two refused records
        (["SKU-9001", "SKU-9002", "SKU-9003"], False),  # every record of the world
        (None, False),
    ],
)
async def test_a_refusal_of_several_records_names_each(client, subject, paid):
    got = await rollout(client, SEVERAL, _decline(subject))
    assert got["reward"] == (1.0 if paid else 0.0), got["failure_reason"]
    if not paid:
        assert "records" in got["failure_reason"] or "nothing" in got["failure_reason"]
    gold = await rollout(client, SEVERAL, gold_calls(SEVERAL))
    assert gold["reward"] == 1.0


def test_records_need_a_decline_code():
    row = {**ACTION, "expected_decline_records": ["SKU-9001"]}
    with pytest.raises(InvalidTask, match="need expected_decline"):
        task_from_data(row)


async def test_action_tasks_ignore_answers_and_zero_declines(client):
    gold = await rollout(client, ACTION, gold_calls(ACTION))
    assert gold["reward"] == 1.0 and "decline_match" not in gold["reward_components"]
    chatty = await rollout(
        client, ACTION, [*gold_calls(ACTION), ("submit_answer", {"answer": "done"})]
    )
    assert chatty["reward"] == 1.0 and sums_to_reward(chatty)
    for code in ENV.decline_codes:
        declined = await rollout(
            client, ACTION, [("decline_request", {"reason": code, "message": "no"})]
        )
        assert declined["reward"] == 0.0 and "needed an action" in declined["failure_reason"]
        assert sums_to_reward(declined)
    did_and_declined = await rollout(
        client,
        ACTION,
        [*gold_calls(ACTION), ("decline_request", {"reason": "unknown_item", "message": "no"})],
    )
    assert did_and_declined["reward"] == 0.0 and sums_to_reward(did_and_declined)
    assert did_and_declined["step_rewards"] == [1.0, -1.0]


async def test_step_rewards_add_up_to_the_reward(client):
    """Gold, no-op, wrong answer and partial rollouts: sum(step_rewards) == reward."""
    task = ACTION_AND_ANSWER
    gold = await rollout(client, task, gold_calls(task))
    assert gold["reward"] == 1.0 and gold["step_rewards"] == [0.5, 0.5]
    wrong = await rollout(client, task, [*gold_calls(task)[:1], ("submit_answer", {"answer": 4})])
    assert wrong["reward"] == 0.0 and wrong["step_rewards"] == [0.5, -0.5]
    noop = await rollout(client, task, [("get_item", {"sku": "SKU-9001"})])
    partial = await rollout(
        client,
        task,
        [
            ("get_item", {"sku": "SKU-9001"}),
            ("move_stock", {"sku": "SKU-9001", "delta": -1, "reason": "sold"}),
            ("submit_answer", {"answer": 3}),
            ("get_item", {"sku": "SKU-9001"}),
        ],
    )
    assert partial["step_rewards"][0] == 0.0 and partial["step_rewards"][3] == 0.0
    for got in (gold, wrong, noop, partial):
        assert sums_to_reward(got), got["step_rewards"]
    partial_mode = await rollout(client, {**task, "reward_mode": "partial"}, gold_calls(task)[:1])
    assert partial_mode["reward"] == 0.5 and sums_to_reward(partial_mode)


class _ForgeArgs(ToolArgs):
    answer: str = Field(description="The answer to forge into the answer table.")


@tool
def forge_answer(db: Any, args: _ForgeArgs, ctx: ToolContext) -> dict:
    """Write the answer table directly, as an agent's SQL could (a tool that should not)."""
    from sqlalchemy import text

    db.execute(text("DELETE FROM stategym_answer"))
    db.execute(
        text("INSERT INTO stategym_answer (id, kind, value) VALUES (1, 'answer', :v)"),
        {"v": json.dumps(args.answer)},
    )
    return {"ok": True}


async def test_an_answer_row_written_by_another_tool_is_no_submission(tmp_path, backend, request):
    from app.server.api import create_app

    env = dataclasses.replace(ENV, tools=(*ENV.tools, forge_answer))
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    app = create_app(backend_settings(backend, tmp_path / "data", prefix), env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            # A wrong answer submitted, then replaced behind the tools' back by the right one.
            got = await rollout(
                c,
                LOOKUP,
                [("submit_answer", {"answer": "11.00"}), ("forge_answer", {"answer": "10.00"})],
            )
    assert got["reward"] == 0.0
    assert "written by a tool other than" in got["failure_reason"]
    assert sums_to_reward(got)


async def test_a_text_answer_is_read_by_the_one_tokenizer(client):
    """`answer_via: "text"`: the final message's amounts must be exactly the expected one."""
    task = {**LOOKUP, "task_id": "wh-text", "answer_via": "text", "ground_truth": [
        {"name": "get_item", "arguments": {"sku": "SKU-9001"}}]}  # fmt: skip
    for text, reward in [
        ("The Gear costs $10.00 a unit.", 1.0),
        ("It is 10 dollars.", 1.0),
        ("It costs 10.00 or 11.00.", 0.0),
        ("It costs 10.00 (q11.00q).", 0.0),
        ("I do not know.", 0.0),
    ]:
        got = await rollout(client, task, [("get_item", {"sku": "SKU-9001"})], text)
        assert got["reward"] == reward, (text, got.get("failure_reason"))
        assert sums_to_reward(got)
