"""The sql hard tier: long golds whose decisions need the rows (the salary in effect today, not a
later row; 10.00% and today as inclusive boundaries), and refusals that name each refused record.
Draws are built as `stategym tasks generate` builds them (test_sql_worlds.draw)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from envs.sql.taskgen import hard
from envs.sql.taskgen.kit import TODAY
from envs.sql.tests.test_sql_worlds import draw

DRAWS = 16


@pytest.fixture(scope="module")
def payroll() -> list[dict[str, Any]]:
    return [draw(hard.hard_payroll_review, 0, i) for i in range(DRAWS)]


@pytest.fixture(scope="module")
def month() -> list[dict[str, Any]]:
    return [draw(hard.hard_customer_month, 0, i) for i in range(DRAWS)]


@pytest.fixture(scope="module")
def close() -> list[dict[str, Any]]:
    return [draw(hard.hard_quarter_close, 0, i) for i in range(DRAWS)]


def _salaries(task: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    rows: dict[int, list[dict[str, Any]]] = {}
    for r in task["seed"]["rows"]["salaries"]:
        rows.setdefault(r["employee_id"], []).append(r)
    return rows


def _current(rows: list[dict[str, Any]]) -> float:
    """The policy's current salary: the row with the latest effective_date on or before today."""
    in_effect = [r for r in rows if r["effective_date"] <= TODAY.isoformat()]
    return float(max(in_effect, key=lambda r: r["effective_date"])["amount"])


def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, pattern
    return float(found.group(1).replace(",", ""))


def test_hard_golds_are_long(
    payroll: list[dict[str, Any]], close: list[dict[str, Any]], month: list[dict[str, Any]]
) -> None:
    for tasks in (payroll, close, month):
        lengths = [len(t["ground_truth"]) for t in tasks]
        assert min(lengths) >= 10 and max(lengths) <= 30, lengths
    for tasks in (payroll, close):
        declined = {"expected_decline" in t for t in tasks}
        assert declined == {True, False}


def test_the_month_bill_depends_on_the_steps_before_it(month: list[dict[str, Any]]) -> None:
    """The answer is the bill after the void and the approvals, over each project's own rate
    (the projects' rates differ): the seeded rows' bill (the question answered first), over any
    run of weeks, is another amount."""
    for task in month:
        rows = task["seed"]["rows"]
        rate = {p["id"]: p["hourly_rate"] for p in rows["projects"]}
        prompt = task["responses_create_params"]["input"][-1]["content"]
        customer = re.search(r"our customer (\w+ \w+),", prompt)
        assert customer
        cid = next(c["id"] for c in rows["customers"] if c["name"] == customer.group(1))
        ours = {p["id"] for p in rows["projects"] if p["customer_id"] == cid}
        assert len(ours) >= 2 and len({rate[p] for p in ours}) == len(ours)
        answer = task["expected_answer"]["value"]
        weeks = sorted({s["week_start"] for s in rows["timesheets"] if s["project_id"] in ours})
        # The seeded approved billable amount per week, before the steps.
        naive = dict.fromkeys(weeks, 0.0)
        for s in rows["timesheets"]:
            if s["project_id"] in ours and s["status"] == "approved" and s["billable"]:
                naive[s["week_start"]] += s["hours"] * rate[s["project_id"]]
        assert answer not in {
            round(sum(naive[w] for w in weeks[a:b]), 2)
            for a in range(len(weeks))
            for b in range(a, len(weeks) + 1)
        }


def test_every_hard_decline_names_its_refused_records(
    payroll: list[dict[str, Any]], close: list[dict[str, Any]]
) -> None:
    """A hard refusal's gold declines with the refused record's key (employee_no or invoice
    number), and the row expects exactly those; several refused records are listed."""
    several = 0
    for task in payroll + close:
        if "expected_decline" not in task:
            continue
        subject = task["ground_truth"][-1]["arguments"]["subject"]
        assert subject, task["task_id"]
        records = task.get("expected_decline_records") or task["expected_decline_subject"]
        assert (subject if isinstance(subject, list) else [subject]) == records
        keys = {
            row.get("employee_no") or row.get("number")
            for rows in task["seed"]["rows"].values()
            for row in rows
        }
        for r in records:
            assert re.fullmatch(r"E\d{6}|INV-2026-\d{5}", r) and r in keys, r
        several += len(records) > 1
    assert several, "no draw refuses several records"


def test_payroll_raises_use_the_salary_in_effect_today(payroll: list[dict[str, Any]]) -> None:
    """Each merit row is the percentage of the row in effect today (a later row, such as a
    promotion not yet in effect, is not the current salary); the promotion is refused exactly
    when it is more than 10% over that salary, to the cent (10.00% is allowed)."""
    boundary = 0
    for task in payroll:
        prompt = task["responses_create_params"]["input"][-1]["content"]
        pct = _number(r"gets a ([\d.]+)% merit raise", prompt)
        target = _number(r"promoted to ([\d,.]+) instead", prompt)
        history = _salaries(task)
        promoted = None
        for c in task["ground_truth"]:
            sql = c["arguments"].get("sql", "")
            m = re.match(
                r"INSERT INTO salaries .* VALUES \((\d+), '[\d-]+', ([\d.]+), '(\w+)'\)", sql
            )
            if not m:
                continue
            emp, amount, reason = int(m.group(1)), float(m.group(2)), m.group(3)
            if reason == "merit":
                assert amount == round(_current(history[emp]) * (1 + pct / 100), 2), sql
            else:
                promoted = emp
        found = re.search(r"except (\w+) (\w+)\b[^,]*, who is promoted", prompt)
        assert found, prompt
        people = task["seed"]["rows"]["employees"]
        named = next(e for e in people if (e["first_name"], e["last_name"]) == found.groups())
        base = _current(history[named["id"]])
        over = round(target - base * 1.10, 2) > 0
        assert (promoted is None) == over, (task["task_id"], base, target)
        refused = task.get("expected_decline_records") or task.get("expected_decline_subject")
        assert (named["employee_no"] in (refused or [])) == over
        later = [r for r in history[named["id"]] if r["effective_date"] > TODAY.isoformat()]
        assert later and later[0]["amount"] > base  # the trap: the latest row is not current
        boundary += target == round(base * 1.10, 2)
    assert boundary, "no draw promotes by exactly 10.00%"


def test_quarter_close_approves_weeks_at_the_limit(close: list[dict[str, Any]]) -> None:
    """'More than N hours' is rejected; exactly N hours is approved (some draw has one)."""
    at_limit = 0
    for task in close:
        prompt = task["responses_create_params"]["input"][-1]["content"]
        limit = _number(r"more than (\d+) hours", prompt)
        sheets = task["seed"]["rows"]["timesheets"]
        at_limit += any(s["status"] == "submitted" and s["hours"] == limit for s in sheets)
        reject = [c for c in task["ground_truth"] if "SET status = 'rejected'" in str(c)]
        for c in reject:
            assert f"hours > {int(limit)}" in c["arguments"]["sql"]
    assert at_limit
