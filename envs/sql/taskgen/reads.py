"""Question stories: the gold only reads, then submits the answer (one value, or one list).

Every answer comes from rows the story draws (its own people, hours, salaries, customers), so
answers vary from task to task; each story also seeds look-alikes (a namesake, someone on leave,
a future salary row, a paid invoice) that a query skipping a condition would count.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from envs.sql.taskgen.kit import (
    DEPT_NAMES,
    LIST,
    MONTHS,
    Ctx,
    Draft,
    Results,
    describe,
    mondays_of,
    month_label,
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
    rng = c.s.rng
    # Any of the eight departments: a variant's short list made one name recur across tasks.
    code = rng.choice(tuple(DEPT_NAMES))
    name = DEPT_NAMES[code]
    for _ in range(rng.randint(1, 7)):
        c.s.person(code, title="Specialist")
    for status in rng.sample(("on_leave", "terminated", "on_leave", "terminated"), 2):
        c.s.person(code, status=status, title="Specialist")
        if status == "terminated":
            c.s.rows["employees"][-1]["termination_date"] = c.s.day(
                date(2025, 6, 1), date(2026, 3, 13)
            ).isoformat()
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
    rng = c.s.rng
    dept = rng.choice((("DATA", "SALES", "ENG", "OPS"), ("DEL", "FIN", "DES"))[c.k])
    lead = c.s.person(dept, title="Team Lead", salary=None)
    p = c.s.person(dept, manager_id=lead.id, title="Analyst", salary=None)
    # A namesake in another team, with another manager: only the employee number tells them apart.
    other_lead = c.s.person(dept, title="Team Lead", salary=None)
    c.s.person(dept, manager_id=other_lead.id, title="Analyst", salary=None, name=(p.first, p.last))
    prompt = f"Who is the manager of {p.name} (employee {p.no})? I need their full name."
    gold = [
        sql(f"""SELECT m.first_name || ' ' || m.last_name FROM employees e
                    JOIN employees m ON m.id = e.manager_id WHERE e.employee_no = '{p.no}'""")
    ]
    return Draft("answer_manager", prompt, gold, False, answer_from=_name)


def answer_top_hours(c: Ctx) -> Draft:
    rng = c.s.rng
    proj = c.s.project(kind=rng.choice(("Pricing Engine", "Checkout Revamp", "Data Lake")))
    first, end = rng.choice(MONTHS[1:])
    weeks = mondays_of(first, end)
    team = [c.s.person() for _ in range(rng.randint(3, 4))]
    while True:  # hours per person and week, until one person's total is the clear top
        plan = [[rng.choice((0, 8, 12, 16, 24, 32, 40)) for _ in weeks] for _ in team]
        totals = sorted((sum(h) for h in plan), reverse=True)
        if totals[0] > totals[1]:
            break
    for p, hours in zip(team, plan, strict=True):
        for week, h in zip(weeks, hours, strict=True):
            if h:
                c.s.sheet(p, proj, week, h)
        # The week after the month: outside the question (would change the ranking if counted).
        c.s.sheet(p, proj, end + timedelta(days=(7 - end.weekday()) % 7), 40)
    prompt = (
        f"Who booked the most hours on project {proj.code} in weeks starting in "
        f"{month_label(first)}? Give me the person's name."
    )
    gold = [
        describe("timesheets"),
        sql(f"""SELECT e.first_name || ' ' || e.last_name AS who, SUM(t.hours) AS total
                FROM timesheets t JOIN employees e ON e.id = t.employee_id
                JOIN projects p ON p.id = t.project_id
                WHERE p.code = '{proj.code}' AND t.week_start >= '{first.isoformat()}'
                AND t.week_start < '{end.isoformat()}'
                GROUP BY e.id ORDER BY total DESC LIMIT 2"""),
    ]
    return Draft("answer_top_hours", prompt, gold, False, answer_from=_top_name)


def answer_unpaid(c: Ctx) -> Draft:
    """The customer owing most: a new customer's sent invoices, beside another new customer
    whose larger total is paid or still a draft (not owed)."""
    rng = c.s.rng
    owes, owes_name = c.s.customer()
    other, _ = c.s.customer()
    mine = c.s.project(customer_id=owes)
    theirs = c.s.project(customer_id=other)
    owed = 0.0
    for _ in range(rng.randint(2, 3)):
        amount = float(rng.randrange(150_000, 400_000, 40))
        owed += amount
        c.s.invoice(mine, amount, "sent", c.s.day(date(2026, 1, 5), date(2026, 3, 6)))
    c.s.invoice(mine, float(rng.randrange(20_000, 90_000, 40)), "paid", date(2025, 12, 5))
    for status in ("paid", "draft", "sent"):
        amount = owed * 0.7 if status == "sent" else owed * rng.uniform(0.8, 1.3)
        c.s.invoice(theirs, round(amount, 2), status, date(2026, 1, 12))
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
    assert owes_name
    return Draft("answer_unpaid", prompt, gold, False, answer_from=_top_name)


def answer_top_salary(c: Ctx) -> Draft:
    """The best-paid active employee by current salary; a terminated colleague and one whose
    higher salary only starts after today are seeded beside them."""
    rng = c.s.rng
    code = rng.choice((("DATA", "ENG", "SALES"), ("DEL", "FIN", "OPS"))[c.k])
    name = DEPT_NAMES[code]
    top = float(rng.randrange(260_000, 340_000, 100))
    c.s.person(code, title="Principal", salary=top)
    c.s.person(code, title="Principal", salary=top + 20_000, status="terminated")
    c.s.rows["employees"][-1]["termination_date"] = "2026-01-30"
    c.s.person(code, title="Principal", salary=top - 15_000)
    later = c.s.b.add(
        "salaries",
        employee_id=c.s.rows["employees"][-1]["id"],
        effective_date=c.s.day(date(2026, 3, 17), date(2026, 6, 1)).isoformat(),
        amount=top + 30_000,
        reason="promotion",
    )
    assert later
    c.s.person(code, title="Principal", salary=top - 8_000, status="on_leave")
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


def answer_reports(c: Ctx) -> Draft:
    """A list answer: the active direct reports of a story lead (former ones left out)."""
    rng = c.s.rng
    dept = rng.choice(("ENG", "DATA", "DEL", "DES"))
    lead = c.s.person(dept, title="Engineering Manager", salary=110_000.0)
    team = [c.s.person(dept, manager_id=lead.id) for _ in range(rng.randint(2, 4))]
    c.s.person(dept, manager_id=lead.id, status="terminated")
    c.s.rows["employees"][-1]["termination_date"] = c.s.day(
        date(2025, 9, 1), date(2026, 3, 13)
    ).isoformat()
    if rng.random() < 0.5:
        c.s.person(dept, manager_id=lead.id, status="on_leave")
    # The lead's namesake in another department, with reports of their own.
    twin = c.s.person("OPS" if dept != "OPS" else "HR", name=(lead.first, lead.last))
    c.s.person(twin_dept(dept), manager_id=twin.id)
    prompt = (
        f"Which active employees report directly to {lead.name} ({lead.no})? List their "
        "full names; people on leave or terminated don't count."
    )
    gold = [
        sql(f"""SELECT e.first_name || ' ' || e.last_name, e.status FROM employees e
                JOIN employees m ON m.id = e.manager_id WHERE m.employee_no = '{lead.no}'""")
    ]
    return Draft("answer_reports", prompt, gold, False, answer=("name", [p.name for p in team]))


def twin_dept(dept: str) -> str:
    return "OPS" if dept != "OPS" else "HR"
