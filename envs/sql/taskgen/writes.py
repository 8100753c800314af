"""Single-request write stories: look first, then change exactly the rows the colleague means."""

from __future__ import annotations

from datetime import date

from envs.sql.taskgen.kit import DEPT_NAMES, Ctx, Draft, describe, sql

FEB_WEEKS = [date(2026, 2, 2 + 7 * n) for n in range(4)]


def offboard(c: Ctx) -> Draft:
    p = c.s.person(("ENG", "DES", "SALES")[c.k])
    left = ("2026-03-13", "2026-03-16", "2026-02-27")[c.k]
    who = f"{p.name} ({p.no})" if c.k != 1 else p.name
    prompt = f"{who} left the company; their last day was {left}. Please offboard them."
    gold = [
        sql(f"""SELECT id, employee_no, status FROM employees
                WHERE first_name = '{p.first}' AND last_name = '{p.last}'"""),
        sql(f"""UPDATE employees SET status = 'terminated', termination_date = '{left}'
                WHERE employee_no = '{p.no}'"""),
    ]
    return Draft("offboard", prompt, gold, True)


def give_raise(c: Ctx) -> Draft:
    pct, reason, salary = (
        (5, "merit", 72_000.0),
        (8, "promotion", 91_500.0),
        (3, "adjustment", 58_250.0),
    )[c.k]
    p = c.s.person("DATA", title="Data Scientist", salary=salary)
    article = "an" if pct == 8 else "a"
    prompt = (
        f"Please record {article} {pct}% {reason} raise for {p.name} ({p.no}), "
        "effective 2026-04-01."
    )
    gold = [
        describe("salaries"),
        sql(f"""SELECT s.effective_date, s.amount FROM salaries s
                JOIN employees e ON e.id = s.employee_id WHERE e.employee_no = '{p.no}'
                ORDER BY s.effective_date DESC"""),
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                VALUES ({p.id}, '2026-04-01', {round(salary * (1 + pct / 100), 2)}, '{reason}')"""),
    ]
    return Draft("raise", prompt, gold, True)


def fix_emails(c: Ctx) -> Draft:
    dept = ("OPS", "HR")[c.k]
    people = [c.s.person(dept, title="Specialist") for _ in range(3)]
    bad = [f"{p.first}.{p.last}@Acme-Consulting.eu" for p in people[:2]]
    bad[1] = f"  {bad[1].lower()} " if c.k else bad[1].upper()
    for row, email in zip(c.s.rows["employees"], bad, strict=False):
        row["email"] = email
    prompt = (
        "Some employee emails were imported with upper-case letters or stray spaces. "
        "Please normalise every employee email in the database to lower case with no "
        "leading or trailing spaces."
    )
    gold = [
        sql("SELECT employee_no, email FROM employees WHERE email <> LOWER(TRIM(email))"),
        sql("UPDATE employees SET email = LOWER(TRIM(email)) WHERE email <> LOWER(TRIM(email))"),
    ]
    return Draft("fix_emails", prompt, gold, True)


def approve_week(c: Ctx) -> Draft:
    proj = c.s.project(kind="Mobile App")
    team = [c.s.person() for _ in range(3)]
    week = date(2026, 3, 9)
    for n, p in enumerate(team):
        c.s.sheet(p, proj, week, 32 + 4 * n, "submitted")
        c.s.sheet(p, proj, date(2026, 3, 2), 40, "approved")
    c.s.sheet(team[0], proj, date(2026, 3, 16), 8, "submitted")  # next week: not asked
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
    proj = c.s.project(kind="Cloud Migration")
    team = [c.s.person() for _ in range(3)]
    limit = 45
    for n, p in enumerate(team):
        c.s.sheet(p, proj, date(2026, 3, 9), (50, 44, 56)[n], "submitted")
        c.s.sheet(p, proj, date(2026, 3, 2), (48, 40, 36)[n], "approved")
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
    proj = c.s.project()
    _, number = c.s.invoice(proj, 12_480.0, "sent")
    c.s.invoice(proj, 7_200.0, "sent", date(2026, 3, 5))
    paid = ("2026-03-12", "2026-03-16")[c.k]
    prompt = f"The customer paid invoice {number} on {paid}. Please record the payment."
    gold = [
        sql(f"SELECT number, status, amount FROM invoices WHERE number = '{number}'"),
        sql(f"""UPDATE invoices SET status = 'paid', paid_date = '{paid}'
                WHERE number = '{number}'"""),
    ]
    return Draft("mark_paid", prompt, gold, True)


def void_invoice(c: Ctx) -> Draft:
    proj = c.s.project(rate=110.0)
    team = [c.s.person() for _ in range(2)]
    iid, number = c.s.invoice(proj, 0.0, ("draft", "sent")[c.k], date(2026, 3, 5))
    hours = 0.0
    for p in team:
        for week in FEB_WEEKS[:2]:
            c.s.sheet(p, proj, week, 20, "invoiced", invoice_id=iid)
            hours += 20
    c.s.rows["invoices"][0]["amount"] = hours * proj.rate
    prompt = (
        f"Invoice {number} went out with the wrong hours. Please void it; its timesheets "
        "should go back to approved so they can be billed again."
    )
    gold = [
        sql(f"SELECT id, number, status FROM invoices WHERE number = '{number}'"),
        sql(f"SELECT id, status FROM timesheets WHERE invoice_id = {iid}"),
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {iid}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{number}'"),
    ]
    return Draft("void_invoice", prompt, gold, True)


def invoice_statements(code: str, number: str, issued: str, due: str) -> list[dict]:
    period = "t.week_start >= '2026-02-01' AND t.week_start < '2026-03-01'"
    return [
        sql(f"""SELECT SUM(t.hours), p.hourly_rate FROM timesheets t JOIN projects p
                ON p.id = t.project_id WHERE p.code = '{code}' AND t.status = 'approved'
                AND t.billable = 1 AND {period}"""),
        sql(f"""INSERT INTO invoices (number, customer_id, project_id, issue_date, due_date,
                amount, status) SELECT '{number}', p.customer_id, p.id, '{issued}', '{due}',
                ROUND(SUM(t.hours) * p.hourly_rate, 2), 'draft' FROM projects p
                JOIN timesheets t ON t.project_id = p.id WHERE p.code = '{code}'
                AND t.status = 'approved' AND t.billable = 1 AND {period}"""),
        sql(f"""UPDATE timesheets AS t SET status = 'invoiced',
                invoice_id = (SELECT id FROM invoices WHERE number = '{number}')
                WHERE t.project_id = (SELECT id FROM projects WHERE code = '{code}')
                AND t.status = 'approved' AND t.billable = 1 AND {period}"""),
    ]


def billable_month(c: Ctx, rate: float) -> tuple:
    proj = c.s.project(rate=rate, kind="Analytics Dashboard")
    team = [c.s.person() for _ in range(2)]
    for n, p in enumerate(team):
        for w, week in enumerate(FEB_WEEKS):
            status = "submitted" if (n, w) == (1, 3) else "approved"
            c.s.sheet(p, proj, week, 16 + 8 * ((n + w) % 3), status)
        c.s.sheet(p, proj, date(2026, 3, 2), 24, "approved")  # March: not this invoice
    c.s.sheet(team[0], proj, date(2026, 1, 26), 12, "approved", billable=False)
    return proj, team


def invoice_project(c: Ctx) -> Draft:
    proj, _ = billable_month(c, (135.0, 150.0)[c.k])
    number = f"INV-2026-{9000 + c.s.index * 10 + 5}"
    prompt = (
        f"Please invoice project {proj.code} for February 2026 (timesheets whose week "
        f"starts in February): create invoice {number}, issued 2026-03-16, as a draft, and "
        "mark the billed timesheets."
    )
    gold = [
        describe("invoices"),
        *invoice_statements(proj.code, number, "2026-03-16", "2026-04-15"),
    ]
    if c.k == 0:
        gold.insert(1, describe("timesheets"))
        gold.append(
            sql(f"""SELECT number, amount, status FROM invoices
                            WHERE number = '{number}'""")
        )
    return Draft("invoice_project", prompt, gold, True)


def archive_rejected(c: Ctx) -> Draft:
    proj = c.s.project(kind="Customer Portal")
    team = [c.s.person() for _ in range(2)]
    for n, p in enumerate(team):
        c.s.sheet(p, proj, date(2025, 11, 3 + 7 * n), 30, "rejected")
        c.s.sheet(p, proj, date(2025, 12, 1 + 7 * n), 20, "approved")
        c.s.sheet(p, proj, date(2026, 1, 12 + 7 * n), 25, "rejected")  # too recent
    cut = "2026-01-01"
    prompt = (
        f"Please archive the rejected timesheets of project {proj.code} for weeks "
        f"starting before {cut}."
    )
    where = f"project_id = {proj.id} AND status = 'rejected' AND week_start < '{cut}'"
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
    lead = c.s.person("ENG", title="Staff Engineer", salary=120_000.0)
    new = c.s.person("ENG", title="Staff Engineer", salary=118_000.0)
    for _ in range(3):
        c.s.person("ENG", manager_id=lead.id)
    day = ("2026-03-16", "2026-03-20")[c.k]
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
    dept, title = (("DATA", "Data Scientist"), ("DEL", "Project Manager"))[c.k]
    p = c.s.person("ENG")
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
    dept, title, salary = (("DES", "Product Designer", 61_000), ("FIN", "Accountant", 64_500))[c.k]
    first, last = c.s.names.pop()
    no = f"E{90000 + c.s.index * 10 + 9}"
    email = f"{first}.{last}@acme-consulting.eu".lower()
    prompt = (
        f"New hire: {first} {last}, employee number {no}, email {email}, joins "
        f"{DEPT_NAMES[dept]} as {title} on 2026-04-01, reporting to the department's head "
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
                '2026-04-01', 'active')"""),
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                SELECT id, '2026-04-01', {salary}, 'hire' FROM employees
                WHERE employee_no = '{no}'"""),
    ]
    return Draft("onboard", prompt, gold, True)


def cost_of_living(c: Ctx) -> Draft:
    prompt = (
        "Please apply a 3% cost-of-living adjustment, effective 2026-04-01, to every "
        "active employee of the Operations department (not those on leave)."
    )
    gold = [
        describe("salaries"),
        sql("""SELECT e.employee_no, e.status FROM employees e JOIN departments d
               ON d.id = e.department_id WHERE d.code = 'OPS'"""),
        sql("""INSERT INTO salaries (employee_id, effective_date, amount, reason)
               SELECT e.id, '2026-04-01', ROUND(s.amount * 1.03, 2), 'adjustment'
               FROM employees e JOIN departments d ON d.id = e.department_id
               JOIN salaries s ON s.employee_id = e.id
               WHERE d.code = 'OPS' AND e.status = 'active'
               AND s.effective_date = (SELECT MAX(s2.effective_date) FROM salaries s2
                   WHERE s2.employee_id = e.id AND s2.effective_date <= '2026-03-16')"""),
    ]
    return Draft("cost_of_living", prompt, gold, True)
