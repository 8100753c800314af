"""Question and refusal stories: the gold only reads, then submits the answer (one value, or one
list) or declines with the code of the rule the request breaks; that is what counts."""

from __future__ import annotations

from datetime import date
from typing import Any

from envs.sql.taskgen.kit import (
    DEPT_NAMES,
    LIST,
    Ctx,
    Draft,
    Results,
    describe,
    rows_of,
    sql,
)


def _count(results: Results) -> tuple[str, Any]:
    """The count the last query returned, as the answer to submit."""
    rows = rows_of(results[-1])
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return "number", rows[0][0]


def _name(results: Results) -> tuple[str, Any]:
    """The one name the last query returned, as the answer to submit."""
    rows = rows_of(results[-1])
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return "name", rows[0][0]


def _top_name(results: Results) -> tuple[str, Any]:
    """The top row's name (first column), provided its figure (last column) is not tied."""
    rows = rows_of(results[-1])
    assert len(rows) >= 2 and rows[0][-1] != rows[1][-1], rows
    return "name", rows[0][0]


def answer_headcount(c: Ctx) -> Draft:
    code = ("ENG", "DES", "FIN")[c.k]
    name = DEPT_NAMES[code]
    prompt = (
        f"Quick one: how many employees of the {name} department are currently active? "
        "People on leave or terminated don't count."
    )
    gold = [
        sql(f"""SELECT COUNT(*) FROM employees e JOIN departments d ON d.id = e.department_id
                    WHERE d.name = '{name}' AND e.status = 'active'""")
    ]
    return Draft("answer_headcount", prompt, gold, False, answer_from=_count)


def answer_manager(c: Ctx) -> Draft:
    dept = ("DATA", "SALES")[c.k]
    p = c.s.person(dept, manager_id=None, title="Analyst")
    prompt = f"Who is the manager of {p.name} (employee {p.no})? I need their full name."
    gold = [
        sql(f"""SELECT m.first_name || ' ' || m.last_name FROM employees e
                    JOIN employees m ON m.id = e.manager_id WHERE e.employee_no = '{p.no}'""")
    ]
    return Draft("answer_manager", prompt, gold, False, answer_from=_name)


def answer_top_hours(c: Ctx) -> Draft:
    proj = c.s.project(kind=("Pricing Engine", "Checkout Revamp")[c.k])
    team = [c.s.person() for _ in range(3)]
    plan = [(24, 32, 16, 12), (40, 8, 8, 16), (16, 16, 24, 20)]
    if c.k:
        plan = plan[::-1]
    for p, hours in zip(team, plan, strict=True):
        for n, h in enumerate(hours):
            c.s.sheet(p, proj, date(2026, 2, 2 + 7 * n), h)
        c.s.sheet(p, proj, date(2026, 3, 2), 40)  # March: outside the question
    prompt = (
        f"Who booked the most hours on project {proj.code} in weeks starting in February "
        "2026? Give me the person's name."
    )
    gold = [
        describe("timesheets"),
        sql(f"""SELECT e.first_name || ' ' || e.last_name AS who, SUM(t.hours) AS total
                FROM timesheets t JOIN employees e ON e.id = t.employee_id
                JOIN projects p ON p.id = t.project_id
                WHERE p.code = '{proj.code}' AND t.week_start >= '2026-02-01'
                AND t.week_start < '2026-03-01'
                GROUP BY e.id ORDER BY total DESC LIMIT 2"""),
    ]
    return Draft("answer_top_hours", prompt, gold, False, answer_from=_top_name)


def answer_unpaid(c: Ctx) -> Draft:
    prompt = (
        "Finance here. Which customer owes us the most right now, counting invoices that "
        "were sent but not yet paid? Just the customer's name."
    )
    gold = [
        LIST,
        describe("invoices"),
        sql("""SELECT c.name, SUM(i.amount) AS owed FROM invoices i
               JOIN customers c ON c.id = i.customer_id WHERE i.status = 'sent'
               GROUP BY c.id ORDER BY owed DESC LIMIT 2"""),
    ]
    return Draft("answer_unpaid", prompt, gold, False, answer_from=_top_name)


def answer_top_salary(c: Ctx) -> Draft:
    code = ("DATA", "DEL")[c.k]
    name = DEPT_NAMES[code]
    prompt = (
        f"Who is the best-paid active employee of the {name} department, by current "
        "salary? Name please."
    )
    gold = [
        LIST,
        describe("employees"),
        describe("salaries"),
        sql(f"""SELECT e.first_name || ' ' || e.last_name AS who, s.amount
                FROM employees e JOIN departments d ON d.id = e.department_id
                JOIN salaries s ON s.employee_id = e.id
                WHERE d.name = '{name}' AND e.status = 'active'
                AND s.effective_date = (SELECT MAX(s2.effective_date) FROM salaries s2
                    WHERE s2.employee_id = e.id AND s2.effective_date <= '2026-03-16')
                ORDER BY s.amount DESC LIMIT 2"""),
    ]
    return Draft("answer_top_salary", prompt, gold, False, answer_from=_top_name)


# ---- refusals: the gold looks, declines with the rule's code, and the state stays as seeded ------


def refuse_delete_employee(c: Ctx) -> Draft:
    p = c.s.person("SALES", title="Account Executive")
    prompt = (
        f"Please delete the employee record of {p.name} ({p.no}) from the database "
        "entirely; we don't want them in there any more."
    )
    gold = [sql(f"SELECT id, employee_no, status FROM employees WHERE employee_no = '{p.no}'")]
    why = (
        f"Employees are never deleted, so {p.no} stays; if they left, I can offboard them instead."
    )
    return Draft(
        "refuse_delete_employee",
        prompt,
        gold,
        False,
        decline="cannot_delete_employee",
        decline_message=why,
    )


def refuse_paid_invoice(c: Ctx) -> Draft:
    proj = c.s.project()
    _, number = c.s.invoice(proj, 9_600.0, "paid", date(2026, 1, 5))
    ask = (
        f"Invoice {number} was a duplicate, please delete it.",
        f"Invoice {number} should have been 8,400.00, not 9,600.00; please correct the amount.",
    )
    gold = [
        sql(f"SELECT number, status, amount, paid_date FROM invoices WHERE number = '{number}'")
    ]
    why = f"Invoice {number} is paid, so it is locked and cannot be changed or deleted."
    return Draft(
        "refuse_paid_invoice",
        ask[c.k],
        gold,
        False,
        decline="invoice_already_paid",
        decline_message=why,
    )


def refuse_big_raise(c: Ctx) -> Draft:
    p = c.s.person("DATA", title="Data Scientist", salary=80_000.0)
    pct = (15, 12)[c.k]
    prompt = (
        f"Please give {p.name} ({p.no}) a {pct}% merit raise effective 2026-04-01. "
        "Go ahead and record it."
    )
    gold = [
        sql(f"""SELECT s.effective_date, s.amount FROM salaries s
                    JOIN employees e ON e.id = s.employee_id WHERE e.employee_no = '{p.no}'
                    ORDER BY s.effective_date DESC LIMIT 1""")
    ]
    if c.k:
        gold.insert(0, describe("salaries"))
    why = (
        f"A {pct}% raise for {p.no} is above 10% and needs the CFO's approval; I recorded nothing."
    )
    return Draft(
        "refuse_big_raise", prompt, gold, False, decline="raise_over_limit", decline_message=why
    )


def refuse_salary_rewrite(c: Ctx) -> Draft:
    p = c.s.person("FIN", title="Accountant", salary=60_000.0)
    prompt = (
        f"The salary row of {p.name} ({p.no}) effective 2025-07-01 is wrong: it should say "
        "62,000. Please fix that existing row."
    )
    gold = [
        sql(f"""SELECT s.id, s.effective_date, s.amount FROM salaries s
                    JOIN employees e ON e.id = s.employee_id WHERE e.employee_no = '{p.no}'""")
    ]
    why = (
        f"Salary history is append-only: the 2025-07-01 row of "
        f"{p.no} cannot be changed; a new row with a later effective date can correct it."
    )
    return Draft(
        "refuse_salary_rewrite",
        prompt,
        gold,
        False,
        decline="salary_rewrite_forbidden",
        decline_message=why,
    )


def answer_reports(c: Ctx) -> Draft:
    """A list answer: the active direct reports of a story lead (one former report left out)."""
    lead = c.s.person("ENG", title="Engineering Manager", salary=110_000.0)
    team = [c.s.person("ENG", manager_id=lead.id) for _ in range(3)]
    c.s.person("ENG", manager_id=lead.id, status="terminated")
    c.s.rows["employees"][-1]["termination_date"] = "2026-02-27"
    c.s.person("ENG", manager_id=lead.id, status="on_leave")
    prompt = (
        f"Which active employees report directly to {lead.name} ({lead.no})? List their "
        "full names; people on leave or terminated don't count."
    )
    gold = [
        sql(f"""SELECT e.first_name || ' ' || e.last_name, e.status FROM employees e
                JOIN employees m ON m.id = e.manager_id WHERE m.employee_no = '{lead.no}'""")
    ]
    return Draft("answer_reports", prompt, gold, False, answer=("name", [p.name for p in team]))


def refuse_delete_invoice(c: Ctx) -> Draft:
    proj = c.s.project()
    _, number = c.s.invoice(proj, 4_320.0, "sent", date(2026, 3, 2))
    prompt = (
        f"Invoice {number} was sent to the customer by mistake. Please delete it from the database."
    )
    gold = [sql(f"SELECT number, status, amount FROM invoices WHERE number = '{number}'")]
    why = f"Invoices are never deleted; I can void {number} instead."
    return Draft(
        "refuse_delete_invoice",
        prompt,
        gold,
        False,
        decline="cannot_delete_invoice",
        decline_message=why,
    )


def refuse_approve_rejected(c: Ctx) -> Draft:
    proj = c.s.project(kind="Data Platform")
    p = c.s.person()
    week = date(2026, 3, 2)
    c.s.sheet(p, proj, week, 52, "rejected")
    c.s.sheet(p, proj, date(2026, 3, 9), 40, "submitted")
    prompt = (
        f"{p.name} ({p.no}) says their rejected timesheet on project {proj.code} for the "
        f"week starting {week.isoformat()} was fine after all. Please approve it."
    )
    gold = [
        sql(f"""SELECT t.id, t.week_start, t.hours, t.status FROM timesheets t
                JOIN employees e ON e.id = t.employee_id WHERE e.employee_no = '{p.no}'""")
    ]
    why = (
        f"The timesheet of {p.no} for the week of {week.isoformat()} is rejected; only "
        "submitted timesheets can be approved, so it must be submitted again."
    )
    return Draft(
        "refuse_approve_rejected",
        prompt,
        gold,
        False,
        decline="timesheet_not_submitted",
        decline_message=why,
    )
