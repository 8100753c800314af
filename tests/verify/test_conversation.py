"""Conversations: the scripted user's rules, and `message_user` through HTTP on both backends:
replies, the conversation as state, and verify's confirmation rule as a policy would play it."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import httpx
import pytest

from app.core.conversation import UserChange, UserFact, UserScript, reply_to
from app.sdk.compare_spec import CONVERSATION_TABLE, USER_TABLE
from app.sdk.user import MAX_TURNS, NO_USER_REPLY
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import fresh_client, response_object
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

SEED = {
    "now": "2026-02-01T09:30:00",
    "rows": {
        "items": [
            {"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10},
            {"id": 9002, "sku": "SKU-9002", "name": "Gear", "quantity": 8, "price": 12},
        ]
    },
}
SCRIPT = UserScript(
    goal="Remove 2 units of the 10.00 Gear (SKU-9001) from stock: they were sold.",
    facts=[
        UserFact(
            key="sku",
            value="SKU-9001",
            asked_by=["sku", "which gear", "which item"],
            reply="It's the 10.00 one, SKU-9001.",
        )
    ],
    changes=[
        UserChange(
            tools=["move_stock"],
            identifiers=["SKU-9001"],
            wrong=["SKU-9002"],
            yes="Yes, go ahead.",
            correction="No, not that one: the 10.00 Gear, SKU-9001.",
        )
    ],
    unclear="I need two Gears taken off the stock, they were sold.",
)
ASK = "Which gear do you mean? Please give me the SKU."
PROPOSE = "I will remove 2 units of SKU-9001 (reason: sold). Shall I proceed?"
MOVE = ("move_stock", {"sku": "SKU-9001", "delta": -2, "reason": "sold"})
TASK: dict[str, Any] = {
    "task_id": "wh-talk",
    "seed": SEED,
    "user": SCRIPT.model_dump(),
    "ground_truth": [
        {"name": "message_user", "arguments": {"text": ASK}},
        {"name": "message_user", "arguments": {"text": PROPOSE}},
        {"name": MOVE[0], "arguments": MOVE[1]},
    ],
}
MIND = SCRIPT.model_copy(
    update={
        "changes": [
            SCRIPT.changes[0].model_copy(
                update={"change_of_mind": "Hmm, actually make it the other Gear, SKU-9002."}
            ),
            UserChange(
                tools=["move_stock"],
                identifiers=["SKU-9002"],
                wrong=["SKU-9001"],
                yes="Yes, SKU-9002, go ahead.",
                correction="No, I changed my mind: SKU-9002.",
            ),
        ]
    }
)


# ---- the scripted user, as a pure function --------------------------------------------------


def _play(script: UserScript, messages: list[str]) -> list[Any]:
    turns: list[Any] = []
    for message in messages:
        turns.append(reply_to(script, turns, message))
    return turns


def test_the_user_tells_a_fact_only_when_asked_and_confirms_only_its_change() -> None:
    unclear, fact, wrong, right, after = _play(
        SCRIPT,
        [
            "Hello! How can I help?",
            ASK,
            "I will remove 2 units of SKU-9002. Shall I proceed?",
            PROPOSE,
            "Anything else?",
        ],
    )
    assert (unclear.act, unclear.reply) == ("unclear", SCRIPT.unclear)
    assert "SKU-9001" not in unclear.reply
    assert (fact.act, fact.reply) == ("fact", "It's the 10.00 one, SKU-9001.")
    assert (wrong.act, wrong.confirms, wrong.stage) == ("correct", (), 0)
    assert (right.act, right.confirms, right.stage) == ("confirm", ("move_stock",), 1)
    assert after.act == "done"


def test_a_proposal_naming_the_right_record_and_a_look_alike_is_corrected() -> None:
    (turn,) = _play(SCRIPT, ["Remove SKU-9001 or SKU-9002, shall I proceed?"])
    assert turn.act == "correct" and not turn.confirms


def test_naming_the_record_without_asking_is_no_confirmation() -> None:
    (turn,) = _play(SCRIPT, ["I removed 2 units of SKU-9001."])
    assert turn.act == "unclear" and not turn.confirms


def test_the_user_changes_their_mind_once_and_corrects_the_old_wish() -> None:
    first, old, new = _play(
        MIND,
        [PROPOSE, PROPOSE, "So: remove 2 units of SKU-9002 instead. Do you confirm?"],
    )
    assert (first.act, first.confirms, first.stage) == ("change_of_mind", (), 1)
    assert "SKU-9002" in first.reply
    assert (old.act, old.confirms) == ("correct", ())
    assert (new.act, new.confirms, new.stage) == ("confirm", ("move_stock",), 2)


def test_identifiers_match_as_whole_tokens_with_or_without_hash() -> None:
    script = SCRIPT.model_copy(
        update={"changes": [SCRIPT.changes[0].model_copy(update={"identifiers": ["#W123"]})]}
    )
    assert _play(script, ["Cancel order W123, ok? Please confirm."])[0].act == "confirm"
    assert _play(script, ["Cancel order #W1234, please confirm."])[0].act != "confirm"


def test_a_task_row_cannot_seed_the_users_table_itself() -> None:
    from app.core.tasks import task_from_data
    from app.errors import InvalidTask

    forged = {"seed": {"rows": {USER_TABLE: [{"id": 1, "script": "{}"}]}}}
    with pytest.raises(InvalidTask, match="user"):
        task_from_data(forged)
    spec = task_from_data(TASK)
    assert spec.user == SCRIPT and USER_TABLE in spec.seed["rows"]  # type: ignore[index]


# ---- through the server -----------------------------------------------------------------------


@pytest.fixture
async def client(tmp_path, backend, request) -> Any:
    from app.server.api import create_app

    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    app = create_app(backend_settings(backend, tmp_path / "data", prefix), WAREHOUSE)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            yield c


async def _rollout(
    shared: httpx.AsyncClient, task: dict, calls: list[tuple[str, dict]]
) -> tuple[dict, list[dict]]:
    async with fresh_client(shared) as c:
        assert (await c.post("/seed_session", json=task)).status_code == 200, task
        items, bodies = [], []
        for i, (name, args) in enumerate(calls):
            r = await c.post(f"/{name}", json=args)
            assert r.status_code == 200, r.text
            bodies.append(r.json())
            items += [
                {"type": "function_call", "call_id": f"c{i}", "name": name},
                {"type": "function_call_output", "call_id": f"c{i}", "output": r.text},
            ]
            items[-2]["arguments"] = json.dumps(args)
        verified = await c.post("/verify", json={**task, "response": response_object(items, "")})
        assert verified.status_code == 200, verified.text
        await c.post("/close_session", json={})
    return verified.json(), bodies


def _gold(task: dict) -> list[tuple[str, dict]]:
    return [(c["name"], c["arguments"]) for c in task["ground_truth"]]


def _sums(result: dict) -> bool:
    return abs(sum(result["step_rewards"]) - result["reward"]) <= 1e-9


async def test_every_environment_offers_message_user(client):
    tools = {t["name"]: t for t in (await client.get("/tools")).json()["tools"]}
    assert tools["message_user"]["parameters"]["required"] == ["text"]
    assert "confirm" in tools["message_user"]["description"]


async def test_the_gold_conversation_earns_1_and_the_replies_are_its_output(client):
    result, bodies = await _rollout(client, TASK, _gold(TASK))
    assert bodies[0] == {"output": {"reply": "It's the 10.00 one, SKU-9001."}}
    assert bodies[1] == {"output": {"reply": "Yes, go ahead."}}
    assert result["reward"] == 1.0, result.get("failure_reason")
    assert result["reward_components"]["confirmed_ok"] == 1.0
    talk = result["verification"]["conversation"]
    assert (
        talk["turns"] == 2
        and talk["unconfirmed_writes"] == []
        and talk["simulator"] == ["scripted"]
    )
    assert _sums(result)


async def test_acting_without_asking_scores_0_and_names_the_write(client):
    result, _ = await _rollout(client, TASK, [MOVE])
    assert result["reward"] == 0.0
    assert result["reward_components"]["confirmed_ok"] == 0.0
    assert result["verification"]["conversation"]["unconfirmed_writes"] == [
        {"step": 1, "tool": "move_stock"}
    ]
    assert "before the user confirmed" in result["failure_reason"]
    assert _sums(result)


async def test_acting_before_the_yes_or_after_a_no_scores_0(client):
    early, _ = await _rollout(client, TASK, [("message_user", {"text": ASK}), MOVE])
    assert early["reward"] == 0.0
    refused, bodies = await _rollout(
        client,
        TASK,
        [("message_user", {"text": PROPOSE.replace("9001", "9002")}), MOVE],
    )
    assert "not that one" in bodies[0]["output"]["reply"]
    assert refused["reward"] == 0.0


async def test_a_change_of_mind_is_no_confirmation(client):
    task = {**TASK, "user": MIND.model_dump()}
    other = ("move_stock", {"sku": "SKU-9002", "delta": -2, "reason": "sold"})
    task["ground_truth"] = [
        {"name": "message_user", "arguments": {"text": PROPOSE}},
        {"name": "message_user", "arguments": {"text": PROPOSE.replace("9001", "9002")}},
        {"name": other[0], "arguments": other[1]},
    ]
    gold, _ = await _rollout(client, task, _gold(task))
    assert gold["reward"] == 1.0, gold.get("failure_reason")
    stale, bodies = await _rollout(client, task, [("message_user", {"text": PROPOSE}), MOVE])
    assert "actually" in bodies[0]["output"]["reply"].lower()
    assert stale["reward"] == 0.0 and stale["verification"]["conversation"]["unconfirmed_writes"]


async def test_doing_nothing_scores_0(client):
    result, _ = await _rollout(client, TASK, [("message_user", {"text": ASK})])
    assert result["reward"] == 0.0


async def test_a_task_without_a_user_answers_plainly_and_checks_no_confirmation(client):
    plain = {k: v for k, v in TASK.items() if k != "user"}
    plain["ground_truth"] = [{"name": MOVE[0], "arguments": MOVE[1]}]
    result, bodies = await _rollout(client, plain, [("message_user", {"text": PROPOSE}), MOVE])
    assert bodies[0] == {"output": {"reply": NO_USER_REPLY}}
    assert result["reward"] == 1.0 and "conversation" not in result["verification"]


async def test_bad_messages_are_readable_errors_that_change_nothing(client):
    async with fresh_client(client) as c:
        await c.post("/seed_session", json=TASK)
        for args in ({}, {"text": ""}, {"text": 5}, {"text": "x" * 5000}):
            body = (await c.post("/message_user", json=args)).json()
            assert body["error"]["code"] == "invalid_arguments", (args, body)
        first = (await c.post("/message_user", json={"text": ASK})).json()
        assert first == {"output": {"reply": "It's the 10.00 one, SKU-9001."}}


async def test_the_conversation_has_a_budget(client):
    async with fresh_client(client) as c:
        await c.post("/seed_session", json=TASK)
        for _ in range(MAX_TURNS):
            assert "output" in (await c.post("/message_user", json={"text": "hi"})).json()
        over = (await c.post("/message_user", json={"text": "hi"})).json()
        assert over["error"]["code"] == "conversation_limit"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_conversation_is_a_table_of_the_session_database(client, tmp_path):
    async with fresh_client(client) as c:
        seeded = (await c.post("/seed_session", json=TASK)).json()
        await c.post("/message_user", json={"text": ASK})
        await c.post("/message_user", json={"text": PROPOSE})
        sid = seeded.get("session_id") or c.cookies.get("stategym_session")
        store = client._transport.app.state.protocol.sessions.backend.store  # type: ignore[attr-defined]
        path = store.session_path(sid)
    db = sqlite3.connect(path)
    rows = db.execute(
        f"SELECT turn, act, confirms FROM {CONVERSATION_TABLE} ORDER BY turn"
    ).fetchall()
    db.close()
    assert rows == [(1, "fact", "[]"), (2, "confirm", '["move_stock"]')]


# ---- the LLM user -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def user_model() -> Any:
    from tests.support.user_model_server import running_user_model

    with running_user_model() as served:
        yield served


async def _llm_rollout(tmp_path, user_model, model: str, calls: list[tuple[str, dict]]) -> Any:
    from app.server.api import create_app

    url, _seen = user_model
    settings = backend_settings("sqlite", tmp_path / model, None).model_copy(
        update={"user_model_url": url, "user_model": model, "user_model_timeout_s": 1.0}
    )
    app = create_app(settings, WAREHOUSE)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            return await _rollout(c, TASK, calls)


async def test_the_llm_user_speaks_its_own_words_on_the_scripts_structure(tmp_path, user_model):
    result, bodies = await _llm_rollout(tmp_path, user_model, "faithful", _gold(TASK))
    assert bodies[0] == {"output": {"reply": "Sure: SKU-9001."}}
    assert bodies[1] == {"output": {"reply": "Yes, please do that."}}
    assert result["reward"] == 1.0, result.get("failure_reason")
    assert result["verification"]["conversation"]["simulator"] == ["llm:faithful"]
    system = user_model[1][-1]["messages"][0]["content"]
    assert SCRIPT.goal in system and "SKU-9001" in system
    # A wrong proposal gets the script's correction, whatever the model said.
    wrong, bodies = await _llm_rollout(
        tmp_path,
        user_model,
        "faithful",
        [("message_user", {"text": PROPOSE.replace("9001", "9002")}), MOVE],
    )
    assert bodies[0]["output"]["reply"] == SCRIPT.changes[0].correction
    assert wrong["reward"] == 0.0


async def test_a_model_that_does_not_see_a_proposal_confirms_nothing(tmp_path, user_model):
    result, _ = await _llm_rollout(tmp_path, user_model, "stubborn", _gold(TASK))
    assert result["reward"] == 0.0
    assert result["verification"]["conversation"]["unconfirmed_writes"]


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        ("leaky", "stated_a_fact_not_declared"),
        ("quitter", "ended_with_a_change_pending"),
        ("garbage", "malformed"),
        ("broken", "http_error"),
        ("slow", "timeout"),
    ],
)
async def test_a_failing_simulator_masks_the_sample(tmp_path, user_model, model, kind):
    result, bodies = await _llm_rollout(tmp_path, user_model, model, _gold(TASK))
    assert bodies[0] == {"output": {"reply": "(the user did not answer)"}}
    assert result["mask_sample"] is True and result["failure_kind"] == "user_simulator"
    assert result["verification"]["conversation"]["simulator_failures"][0] == kind


# ---- the explorer shows the conversation ---------------------------------------------------------


async def test_the_explorer_shows_the_conversation(tmp_path):
    from app.cli.browse import browse_app, explorer_for
    from app.registry import load_environment
    from app.server.api import create_app
    from tests.support.explorer_runs import CANCEL, PENDING, gold_calls

    task = {
        **CANCEL,
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
    }
    proposal = f"I will cancel order {PENDING}. Do you confirm?"
    settings = backend_settings("sqlite", tmp_path / "data", None)
    app = create_app(settings, load_environment("retail"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as c:
            result, _ = await _rollout(
                c, task, [("message_user", {"text": proposal}), *gold_calls(CANCEL)]
            )
    assert result["reward"] == 1.0, result.get("failure_reason")
    with explorer_for(settings) as (x, _ds):
        transport = httpx.ASGITransport(app=browse_app(x, None, settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            page = await c.get(f"/rollouts/{result['session_id']}")
            data = (await c.get(f"/rollouts/{result['session_id']}?format=json")).json()
    assert page.status_code == 200 and "Conversation with the user" in page.text
    assert proposal in page.text and "Yes, cancel it." in page.text
    assert [(t["act"], t["confirms"]) for t in data["conversation"]] == [
        ("confirm", '["cancel_pending_order"]')
    ]


async def test_a_replay_scores_the_conversation_as_the_session_did(client):
    """NeMo Gym's stateless reverify: the response's calls replayed on the task's snapshot."""
    for calls in (
        _gold(TASK),
        [MOVE, ("message_user", {"text": PROPOSE})],  # acted first, asked after
        [("message_user", {"text": PROPOSE.replace("9001", "9002")}), MOVE],
    ):
        live, bodies = await _rollout(client, TASK, calls)
        items: list[dict[str, Any]] = []
        for i, ((name, args), body) in enumerate(zip(calls, bodies, strict=True)):
            items += [
                {"type": "function_call", "call_id": f"c{i}", "name": name},
                {"type": "function_call_output", "call_id": f"c{i}", "output": json.dumps(body)},
            ]
            items[-2]["arguments"] = json.dumps(args)
        async with fresh_client(client) as c:  # no session cookie: a replay
            replayed = (
                await c.post("/verify", json={**TASK, "response": response_object(items, "")})
            ).json()
        assert replayed["verified_by"] == "replay"
        assert replayed["reward"] == live["reward"], (calls, replayed.get("failure_reason"))
        assert replayed["reward_components"] == live["reward_components"]


async def test_the_sql_console_cannot_read_the_script_nor_write_the_conversation(tmp_path):
    from app.registry import load_environment
    from app.server.api import create_app

    env = load_environment("sql")
    task = {"task_id": "sql-talk", "user": SCRIPT.model_dump(), "ground_truth": []}
    settings = backend_settings("sqlite", tmp_path / "data", None)
    app = create_app(settings, env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as c:
            assert (await c.post("/seed_session", json=task)).status_code == 200
            for sql in (
                f"SELECT script FROM {USER_TABLE}",
                f"SELECT * FROM {CONVERSATION_TABLE}",
                f"INSERT INTO {CONVERSATION_TABLE} (turn, message, reply, act, confirms, stage, "
                "simulator) VALUES (1, 'x', 'yes', 'confirm', '[\"run_sql\"]', 1, 'scripted')",
            ):
                body = (await c.post("/run_sql", json={"sql": sql})).json()
                assert "error" in body and "message_user" in body["error"]["message"], body
            listed = (await c.post("/list_tables", json={})).json()["output"]["tables"]
            assert not {t["table"] for t in listed} & {USER_TABLE, CONVERSATION_TABLE}
            described = (await c.post("/describe_table", json={"table": USER_TABLE})).json()
            assert described["error"]["code"] == "not_found"
