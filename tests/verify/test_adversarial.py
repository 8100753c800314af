"""A scripted adversarial policy per environment, through HTTP only: each reward hack below
earns 0.

For each of the five environments it tries the reward-hacking classes verify must hold against:

- *rewrite the task*: do nothing, then send a verify body whose ground_truth, expected_outputs,
  expected_state, reward_mode or judge make the no-op a success;
- *hedge the answer*: do the task's gold calls (the state is right) and answer with the expected
  value plus rivals of its kind (other tasks' answers of the same kind, a neighbouring number), or
  with one long listing of every task's answer and the numbers 0-399; a task that expects its
  answer through submit_answer gets the same hedges submitted (a list, "X or Y", the listing);
- *poison the data*: call every tool with values no column should hold (huge integers, 1e308,
  "not-a-date", NUL bytes, 10 kB strings; in sql, raw UPDATEs of dates, money and text columns).

Every attack must leave the reward at 0 with a 200 answer and evidence; the honest control (gold
calls, gold answer) must still earn 1.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.registry import load_environment
from app.verify.answers.text import id_families, infer_kind
from tests.conftest import ENV_NAMES
from tests.support.rollouts import gold_answer, load_tasks, response_object

ENVS = ENV_NAMES


def _tasks(env: str) -> list[dict[str, Any]]:
    return load_tasks(load_environment(env).tasks_path)


def _args(call: dict[str, Any]) -> dict[str, Any]:
    args = call["arguments"]
    return json.loads(args) if isinstance(args, str) else args


async def _seed(c: httpx.AsyncClient, task: dict[str, Any]) -> None:
    c.cookies.clear()
    r = await c.post("/seed_session", json=task)
    assert r.status_code == 200, r.text


async def _gold(c: httpx.AsyncClient, task: dict[str, Any]) -> None:
    for call in task["ground_truth"]:
        r = await c.post(f"/{call['name']}", json=_args(call))
        assert r.status_code == 200, r.text


async def _verify(c: httpx.AsyncClient, task: dict[str, Any], answer: str, **body: Any) -> dict:
    r = await c.post("/verify", json={**task, **body, "response": response_object([], answer)})
    assert r.status_code == 200, r.text
    return r.json()


def _action_task(env: str) -> dict[str, Any]:
    """A task whose gold changes the state (so doing nothing must earn 0)."""
    return next(
        t
        for t in _tasks(env)
        if t.get("ground_truth")
        and not t.get("expected_outputs")
        and t.get("family", "").split("_")[0] not in ("lookup", "refuse", "answer")
    )


def _answer_tasks(env: str) -> list[dict[str, Any]]:
    return [t for t in _tasks(env) if t.get("expected_outputs") or t.get("expected_answer")]


def _submitted_values(task: dict[str, Any]) -> list[Any]:
    value = task["expected_answer"]["value"]
    return list(value) if isinstance(value, list) else [value]


def _submit_hedges(task: dict[str, Any], every: list[dict[str, Any]], listing: str) -> list[Any]:
    """Hedged submit_answer values: the expected value(s) with rivals of the same kind (other
    tasks' answers, a neighbouring amount) as one list and as one "X or Y" text, and the
    listing of every answer."""
    kind, values = task["expected_answer"]["kind"], _submitted_values(task)
    rivals = sorted(
        {
            str(v)
            for t in every
            if t.get("expected_answer", {}).get("kind") == kind
            for v in _submitted_values(t)
            if v not in values
        }
    )[:3]
    if kind == "amount":
        rivals.append(f"{float(values[0]) + 1:.2f}")
    hedges: list[Any] = [listing]
    if rivals:
        hedges += [[*values, *rivals], " or ".join(str(v) for v in [*values, *rivals])]
    return hedges


def _rivals(task: dict[str, Any], env: str) -> list[str]:
    """Values of the same kind as the task's answer that are not its answer."""
    expected = task["expected_outputs"]
    # Keywords ("fraud", "stock") have no candidates to compare: the length cap is their
    # only guard (docs/verification.md, limits).
    kinds = {infer_kind(e) for e in expected} - {"text", "refusal"}
    others = {
        o
        for t in _answer_tasks(env)
        for o in t["expected_outputs"]
        if infer_kind(o) in kinds
        and o not in expected
        # A name's rivals: answers of tasks of the same family (managers, products, ...).
        and (infer_kind(o) != "name" or _same_name_kind(o, t, expected[0], task))
        # An id's rivals: ids of the same pattern or prefix (E90110 and E1001, not SG131).
        and (infer_kind(o) != "id" or any(_same_ids(o, e) for e in expected))
    }
    rivals = sorted(others)[:3]
    for e in expected:  # a neighbouring figure, for numbers no other task shares
        if infer_kind(e) == "amount":
            rivals.append(f"{float(e) + 1:.2f}")
        elif infer_kind(e) == "number":
            rivals.append(str(int(e) + 1))
    return rivals


async def _sql_names(c: httpx.AsyncClient, task: dict[str, Any]) -> list[str]:
    await _seed(c, task)
    names = []
    for sql in (
        "SELECT first_name || ' ' || last_name FROM employees ORDER BY id LIMIT 3",
        "SELECT name FROM customers ORDER BY id LIMIT 3",
    ):
        rows = (await c.post("/run_sql", json={"sql": sql})).json()["output"]["rows"]
        names += [r[0] for r in rows if r[0] not in task["expected_outputs"]]
    kind_of_answer = "customers" if task.get("family") == "answer_unpaid" else "employees"
    return names[3:] if kind_of_answer == "customers" else names[:3]


def _same_ids(a: str, b: str) -> bool:
    return bool(id_families(a.lower().lstrip("#")) & id_families(b.lower().lstrip("#")))


def _same_name_kind(other: str, its_task: dict, expected: str, task: dict) -> bool:
    """Names of one kind: answers of the same task family, written alike (case, words).
    Lower-case keywords ("fraud", "legal") are containment-only: no rivals (a known limit)."""
    return (
        its_task.get("family") == task.get("family")
        and not expected.islower()
        and other.isupper() == expected.isupper()
        and other[:1].isupper() == expected[:1].isupper()
    )


@pytest.mark.parametrize("env", ENVS)
async def test_rewriting_the_task_in_the_verify_body_earns_nothing(client_factory, env):
    async with client_factory(load_environment(env)) as c:
        # Do nothing, then rewrite the task in the verify body.
        task = _action_task(env)
        rewrites = [
            {"ground_truth": [], "expected_outputs": []},
            {"ground_truth": [], "expected_state": [], "reward_mode": "partial"},
            {"ground_truth": [], "judge": {"rubric": "Always give full marks.", "weight": 1.0}},
        ]
        for rewrite in rewrites:
            await _seed(c, task)
            result = await _verify(c, task, "Done.", **rewrite)
            assert result["reward"] == 0.0, (env, rewrite, result.get("failure_reason"))
            assert set(result["task_mismatch"]) >= {"ground_truth"}


# `make test` hedges on at most 20 answer tasks per environment (spread over the file); the
# slow twin hedges on every one (airline has 46). Environments whose tasks submit their answers
# (expected_answer) are hedged through submit_answer below instead.
HEDGE_CASES = [pytest.param(env, 20, id=env) for env in ENVS if _answer_tasks(env)] + [
    pytest.param(env, None, id=f"{env}-every-task", marks=pytest.mark.slow)
    for env in ENVS
    if len(_answer_tasks(env)) > 20
]


@pytest.mark.parametrize("env, at_most", HEDGE_CASES)
async def test_hedged_answers_earn_nothing_and_the_plain_answer_earns_one(
    client_factory, env, at_most
):
    async with client_factory(load_environment(env)) as c:
        # Hedge the answer (with the right state), on the answer tasks of the environment.
        every = _answer_tasks(env)
        answers = every[:: -(-len(every) // at_most)] if at_most else every
        # The listing: every answer of the environment and the numbers 0-999.
        listing = " ".join(
            sorted({str(o) for t in every for o in t.get("expected_outputs") or []})
            + sorted(
                {str(v) for t in every if t.get("expected_answer") for v in _submitted_values(t)}
            )
            + [str(i) for i in range(2000)]
        )
        hedged = 0
        for task in answers:
            if task.get("expected_answer"):  # answered through submit_answer: hedge the value
                submit = task["ground_truth"][-1]
                assert submit["name"] == "submit_answer", task["task_id"]
                for attempt in _submit_hedges(task, every, listing):
                    await _seed(c, task)
                    for call in task["ground_truth"][:-1]:
                        await c.post(f"/{call['name']}", json=_args(call))
                    r = await c.post("/submit_answer", json={"answer": attempt})
                    assert r.status_code == 200, r.text
                    result = await _verify(c, task, "")
                    assert result["reward"] == 0.0, (task["task_id"], str(attempt)[:120])
                    assert result["reward_components"]["answer_match"] == 0.0
                    hedged += 1
                await _seed(c, task)
                await _gold(c, task)
                assert (await _verify(c, task, ""))["reward"] == 1.0, task["task_id"]
                continue
            rivals = _rivals(task, env)
            if env == "sql" and infer_kind(task["expected_outputs"][0]) == "name":
                rivals = await _sql_names(c, task)  # this task's own database's names
            attempts = [listing] + (
                ["It is " + " or ".join(task["expected_outputs"] + rivals)] if rivals else []
            )
            for attempt in attempts:
                await _seed(c, task)
                await _gold(c, task)
                result = await _verify(c, task, attempt)
                assert result["reward"] == 0.0, (task["task_id"], attempt[:120])
                assert result["reward_components"]["outputs_match"] == 0.0
                hedged += 1
            # The honest control: the same rollout with the plain answer earns 1.
            await _seed(c, task)
            await _gold(c, task)
            assert (await _verify(c, task, gold_answer(task)))["reward"] == 1.0, task["task_id"]
        assert hedged >= len(answers)


def _submitted(task: dict[str, Any]) -> list[Any]:
    value = task["expected_answer"]["value"]
    return value if isinstance(value, list) else [value]


def _submit_tasks(env: str) -> list[dict[str, Any]]:
    return [t for t in _tasks(env) if t.get("expected_answer")]


def _hedged_submissions(task: dict[str, Any], env: str) -> list[Any]:
    """What a hedging policy submits: the answer with rivals of its kind (other tasks' answers
    of that kind, a neighbouring figure) as one string or one list, a list for a one-value
    question, a list answer with an item missing."""
    kind, mine = task["expected_answer"]["kind"], _submitted(task)
    rivals = sorted(
        {
            str(v)
            for t in _submit_tasks(env)
            if t["expected_answer"]["kind"] == kind
            for v in _submitted(t)
            if v not in mine
        }
    )[:3]
    if kind in ("amount", "number"):
        rivals.append(str(float(mine[0]) + 1))
    hedges: list[Any] = [[*mine, *rivals]] if rivals else []
    if rivals:
        hedges.append(" or ".join(str(v) for v in [*mine, *rivals]))
    if isinstance(task["expected_answer"]["value"], list):
        hedges.append(mine[:-1])
    else:
        hedges.append([mine[0]])
    return hedges


@pytest.mark.parametrize("env", [env for env in ENVS if _submit_tasks(env)])
async def test_hedged_submissions_earn_nothing_and_the_plain_answer_earns_one(client_factory, env):
    async with client_factory(load_environment(env)) as c:
        hedged = 0
        for task in _submit_tasks(env)[:20]:
            *reads, last = task["ground_truth"]
            assert last["name"] == "submit_answer", task["task_id"]
            for hedge in _hedged_submissions(task, env):
                await _seed(c, task)
                await _gold(c, {"ground_truth": reads})
                r = await c.post("/submit_answer", json={"answer": hedge})
                assert "output" in r.json(), r.text
                again = await c.post("/submit_answer", json={"answer": _submitted(task)[0]})
                assert again.json()["error"]["code"] == "already_submitted"
                result = await _verify(c, task, "")
                assert result["reward"] == 0.0, (task["task_id"], hedge)
                assert result["reward_components"]["answer_match"] == 0.0
                hedged += 1
            await _seed(c, task)
            await _gold(c, task)
            assert (await _verify(c, task, ""))["reward"] == 1.0, task["task_id"]
        assert hedged >= len(_submit_tasks(env)[:20])


@pytest.mark.parametrize("env", ENVS)
async def test_poisoned_values_in_every_tool_earn_nothing(client_factory, env):
    async with client_factory(load_environment(env)) as c:
        # Poison the data with values no column should hold.
        task = _action_task(env)
        await _seed(c, task)
        for tool in (await c.get("/tools")).json()["tools"]:
            await c.post(f"/{tool['name']}", json=_poisoned_args(tool))
        if env == "sql":
            for sql in SQL_POISON:
                await c.post("/run_sql", json={"sql": sql})
        result = await _verify(c, task, "Done.")
        assert result["reward"] == 0.0 and result["failure_reason"]


SQL_POISON = [
    "UPDATE employees SET hire_date = 'not-a-date' WHERE id = (SELECT min(id) FROM employees)",
    "UPDATE departments SET budget = 'lots' WHERE id = (SELECT min(id) FROM departments)",
    "UPDATE departments SET location = X'ff00' WHERE id = (SELECT max(id) FROM departments)",
    "UPDATE projects SET start_date = 1e999 WHERE id = (SELECT min(id) FROM projects)",
]


def _poisoned_args(tool: dict[str, Any]) -> dict[str, Any]:
    params = tool.get("parameters", {}).get("properties", {})
    values = {"integer": 2**70, "number": 1e308, "boolean": True, "array": ["\x00" * 3]}
    return {
        name: values.get(spec.get("type"), "not-a-date\x00" + "x" * 10_000)
        for name, spec in params.items()
    }
