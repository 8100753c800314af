"""An answer that names the expected value and rivals of its kind earns 0.

Unit cases on `hedged_outputs`, and the issue's example (every sql answer or refusal task
answered with a list of every employee, invoice and the numbers 0-399) through HTTP.
"""

from __future__ import annotations

import json

import pytest

from app.errors import InvalidTask
from app.verify.answers import MAX_ANSWER_CHARS, hedged_outputs, infer_kind
from app.verify.state import TableState
from tests.conftest import REPO
from tests.support.rollouts import load_tasks, response_object

STATE = {
    "products": TableState(
        "products",
        ("name", "price"),
        (),
        (("Blender", 1.0), ("Portable Blender", 2.0), ("Chef Knife", 3.0), ("Kettle", 4.0)),
    ),
    "contacts": TableState(
        "contacts", ("name",), (), (("Leila Mansour",), ("Jonas Vogel",), ("Ana Larsen",))
    ),
}


@pytest.mark.parametrize(
    "expected, kind",
    [
        ("233.00", "amount"),
        ("65", "number"),
        ("E90110", "id"),
        ("INV-2026-9120", "id"),
        ("22100601", "id"),
        ("2026-05-10", "date"),
        ("14:00", "time"),
        ("jake.morrow@gmail.com", "email"),
        ("Anna Weber", "name"),
    ],
)
def test_kinds_are_inferred(expected, kind):
    assert infer_kind(expected) == kind


@pytest.mark.parametrize(
    "expected, answer",
    [
        (["1234.50"], "The refund is $1,234.50."),
        (["1234.50"], "Refund: 1234.5 (that is 1234.50 in total)."),  # repeated, other format
        (["65"], "There are 65 employees; yes, 65."),
        (["E90110"], "I cannot delete employee E90110: company policy."),
        (["INV-2026-9120"], "Invoice INV-2026-9120 is paid, so I won't change it."),
        (["SG160", "SG150", "128.00", "120.00"], "SG160 costs 128.00 and SG150 costs 120.00."),
        (["Blender"], "The Blender is in stock."),
        (["Portable Blender"], "You ordered the Portable Blender."),  # not also "Blender"
        (["Mansour"], "The deal's contact is Leila Mansour."),
        (["14:00"], "It departs at 14:00."),
    ],
)
def test_honest_answers_pass(expected, answer):
    assert hedged_outputs(expected, answer, seed_state=STATE) == []


@pytest.mark.parametrize(
    "expected, answer, rival",
    [
        (["233.00"], "The refund is 233.00 or maybe $240.00.", "240"),
        (["65"], "Somewhere between 0, 1, 2, ... 65, 66 employees.", "66"),
        (["E90110"], "It is E90110 or E1001.", "e1001"),
        (["XMV377"], "Your code: XMV377 or ABC123.", "abc123"),
        (["INV-2026-9120"], "INV-2026-9120, INV-2025-0001", "inv-2025-0001"),
        (["14:00"], "14:00 or 15:30", "15:30"),
        (["2026-05-10"], "on 2026-05-10 or 2026-05-11", "2026-05-11"),
        (["Blender"], "Blender, Kettle", "kettle"),
        (["Mansour"], "Mansour or Vogel", "vogel"),
    ],
)
def test_hedges_fail(expected, answer, rival):
    hedges = hedged_outputs(expected, answer, seed_state=STATE)
    assert hedges and rival in hedges[0].also_named, hedges


def test_a_very_long_answer_fails_whatever_it_says():
    hedges = hedged_outputs(["fraud"], "fraud " + "x" * MAX_ANSWER_CHARS)
    assert hedges and hedges[0].kind == "length"


def test_declared_kinds_win_and_are_validated():
    # Declared "text": containment only, rivals allowed (e.g. a refusal's reason word).
    assert hedged_outputs(["65"], "65 or 66", declared="text") == []
    assert hedged_outputs(["65"], "65 or 66", declared=["number"])
    with pytest.raises(InvalidTask):
        hedged_outputs(["65"], "65", declared="vibes")
    with pytest.raises(InvalidTask):
        hedged_outputs(["65"], "65", declared=["number", "number"])


def _sql_answer_tasks() -> list[dict]:
    return [
        t
        for t in load_tasks(REPO / "fixtures" / "sql" / "tasks.jsonl")
        if t.get("expected_outputs")
    ]


async def test_issue_example_hedge_scores_zero_on_every_sql_answer_task(client_factory):
    """Gold calls (the state is right), then a final answer naming every employee, invoice and
    the numbers 0-399: 1.0 on 18/18 such tasks before, 0.0 now. The gold answer still earns 1."""
    from app.registry import load_environment
    from tests.support.rollouts import gold_answer

    tasks = _sql_answer_tasks()
    assert len(tasks) >= 16
    async with client_factory(load_environment("sql")) as c:
        for task in tasks:
            c.cookies.clear()
            await c.post("/seed_session", json=task)
            listed, rivals = [], []
            for query in (
                "SELECT first_name || ' ' || last_name FROM employees",
                "SELECT employee_no FROM employees",
                "SELECT number FROM invoices",
                "SELECT name FROM customers",
            ):
                out = (await c.post("/run_sql", json={"sql": query})).json()["output"]
                values = [str(row[0]) for row in out["rows"]]
                listed += values
                rivals += [v for v in values if v not in task["expected_outputs"]][:1]
            for call in task["ground_truth"]:
                args = call["arguments"]
                await c.post(
                    f"/{call['name']}", json=json.loads(args) if isinstance(args, str) else args
                )
            hedge = " ".join(listed + [str(i) for i in range(400)])
            compact = "One of: " + ", ".join(task["expected_outputs"] + rivals + ["7"])
            for answer, want in ((hedge, 0.0), (compact, 0.0), (gold_answer(task), 1.0)):
                body = {**task, "response": response_object([], answer)}
                result = (await c.post("/verify", json=body)).json()
                assert result["reward"] == want, (task["task_id"], answer[:80], result)
                if want == 0.0:
                    assert result["verification"]["hedged_outputs"]


async def test_malformed_answer_kind_is_refused_at_seed(client_factory):
    from app.registry import load_environment

    task = _sql_answer_tasks()[0]
    async with client_factory(load_environment("sql")) as c:
        r = await c.post("/seed_session", json={**task, "answer_kind": "vibes"})
        assert r.status_code == 422 and "answer_kind" in r.json()["error"]["message"]
        r = await c.post("/seed_session", json={**task, "answer_kind": ["number"]})
        assert r.status_code == 200, r.text
