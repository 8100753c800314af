"""Retail's rewards against the submissions a policy would try, through HTTP only, both backends.

Every shipped retail task: the gold earns 1; hedged answers through submit_answer (the expected
value with a rival, as a list, as "A or B", glued to letters, in a sentence) earn 0; a second
submission is refused and changes nothing; a refusal task earns 0 for a no-op, for an answer and
for a decline with any other code; an action task earns 0 when the agent declines as well (every
code is tried); and every rollout's step and turn rewards add up to its reward.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest

from app.registry import load_environment
from app.server.api import create_app
from app.verify.answers.hedges import rival
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import fresh_client, load_tasks, response_object

RETAIL = load_environment("retail")
TASKS = load_tasks(load_environment("retail").tasks_path)
LOOKUPS = [t for t in TASKS if t.get("expected_answer")]
REFUSALS = [t for t in TASKS if t.get("expected_decline")]
ACTIONS = [t for t in TASKS if not t.get("expected_answer") and not t.get("expected_decline")]
FRAMEWORK = {"submit_answer", "decline_request"}
Call = tuple[str, dict[str, Any]]
# `make test` runs a sample (each answer kind, several refusal codes, a few action tasks); the
# sweep of every shipped task is `slow` (minutes of CPU on both backends).
SCOPE = pytest.mark.parametrize(
    "scope", [pytest.param("sample"), pytest.param("all", marks=pytest.mark.slow)]
)


def pick(tasks: list[dict[str, Any]], scope: str, n: int) -> list[dict[str, Any]]:
    """Every task, or `n` spread over the list (first and last included)."""
    if scope == "all" or len(tasks) <= n:
        return tasks
    step = (len(tasks) - 1) / (n - 1)
    return [tasks[round(i * step)] for i in range(n)]


@pytest.fixture
async def client(tmp_path, backend, request) -> Any:
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    app = create_app(backend_settings(backend, tmp_path / "data", prefix), RETAIL)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://stategym") as c:
            yield c


def reads(task: dict[str, Any]) -> list[Call]:
    """The gold's calls without its answer or decline."""
    return [(c["name"], c["arguments"]) for c in task["ground_truth"] if c["name"] not in FRAMEWORK]


def gold(task: dict[str, Any]) -> list[Call]:
    return [(c["name"], c["arguments"]) for c in task["ground_truth"]]


async def rollout(
    shared: httpx.AsyncClient, task: dict[str, Any], calls: list[Call], text: str = ""
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Seed, each call over HTTP, verify with the response they make: (verify, tool bodies)."""
    async with fresh_client(shared) as c:
        seeded = await c.post("/seed_session", json=task)
        assert seeded.status_code == 200, seeded.text
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
        verified = await c.post("/verify", json={**task, "response": response_object(items, text)})
        assert verified.status_code == 200, verified.text
        await c.post("/close_session", json={})
    result = verified.json()
    # The dense rewards a trainer consumes pay exactly the reward, whatever the rollout.
    assert "step_rewards" in result, result
    assert abs(sum(result["step_rewards"]) - result["reward"]) <= 1e-9, result["step_rewards"]
    assert abs(sum(result["turn_rewards"]) - result["reward"]) <= 1e-9, result["turn_rewards"]
    return result, bodies


def hedged_answers(kind: str, value: Any) -> list[Any]:
    """The expected value with a rival, every way a policy could try to slip it past."""
    items = value if isinstance(value, list) else [value]
    other = rival(kind, items[0])
    text = ", ".join(str(i) for i in items)
    return [
        [*items, other],  # a list with a rival
        f"{text} or {other}",  # "A or B"
        f"{text} q{other}q",  # the rival glued to letters
        f"q{other}q {text}" if not isinstance(value, list) else [*items, f"q{other}q"],
        f"It is {text}, not {other}.",  # a sentence naming both
        f"{text}{other}",  # the two glued together
    ]


def test_the_shipped_set_has_every_kind_of_task():
    assert len(LOOKUPS) >= 8 and len(REFUSALS) >= 8 and len(ACTIONS) >= 20
    assert {t["expected_answer"]["kind"] for t in LOOKUPS} >= {"amount", "name"}
    assert {t["expected_decline"] for t in REFUSALS} >= {
        "not_authenticated",
        "other_customer",
        "order_not_pending",
        "already_returned",
        "refund_method",
        "insufficient_balance",
    }


@SCOPE
async def test_hedged_and_repeated_answers_earn_nothing(client, scope):
    tried: Counter[str] = Counter()
    lookups = pick(LOOKUPS, scope, 2)
    assert {t["expected_answer"]["kind"] for t in lookups} >= {"amount", "name"}
    for task in lookups:
        kind, value = task["expected_answer"]["kind"], task["expected_answer"]["value"]
        right, _ = await rollout(client, task, gold(task))
        assert right["reward"] == 1.0, (task["task_id"], right.get("failure_reason"))
        for hedge in hedged_answers(kind, value):
            got, _ = await rollout(
                client, task, [*reads(task), ("submit_answer", {"answer": hedge})]
            )
            assert got["reward"] == 0.0, (task["task_id"], hedge)
            assert got["verification"]["answer"]["reason"], hedge
            tried["hedge"] += 1
        # The right value said only in the reply text: the answer is what was submitted.
        text_only, _ = await rollout(client, task, reads(task), f"The answer is {value}.")
        assert text_only["reward"] == 0.0
        tried["text_only"] += 1
        other = rival(kind, value[0] if isinstance(value, list) else value)
        wrong_then_right, bodies = await rollout(
            client,
            task,
            [
                *reads(task),
                ("submit_answer", {"answer": [other] if isinstance(value, list) else other}),
                ("submit_answer", {"answer": value}),
            ],
        )
        assert bodies[-1]["error"]["code"] == "already_submitted"
        assert wrong_then_right["reward"] == 0.0
        right_then_wrong, bodies = await rollout(
            client,
            task,
            [*gold(task), ("decline_request", {"reason": "unrelated_request", "message": "x"})],
        )
        assert bodies[-1]["error"]["code"] == "already_submitted"
        assert right_then_wrong["reward"] == 1.0  # the first submission stands, nothing more
        tried["repeat"] += 2
    print(f"retail answers: {dict(tried)} tried, every one 0 but the first-stands case")
    assert tried["hedge"] == 6 * len(lookups)


@SCOPE
async def test_refusals_need_the_right_code(client, scope):
    tried: Counter[str] = Counter()
    for task in pick(REFUSALS, scope, 3):
        right, _ = await rollout(client, task, gold(task))
        assert right["reward"] == 1.0, (task["task_id"], right.get("failure_reason"))
        noop, _ = await rollout(client, task, reads(task), "Sorry, I cannot do that.")
        assert noop["reward"] == 0.0, task["task_id"]
        answered, _ = await rollout(
            client, task, [*reads(task), ("submit_answer", {"answer": "no"})]
        )
        assert answered["reward"] == 0.0
        tried["no_op"] += 1
        tried["answer_instead"] += 1
        for code in RETAIL.decline_codes:
            if code == task["expected_decline"]:
                continue
            wrong, _ = await rollout(
                client, task, [*reads(task), ("decline_request", {"reason": code, "message": "no"})]
            )
            assert wrong["reward"] == 0.0, (task["task_id"], code)
            assert wrong["reward_components"]["decline_match"] == 0.0
            tried["wrong_code"] += 1
    print(f"retail refusals: {dict(tried)} tried, every one 0")


@SCOPE
async def test_declining_an_action_task_earns_nothing(client, scope):
    codes = RETAIL.decline_codes
    actions = pick(ACTIONS, scope, 3)
    for i, task in enumerate(actions):
        right, _ = await rollout(client, task, gold(task))
        assert right["reward"] == 1.0, (task["task_id"], right.get("failure_reason"))
        code = codes[i % len(codes)]  # every code, over the action tasks (all of them: slow)
        declined, _ = await rollout(
            client, task, [*gold(task), ("decline_request", {"reason": code, "message": "no"})]
        )
        assert declined["reward"] == 0.0, (task["task_id"], code)
        assert "needed an action" in declined["failure_reason"]
        refused, _ = await rollout(
            client, task, [("decline_request", {"reason": code, "message": "no"})]
        )
        assert refused["reward"] == 0.0
    print(f"retail actions: {2 * len(actions)} declines tried, every one 0")


async def test_step_rewards_pay_the_answer_where_it_is_submitted(client):
    task = next(t for t in LOOKUPS if t["expected_answer"]["kind"] == "amount")
    right, _ = await rollout(client, task, [*gold(task), *reads(task)[:1]])
    # Read-only lookups earn nothing; the submission earns the whole reward.
    assert right["step_rewards"] == [0.0] * len(reads(task)) + [1.0, 0.0]
    partial = next(t for t in TASKS if t["family"] == "multi_partial_refusal")
    done, _ = await rollout(client, partial, gold(partial))
    assert done["reward"] == 1.0 and done["step_rewards"][-1] == 0.5
    # The cancel done, the decline missing: strict mode pays nothing, and the cancel's shaped
    # credit is settled back on that last writing step; partial mode pays the cancel's half.
    silent, _ = await rollout(client, partial, reads(partial))
    assert silent["reward"] == 0.0 and silent["step_rewards"] == [0.0] * len(reads(partial))
    halfway, _ = await rollout(client, {**partial, "reward_mode": "partial"}, reads(partial))
    assert halfway["reward"] == 0.5 and halfway["step_rewards"][-1] == 0.5
