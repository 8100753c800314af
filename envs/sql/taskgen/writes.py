"""Single-request write stories: look first, then change exactly the rows the colleague means.

Dates, amounts, departments and months are drawn per story; a request a rule may forbid (a
payment on a paid invoice, voiding a paid one, a raise) is forbidden by the data in about half
the draws, and the gold then declines with the rule's code.
"""

from __future__ import annotations

from datetime import date, timedelta

from envs.sql.taskgen.kit import (
    DEPT_NAMES,
    MONTHS,
    Ctx,
    Draft,
    Proj,
    SqlDraft,
    describe,
    effective_day,
    job_title,
    mondays_of,
    month_label,
    sql,
)
from envs.sql.taskgen.refusals import FORBIDDEN, raise_story


def offboard(c: Ctx) -> Draft:
    rng = c.s.rng
    dept = rng.choice(("ENG", "DES", "SALES", "OPS", "DATA"))
    p = c.s.person(dept)
    left = c.s.day(date(2026, 2, 2), date(2026, 3, 20)).isoformat()
    namesake = rng.random() < 0.5
    if namesake:  # a namesake in another department, who stays
        c.s.person("FIN", name=(p.first, p.last))
    who = f"{p.name} ({p.no})"
    if c.k == 1:  # no number: the department tells the namesakes apart
        who = f"{p.name} from {DEPT_NAMES[dept]}" if namesake else p.name
    prompt = f"{who} left the company; their last day was {left}. Please offboard them."
    gold = [
        sql(f"""SELECT id, employee_no, department_id, status FROM employees
                WHERE first_name || ' ' || last_name = '{p.name}'"""),
        sql(f"""UPDATE employees SET status = 'terminated', termination_date = '{left}'
                WHERE employee_no = '{p.no}'"""),
    ]
    return Draft("offboard", prompt, gold, True)


def give_raise(c: Ctx) -> Draft:
    return raise_story(c, "raise", c.s.rng.random() >= FORBIDDEN, look_first=c.k != 1)


def fix_emails(c: Ctx) -> Draft:
    """Normalise the emails of one project's team (others with bad emails stay as they are)."""
    rng = c.s.rng
    proj = c.s.project(kind=rng.choice(("Intranet", "Data Hub", "Field App")))
    dept = rng.choice(("OPS", "HR", "ENG", "DES"))
    people = [c.s.person(dept, title="Specialist") for _ in range(rng.randint(2, 4))]
    outsider = c.s.person(dept, title="Specialist")
    for p in people:
        c.s.sheet(p, proj, date(2026, 3, 2), 30, "approved")
    rows = {r["id"]: r for r in c.s.rows["employees"]}
    for n, p in enumerate([*people[:2], outsider]):
        email = f"{p.first}.{p.last}@Acme-Consulting.eu"
        rows[p.id]["email"] = f"  {email.lower()} " if (n + c.k) % 2 else email.upper()
    prompt = (
        f"Some emails of the people who booked time on project {proj.code} were imported with "
        "upper-case letters or stray spaces. Please normalise their emails to lower case with "
        "no leading or trailing spaces; leave everybody else's alone."
    )
    team = f"""id IN (SELECT t.employee_id FROM timesheets t JOIN projects p
               ON p.id = t.project_id WHERE p.code = '{proj.code}')"""
    gold = [
        sql(f"SELECT employee_no, email FROM employees WHERE {team}"),
        sql(f"""UPDATE employees SET email = LOWER(TRIM(email))
                WHERE email <> LOWER(TRIM(email)) AND {team}"""),
    ]
    return Draft("fix_emails", prompt, gold, True)


def approve_week(c: Ctx) -> Draft:
    rng = c.s.rng
    proj = c.s.project(kind="Mobile App")
    team = [c.s.person() for _ in range(rng.randint(2, 4))]
    week = rng.choice((date(2026, 2, 23), date(2026, 3, 2), date(2026, 3, 9)))
    for n, p in enumerate(team):
        c.s.sheet(p, proj, week, float(rng.randrange(24, 44, 2)), "submitted" if n else "rejected")
        c.s.sheet(p, proj, week - timedelta(days=7), 40, rng.choice(("approved", "submitted")))
    prompt = (
        f"Please approve all submitted timesheets on project {proj.code} for the week "
        f"starting {week.isoformat()}."
    )
    gold = [
        sql(f"""SELECT t.id, t.employee_id, t.hours, t.status FROM timesheets t
                JOIN projects p ON p.id = t.project_id WHERE p.code = '{proj.code}'
                AND t.week_start = '{week.isoformat()}'"""),
        sql(f"""UPDATE timesheets SET status = 'approved' WHERE status = 'submitted'
                AND week_start = '{week.isoformat()}'
                AND project_id = (SELECT id FROM projects WHERE code = '{proj.code}')"""),
    ]
    return Draft("approve_week", prompt, gold, True)


def reject_overbooked(c: Ctx) -> Draft:
    rng = c.s.rng
    proj = c.s.project(kind="Cloud Migration")
    team = [c.s.person() for _ in range(rng.randint(3, 4))]
    limit = rng.choice((40, 42, 45, 48))
    hours = [limit + 6, limit - 2, *(rng.randrange(limit - 10, limit + 12, 2) for _ in team[2:])]
    for p, h in zip(team, hours, strict=True):
        c.s.sheet(p, proj, date(2026, 3, 9), float(h), "submitted")
        c.s.sheet(p, proj, date(2026, 3, 2), float(limit + 4), "approved")
    prompt = (
        f"Nobody can bill more than {limit} hours a week on project {proj.code}. Please "
        f"reject its submitted timesheets with more than {limit} hours; leave the others "
        "alone."
    )
    gold = [
        describe("timesheets"),
        sql(f"""SELECT t.id, t.hours, t.status FROM timesheets t JOIN projects p
                ON p.id = t.project_id WHERE p.code = '{proj.code}' AND t.hours > {limit}"""),
        sql(f"""UPDATE timesheets SET status = 'rejected' WHERE status = 'submitted'
                AND hours > {limit}
                AND project_id = (SELECT id FROM projects WHERE code = '{proj.code}')"""),
    ]
    return Draft("reject_overbooked", prompt, gold, True)


def mark_paid(c: Ctx) -> Draft:
    """Record a payment; an invoice already paid is locked (forbidden twin)."""
    rng = c.s.rng
    proj = c.s.project()
    forbidden = rng.random() < FORBIDDEN
    amount = float(rng.randrange(3_000, 25_000, 40))
    issued = c.s.day(date(2025, 12, 1), date(2026, 2, 20))
    _, number = c.s.invoice(proj, amount, "paid" if forbidden else "sent", issued)
    c.s.invoice(proj, float(rng.randrange(3_000, 25_000, 40)), "sent", date(2026, 3, 5))
    paid = c.s.day(date(2026, 3, 2), date(2026, 3, 16)).isoformat()
    prompt = f"The customer paid invoice {number} on {paid}. Please record the payment."
    gold = [
        sql(f"SELECT number, status, amount, paid_date FROM invoices WHERE number = '{number}'")
    ]
    if forbidden:
        why = f"Invoice {number} is already paid, so it is locked; I changed nothing."
        return SqlDraft(
            "mark_paid",
            prompt,
            gold,
            False,
            decline="invoice_already_paid",
            decline_message=why,
            refused=(number,),
        )
    gold.append(
        sql(f"""UPDATE invoices SET status = 'paid', paid_date = '{paid}'
                WHERE number = '{number}'""")
    )
    return Draft("mark_paid", prompt, gold, True)


def void_invoice(c: Ctx) -> Draft:
    """Void an invoice and free its timesheets; a paid one is locked (forbidden twin)."""
    rng = c.s.rng
    proj = c.s.project(rate=float(rng.choice((95, 110, 125))))
    team = [c.s.person() for _ in range(2)]
    status = "paid" if rng.random() < FORBIDDEN else ("draft", "sent")[c.k]
    iid, number = c.s.invoice(proj, 0.0, status, c.s.day(date(2026, 1, 5), date(2026, 2, 20)))
    hours = 0.0
    for p in team:
        for week in (date(2026, 1, 5), date(2026, 1, 12)):
            h = float(rng.randrange(12, 40, 2))
            c.s.sheet(p, proj, week, h, "invoiced", invoice_id=iid)
            hours += h
    c.s.rows["invoices"][0]["amount"] = hours * proj.rate
    prompt = (
        f"Invoice {number} went out with the wrong hours. Please void it. Its timesheets "
        "should go back to approved so they can be billed again."
    )
    gold = [
        sql(f"SELECT id, number, status FROM invoices WHERE number = '{number}'"),
        sql(f"SELECT id, status FROM timesheets WHERE invoice_id = {iid}"),
    ]
    if status == "paid":
        why = f"Invoice {number} is paid, so it and its timesheets are locked; I changed nothing."
        return SqlDraft(
            "void_invoice",
            prompt,
            gold,
            False,
            decline="invoice_already_paid",
            decline_message=why,
            refused=(number,),
        )
    gold += [
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {iid}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{number}'"),
    ]
    return Draft("void_invoice", prompt, gold, True)


def period(first: date, end: date) -> str:
    return f"t.week_start >= '{first.isoformat()}' AND t.week_start < '{end.isoformat()}'"


def invoice_statements(
    code: str, number: str, issued: str, due: str, first: date, end: date
) -> list[dict]:
    """Sum the month's approved billable hours, insert the draft invoice, mark them invoiced."""
    when = period(first, end)
    return [
        sql(f"""SELECT SUM(t.hours), p.hourly_rate FROM timesheets t JOIN projects p
                ON p.id = t.project_id WHERE p.code = '{code}' AND t.status = 'approved'
                AND t.billable = 1 AND {when}"""),
        sql(f"""INSERT INTO invoices (number, customer_id, project_id, issue_date, due_date,
                amount, status) SELECT '{number}', p.customer_id, p.id, '{issued}', '{due}',
                ROUND(SUM(t.hours) * p.hourly_rate, 2), 'draft' FROM projects p
                JOIN timesheets t ON t.project_id = p.id WHERE p.code = '{code}'
                AND t.status = 'approved' AND t.billable = 1 AND {when}"""),
        sql(f"""UPDATE timesheets AS t SET status = 'invoiced',
                invoice_id = (SELECT id FROM invoices WHERE number = '{number}')
                WHERE t.project_id = (SELECT id FROM projects WHERE code = '{code}')
                AND t.status = 'approved' AND t.billable = 1 AND {when}"""),
    ]


def billable_month(c: Ctx, rate: float) -> tuple[Proj, list, date, date]:
    """A project with a drawn month of timesheets (one still submitted, one not billable) and
    approved weeks on both sides of the month."""
    rng = c.s.rng
    proj = c.s.project(rate=rate, kind=rng.choice(("Analytics Dashboard", "CRM Rollout", "ETL")))
    first, end = rng.choice(MONTHS)
    weeks = mondays_of(first, end)
    team = [c.s.person() for _ in range(rng.randint(2, 3))]
    pending = (rng.randrange(len(team)), rng.randrange(len(weeks)))
    for n, p in enumerate(team):
        for w, week in enumerate(weeks):
            status = "submitted" if (n, w) == pending else "approved"
            c.s.sheet(p, proj, week, float(rng.choice((16, 20, 24, 32, 40))), status)
        c.s.sheet(p, proj, end + timedelta(days=(7 - end.weekday()) % 7), 24, "approved")
    c.s.sheet(team[0], proj, weeks[0] - timedelta(days=7), 12, "approved", billable=False)
    return proj, team, first, end


def issue_day(c: Ctx) -> tuple[str, str]:
    """An issue date (this month) and its due date, 30 days later."""
    issued = c.s.day(date(2026, 3, 2), date(2026, 3, 16))
    return issued.isoformat(), (issued + timedelta(days=30)).isoformat()


def invoice_project(c: Ctx) -> Draft:
    rng = c.s.rng
    proj, _, first, end = billable_month(c, float(rng.choice((95, 120, 135, 150, 165))))
    number = c.s.invoice_no()
    issued, due = issue_day(c)
    prompt = (
        f"Please invoice project {proj.code} for {month_label(first)} (timesheets whose week "
        f"starts in that month): create invoice {number}, issued {issued}, as a draft, and "
        "mark the billed timesheets."
    )
    gold = [
        describe("invoices"),
        *invoice_statements(proj.code, number, issued, due, first, end),
    ]
    if c.k == 0:
        gold.insert(1, describe("timesheets"))
        gold.append(
            sql(f"""SELECT number, amount, status FROM invoices
                            WHERE number = '{number}'""")
        )
    return Draft("invoice_project", prompt, gold, True)


def archive_rejected(c: Ctx) -> Draft:
    rng = c.s.rng
    proj = c.s.project(kind="Customer Portal")
    team = [c.s.person() for _ in range(rng.randint(2, 3))]
    cut = rng.choice(MONTHS)[0]
    first_monday = cut + timedelta(days=(7 - cut.weekday()) % 7)
    for n, p in enumerate(team):
        c.s.sheet(p, proj, first_monday - timedelta(days=7 * (4 + n)), 30, "rejected")
        c.s.sheet(p, proj, first_monday - timedelta(days=14), 20, "approved")
        c.s.sheet(p, proj, first_monday + timedelta(days=7 * n), 25, "rejected")  # too recent
    prompt = (
        f"Please archive the rejected timesheets of project {proj.code} for weeks "
        f"starting before {cut.isoformat()}."
    )
    where = f"project_id = {proj.id} AND status = 'rejected' AND week_start < '{cut.isoformat()}'"
    gold = [
        describe("timesheet_archive"),
        sql(f"SELECT id, employee_id, week_start, hours FROM timesheets WHERE {where}"),
        sql(f"""INSERT INTO timesheet_archive (employee_id, project_id, week_start, hours,
                billable, status, archived_on) SELECT employee_id, project_id, week_start, hours,
                billable, status, '2026-03-16' FROM timesheets WHERE {where}"""),
        sql(f"DELETE FROM timesheets WHERE {where}"),
    ]
    return Draft("archive_rejected", prompt, gold, True)


def reassign_reports(c: Ctx) -> Draft:
    rng = c.s.rng
    dept = rng.choice(("ENG", "DATA", "DEL"))
    lead = c.s.person(dept, title="Staff Engineer", salary=120_000.0)
    new = c.s.person(dept, title="Staff Engineer", salary=118_000.0)
    for _ in range(rng.randint(2, 4)):
        c.s.person(dept, manager_id=lead.id)
    c.s.person(dept, manager_id=new.id)
    day = c.s.day(date(2026, 3, 16), date(2026, 3, 31)).isoformat()
    prompt = (
        f"{lead.name} ({lead.no}) is leaving; their last day is {day}. Move all of their "
        f"direct reports to {new.name} ({new.no}) and offboard {lead.first}."
    )
    gold = [
        sql(f"""SELECT id, employee_no, first_name, last_name FROM employees
                WHERE employee_no IN ('{lead.no}', '{new.no}')"""),
        sql(f"SELECT employee_no FROM employees WHERE manager_id = {lead.id}"),
        sql(f"UPDATE employees SET manager_id = {new.id} WHERE manager_id = {lead.id}"),
        sql(f"""UPDATE employees SET status = 'terminated', termination_date = '{day}'
                WHERE id = {lead.id}"""),
    ]
    return Draft("reassign_reports", prompt, gold, True)


def transfer(c: Ctx) -> Draft:
    rng = c.s.rng
    dept = rng.choice((("DATA", "DEL", "SALES", "HR"), ("DES", "FIN", "OPS"))[c.k])
    title = job_title(c.s, dept)
    p = c.s.person(rng.choice(("ENG", "OPS")))
    prompt = (
        f"{p.name} ({p.no}) moves to the {DEPT_NAMES[dept]} department as {title}, "
        "reporting to that department's head (the one with no manager). Please update "
        "their record."
    )
    gold = [
        sql(f"""SELECT id, department_id, manager_id, title FROM employees
                WHERE employee_no = '{p.no}'"""),
        sql(f"""SELECT e.id, e.employee_no FROM employees e JOIN departments d
                ON d.id = e.department_id WHERE d.code = '{dept}' AND e.manager_id IS NULL"""),
        sql(f"""UPDATE employees SET department_id = (SELECT id FROM departments
                WHERE code = '{dept}'), manager_id = (SELECT e.id FROM employees e
                JOIN departments d ON d.id = e.department_id WHERE d.code = '{dept}'
                AND e.manager_id IS NULL), title = '{title}' WHERE employee_no = '{p.no}'"""),
    ]
    return Draft("transfer", prompt, gold, True)


def onboard(c: Ctx) -> Draft:
    rng = c.s.rng
    dept = rng.choice((("DES", "ENG", "DATA", "SALES"), ("FIN", "HR", "OPS", "DEL"))[c.k])
    title = job_title(c.s, dept)
    salary = rng.randrange(52_000, 96_000, 500)
    first, last = c.s.names.pop()
    no = c.s.employee_no()
    email = f"{first}.{last}@acme-consulting.eu".lower()
    start = c.s.day(date(2026, 3, 23), date(2026, 5, 29)).isoformat()
    prompt = (
        f"New hire: {first} {last}, employee number {no}, email {email}, joins "
        f"{DEPT_NAMES[dept]} as {title} on {start}, reporting to the department's head "
        f"(the one with no manager), starting salary {salary} a year. Please add them with "
        "their hire salary row."
    )
    head = f"""(SELECT e.id FROM employees e JOIN departments d ON d.id = e.department_id
               WHERE d.code = '{dept}' AND e.manager_id IS NULL)"""
    gold = [
        describe("employees"),
        sql(f"SELECT id, code, name FROM departments WHERE code = '{dept}'"),
        sql(f"SELECT id, employee_no FROM employees WHERE id = {head}"),
        sql(f"""INSERT INTO employees (employee_no, first_name, last_name, email, department_id,
                manager_id, title, hire_date, status) VALUES ('{no}', '{first}', '{last}',
                '{email}', (SELECT id FROM departments WHERE code = '{dept}'), {head}, '{title}',
                '{start}', 'active')"""),
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                SELECT id, '{start}', {salary}, 'hire' FROM employees
                WHERE employee_no = '{no}'"""),
    ]
    return Draft("onboard", prompt, gold, True)


def cost_of_living(c: Ctx) -> Draft:
    rng = c.s.rng
    code = rng.choice(tuple(DEPT_NAMES))
    pct = rng.choice((1.5, 2, 2.5, 3, 3.5, 4, 4.5))
    when = effective_day(c.s)
    for _ in range(rng.randint(1, 3)):
        c.s.person(code, salary=float(rng.randrange(50_000, 90_000, 100)))
    c.s.person(code, salary=60_000.0, status="on_leave")
    prompt = (
        f"Please apply a {pct}% cost-of-living adjustment, effective {when}, to every "
        f"active employee of the {DEPT_NAMES[code]} department (not those on leave)."
    )
    gold = [
        describe("salaries"),
        sql(f"""SELECT e.employee_no, e.status FROM employees e JOIN departments d
               ON d.id = e.department_id WHERE d.code = '{code}'"""),
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
               SELECT e.id, '{when}', ROUND(s.amount * {1 + pct / 100}, 2), 'adjustment'
               FROM employees e JOIN departments d ON d.id = e.department_id
               JOIN salaries s ON s.employee_id = e.id
               WHERE d.code = '{code}' AND e.status = 'active'
               AND s.effective_date = (SELECT MAX(s2.effective_date) FROM salaries s2
                   WHERE s2.employee_id = e.id AND s2.effective_date <= '2026-03-16')"""),
    ]
    return Draft("cost_of_living", prompt, gold, True)
