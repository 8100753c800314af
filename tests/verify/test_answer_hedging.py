"""The text answer path: the expected value stated as a whole token, and no rival of its kind.

Unit cases on `hedged_outputs` / `missing_outputs` (one tokenizer decides both): plain and
glued hedges fail, glued expected values never match, honest answers pass; and through HTTP,
every sql answer task answered with a listing of every employee, invoice and the numbers 0-399,
or the expected value plus rivals, plain or glued to letters, earns 0.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import InvalidTask
from app.registry import load_environment
from app.verify.answers.text import (
    MAX_ANSWER_CHARS,
    hedged_outputs,
    infer_kind,
    missing_outputs,
    text_answer,
)
from app.verify.state.dump import TableState
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
        ("2026-05-07 10:00", "datetime"),
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
        (["14:00"], "It departs at 2 pm."),
        (["2026-05-07 10:00"], "Your next appointment is on 2026-05-07 at 10:00."),
        (["2026-05-07 10:00"], "It is on Thursday, May 7, 2026 at 10 am."),
        (["2026-05-07"], "On May 7th, 2026, at 10:00."),
        (["233.00"], "The refund is **$233.00**."),
        (["233.00"], "Refunded: 233 USD"),
        (["233.00"], "Refunded on May 7: 233.00."),
        (["2026-05-07"], "2026-05-07 (May 7)."),
        (["3"], "You already hold 3 future appointments, the maximum."),
        (["E90110"], "E90110's manager is on leave."),
        (["Leila Mansour"], "The contact is Leila Mansour."),
        (["Blender"], "Blenders ship tomorrow; your Blender is in stock."),
        (["514.00", "TQJ5KV"], "Booking TQJ5KV was refunded 514.00."),
        (["SG160", "SG150"], "Flights SG160/SG150."),
    ],
)
def test_honest_answers_pass(expected, answer):
    assert missing_outputs(expected, answer) == []
    assert hedged_outputs(expected, answer, seed_state=STATE) == []


@pytest.mark.parametrize(
    "expected, answer, rival",
    [
        (["233.00"], "The refund is 233.00 or maybe $240.00.", "240.00"),
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


@pytest.mark.parametrize(
    "expected, answer",
    [
        (["233.00"], "233.00 q234.00q q235.00q"),
        (["233.00"], "233.00 abc234.00def"),
        (["233.00"], "233.00 ٢٣٤.٠٠"),
        (["233.00"], "233.00 or 234"),
        (["233.00"], "233.00 two hundred"),
        (["65"], "65 q66q"),
        (["65"], "65 abc66def"),
        (["65"], "65 X66Y"),
        (["65"], "65 66-67"),
        (["65"], "65 ٦٦"),
        (["65"], "65 ６６"),
        (["65"], "65 sixty-six"),
        (["E90110"], "E90110 qE90111q"),
        (["E90110"], "E90110 QE90111Q"),
        (["E90110"], "E90110 _E90111_"),
        (["INV-2026-9120"], "INV-2026-9120 xINV-2026-9121x"),
        (["2026-05-10"], "2026-05-10 q2026-05-11q"),
        (["2026-05-07 10:00"], "2026-05-07 at 10:00 or 11:00"),
        (["2026-05-07"], "2026-05-07 or May 8"),
        (["14:00"], "14:00 x15:30"),
        (["jake@x.org"], "jake@x.org q.a@b.orgq"),
        (["Leila Mansour"], "Leila Mansour _Jonas Vogel_"),
        (["Leila Mansour"], "Leila Mansour qJonas Vogelq"),
        (["Blender"], "Blender abcKettledef"),
        (["Mansour"], "Mansour _Vogel_"),
    ],
)
def test_glued_rivals_are_hedges(expected, answer):
    assert missing_outputs(expected, answer) == []
    assert hedged_outputs(expected, answer, seed_state=STATE), answer


@pytest.mark.parametrize(
    "expected, answer",
    [
        (["233.00"], "q233.00q"),
        (["233.00"], "abc233.00def"),
        (["233.00"], "233.00.5"),
        (["233.00"], "٢٣٣.٠٠"),
        (["65"], "sixty-five"),
        (["65"], "x65"),
        (["E90110"], "qE90110q"),
        (["E90110"], "E90110_"),
        (["Leila Mansour"], "_Leila Mansour_"),
        (["2026-05-10"], "q2026-05-10q"),
        (["2026-05-10"], "2026-05-10\u200bx"),
        (["fraud"], "fraudulent"),
    ],
)
def test_glued_expected_values_never_match(expected, answer):
    assert missing_outputs(expected, answer) == expected


def test_the_text_path_cannot_know_intent():
    """Documented limits: another value of the kind is a hedge even when it is honest context,
    and a reason in other words is missing. The answer tools score these by value."""
    both = "Your next appointment is on 2026-05-07 at 10:00; the one after, 2026-05-14 at 09:00."
    assert hedged_outputs(["2026-05-07 10:00"], both)
    assert missing_outputs(["24 hours"], "That is less than a day away.") == ["24 hours"]


def test_text_answer_scores_an_expected_answer():
    ok = text_answer("datetime", "2026-05-07 10:00", "On 2026-05-07 at 10:00.")
    assert ok.ok and not ok.missing and not ok.hedges
    hedged = text_answer("amount", 233, "233.00 or q234.00q")
    assert not hedged.ok and "q234.00q" in hedged.reason
    missing = text_answer("amount", "233.00", "q233.00q")
    assert not missing.ok and missing.missing == ["233.00"]
    listed = text_answer("id", ["E1", "E2"], "E1 and E2")
    assert listed.ok
    assert not text_answer("id", ["E1", "E2"], "E1, E2 and E3").ok
    names = text_answer("name", "Leila Mansour", "Leila Mansour, not _Jonas Vogel_", STATE)
    assert not names.ok and names.hedges


def test_a_very_long_answer_fails_whatever_it_says():
    hedges = hedged_outputs(["fraud"], "fraud " + "x" * MAX_ANSWER_CHARS)
    assert hedges and hedges[0].kind == "length"


def test_a_declared_kind_the_value_does_not_fit_falls_back_to_its_inferred_kind():
    answer = "It is on 2026-05-07 at 10:00."
    assert missing_outputs(["2026-05-07 10:00"], answer, declared="date") == []
    assert hedged_outputs(["2026-05-07 10:00"], "2026-05-07 at 10:00 or 11:00", declared="date")


def test_declared_kinds_win_and_are_validated():
    # Declared "text": containment only, rivals allowed (e.g. a refusal's reason word).
    assert hedged_outputs(["65"], "65 or 66", declared="text") == []
    assert hedged_outputs(["65"], "65 or 66", declared=["number"])
    with pytest.raises(InvalidTask):
        hedged_outputs(["65"], "65", declared="vibes")
    with pytest.raises(InvalidTask):
        hedged_outputs(["65"], "65", declared=["number", "number"])


def _sql_answer_tasks() -> list[dict]:
    """The sql tasks that end with an answer or a decline (answers are state)."""
    return [
        t
        for t in load_tasks(load_environment("sql").tasks_path)
        if t.get("expected_answer") or t.get("expected_decline")
    ]


_LISTINGS = (
    "SELECT first_name || ' ' || last_name FROM employees",
    "SELECT employee_no FROM employees",
    "SELECT number FROM invoices",
    "SELECT name FROM customers",
)


async def _rollout(c, task: dict, last: dict, text: str = "", overrides: dict | None = None):
    """Seed `task`, run its gold but the final answer call, then `last` (or nothing); verify."""
    c.cookies.clear()
    seeded = await c.post("/seed_session", json={**task, **(overrides or {})})
    assert seeded.status_code == 200, seeded.text
    for call in [*task["ground_truth"][:-1], *([last] if last else [])]:
        await c.post(f"/{call['name']}", json=call["arguments"])
    body = {**task, **(overrides or {}), "response": response_object([], text)}
    return (await c.post("/verify", json=body)).json()


async def test_issue_example_hedge_scores_zero_on_every_sql_answer_task(client_factory):
    """The issue's example, now that answers are state: after read-only SELECTs listing every
    employee, employee number, invoice and customer, the policy submits them all (one string, or
    one list), or declines with another rule's code, or (the text path, for a count) says every
    value, or the expected one with rivals glued to letters or in underscores: 1.0 on 18/18 such
    tasks before (text containment), 0.0 now. The gold's own submission earns 1."""
    from app.registry import load_environment

    tasks = _sql_answer_tasks()
    assert len(tasks) >= 18
    async with client_factory(load_environment("sql")) as c:
        codes = load_environment("sql").decline_codes
        for task in tasks:
            c.cookies.clear()
            await c.post("/seed_session", json=task)
            listed = []
            for query in _LISTINGS:
                out = (await c.post("/run_sql", json={"sql": query})).json()["output"]
                listed += [str(row[0]) for row in out["rows"]]
            hedge = " ".join(listed + [str(i) for i in range(400)])
            gold = task["ground_truth"][-1]
            if "expected_answer" in task:
                value = task["expected_answer"]["value"]
                rivals = [
                    v for v in listed if v not in (value if isinstance(value, list) else [value])
                ]
                both = [*(value if isinstance(value, list) else [value]), rivals[0]]
                said = " ".join(str(v) for v in both[:-1])
                kin = [str(value + 1)] if isinstance(value, int) else rivals[:3]  # its kind
                glued = f"{said} " + " ".join(f"q{r}q" for r in kin)
                underscored = f"{said} " + " ".join(f"_{r}_" for r in kin)
                tries = [
                    ({"name": "submit_answer", "arguments": {"answer": hedge}}, {}, ""),
                    ({"name": "submit_answer", "arguments": {"answer": both}}, {}, ""),
                ]
                if task["expected_answer"]["kind"] == "number":
                    # The text path tells rivals apart for the kinds written with digits (for
                    # names it checks presence only: docs/verification.md, its limits).
                    tries += [
                        (None, {"answer_via": "text"}, text) for text in (hedge, glued, underscored)
                    ]
            else:
                wrong = next(code for code in codes if code != task["expected_decline"])
                tries = [
                    (
                        {
                            "name": "decline_request",
                            "arguments": {"reason": wrong, "message": hedge},
                        },
                        {},
                    ),
                    ({"name": "submit_answer", "arguments": {"answer": hedge}}, {}),
                    (None, {}),  # the rule named in text only
                ]
                tries = [(last, overrides, hedge) for last, overrides in tries]
            for last, overrides, text in tries:
                result = await _rollout(c, task, last, text, overrides)
                assert result["reward"] == 0.0, (task["task_id"], last, overrides, result)
            result = await _rollout(c, task, gold)
            assert result["reward"] == 1.0, (task["task_id"], result["verification"])


async def test_malformed_expected_answers_are_refused_at_seed(client_factory):
    """A task row's answer or decline is checked when it is seeded: 422 saying what to fix."""
    from app.registry import load_environment

    tasks = _sql_answer_tasks()
    answer = next(t for t in tasks if "expected_answer" in t)
    decline = next(t for t in tasks if "expected_decline" in t)
    bad = [
        {**answer, "expected_answer": {"kind": "vibes", "value": "x"}},
        {**answer, "expected_answer": {"kind": "number", "value": "Anna Weber"}},
        {**answer, "expected_decline": "raise_over_limit"},  # both
        {**decline, "expected_decline": "not_a_rule"},
    ]
    async with client_factory(load_environment("sql")) as c:
        for row in bad:
            c.cookies.clear()
            r = await c.post("/seed_session", json=row)
            assert r.status_code == 422, (row.get("expected_answer"), r.text)
            assert r.json()["error"]["message"]
        for row in (answer, decline):
            c.cookies.clear()
            r = await c.post("/seed_session", json=row)
            assert r.status_code == 200, r.text


_GLUE = st.sampled_from(["q", "_", "x.", "é", "Ж", "٣", "-x", "abc"])
_cents = st.integers(min_value=1, max_value=10**8)


def _money(c: int) -> str:
    return f"{c // 100}.{c % 100:02d}"


@settings(max_examples=150, deadline=None)
@given(_cents, _cents, _GLUE, _GLUE)
def test_glued_amounts_are_never_matches_and_always_rivals(c, other, left, right):
    expected = _money(c)
    glued = f"{left}{expected}{right}"
    assert missing_outputs([expected], f"The refund is {glued}.") == [expected]
    rival = f"{left}{_money(other)}{right}"
    assert hedged_outputs([expected], f"The refund is {expected}, {rival}.")


@settings(max_examples=150, deadline=None)
@given(_cents, st.sampled_from(["${:,}.{:02d}", "{}.{:02d} USD", "USD {}.{:02d}", "**{}.{:02d}**"]))
def test_honest_amount_renderings_pass(c, shape):
    expected = _money(c)
    answer = f"The refund is {shape.format(c // 100, c % 100)}."
    assert missing_outputs([expected], answer) == []
    assert hedged_outputs([expected], answer) == []
