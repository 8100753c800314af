"""Stories a company rule may forbid: the data decides, never the wording.

Each family draws whether the rows it seeds permit the request (about half the draws): the same
request, from the same phrasing pool, is then carried out by the gold (the allowed twin) or
declined with the rule's code (the forbidden twin). A policy that reads only the request can do
no better than a coin; one that looks at the rows (a hire date, an invoice's status, the current
salary) knows. Look-alikes (a namesake, another invoice of the project) sit beside the rows meant.
"""

from __future__ import annotations

from datetime import date

from envs.sql.taskgen.kit import (
    DEPT_NAMES,
    TODAY,
    Ctx,
    Draft,
    Person,
    SqlDraft,
    Story,
    describe,
    effective_day,
    money,
    sql,
)

# The share of draws whose data forbids the request. Below one half: a forbidden twin is solved by
# its decline alone, so a policy replaying another task's decline would be paid for p*p of a
# family's draws (p = 0.4: 16%); the request's wording still predicts the outcome no better
# than "always act" (60%) or "always decline" (40%), and only the rows tell.
FORBIDDEN = 0.4

# Why a colleague asks to delete something: the same pool whether the rules permit it or not.
DELETE_WHY = (
    "we don't want it in there any more",
    "it should never have been created",
    "it is just clutter now",
    "it was entered by mistake",
)


def _decline(family: str, prompt: str, gold: list, code: str, why: str, record: str) -> Draft:
    """A refusal of one record, named by its key (employee_no, invoice number)."""
    return SqlDraft(
        family, prompt, gold, False, decline=code, decline_message=why, refused=(record,)
    )


def refuse_delete_employee(c: Ctx) -> Draft:
    """Delete an employee record: forbidden, except a hire who has not started yet."""
    rng = c.s.rng
    dept = rng.choice(tuple(DEPT_NAMES))
    allowed = rng.random() >= FORBIDDEN
    salary = float(rng.randrange(48_000, 120_000, 500))
    if allowed:
        hired = c.s.day(date(2026, 3, 23), date(2026, 5, 29))
        p = c.s.person(dept, salary=salary, hired=hired, merit=False)
    else:
        p = c.s.person(dept, salary=salary, hired=c.s.day(date(2021, 1, 4), date(2026, 2, 27)))
        if rng.random() < 0.4:
            c.s.rows["employees"][-1].update(status="terminated", termination_date="2026-03-06")
    if rng.random() < 0.5:  # a namesake whose record is the other case
        other = date(2026, 4, 20) if not allowed else date(2023, 9, 4)
        c.s.person(dept, salary=salary, hired=other, merit=other < TODAY, name=(p.first, p.last))
    prompt = (
        f"Please delete the employee record of {p.name} ({p.no}) from the database; "
        f"{rng.choice(DELETE_WHY)}."
    )
    look = sql(f"""SELECT id, employee_no, hire_date, status FROM employees
                   WHERE employee_no = '{p.no}'""")
    if not allowed:
        why = f"Employees are never deleted and {p.no} has started; I can offboard them instead."
        return _decline(
            "refuse_delete_employee", prompt, [look], "cannot_delete_employee", why, p.no
        )
    gold = [
        look,
        sql(f"SELECT COUNT(*) FROM timesheets WHERE employee_id = {p.id}"),
        sql(f"DELETE FROM salaries WHERE employee_id = {p.id}"),
        sql(f"DELETE FROM employees WHERE employee_no = '{p.no}'"),
    ]
    return Draft("refuse_delete_employee", prompt, gold, True)


def _invoice_case(c: Ctx, status: str, amount: float, *, billed: bool) -> tuple[int, str]:
    """An invoice of a new project in `status` (billing timesheets when `billed`), beside
    another invoice of the same project."""
    proj = c.s.project(rate=float(c.s.rng.choice((95, 110, 120, 135))))
    issued = c.s.day(date(2025, 12, 1), date(2026, 3, 6))
    iid, number = c.s.invoice(proj, amount, status, issued)
    if billed:
        p = c.s.person()
        c.s.sheet(p, proj, date(2025, 11, 3), 20, "invoiced", invoice_id=iid)
    c.s.invoice(proj, amount, c.s.rng.choice(("sent", "paid", "draft")), issued)
    return iid, number


def refuse_paid_invoice(c: Ctx) -> Draft:
    """Delete (k=0) or correct the amount of (k=1) an invoice: a paid one is locked; a sent one
    is never deleted; an empty draft may be deleted; an unpaid one's amount may be corrected."""
    rng = c.s.rng
    amount = float(rng.randrange(2_000, 30_000, 40))
    if c.k == 0:
        status = rng.choices(("draft", "paid", "sent"), (6, 2, 2))[0]
        iid, number = _invoice_case(c, status, amount, billed=False)
        prompt = f"Invoice {number} was a duplicate, please delete it."
    else:
        status = rng.choices(("sent", "draft", "paid"), (4, 2, 4))[0]
        iid, number = _invoice_case(c, status, amount, billed=rng.random() < 0.5)
        fixed = amount - float(rng.randrange(400, 1_600, 40))
        prompt = (
            f"Invoice {number} should have been {money(fixed)}, not {money(amount)}; please "
            "correct the amount."
        )
    look = sql(
        f"SELECT id, number, status, amount, paid_date FROM invoices WHERE number = '{number}'"
    )
    if status == "paid":
        why = f"Invoice {number} is paid, so it is locked and cannot be changed or deleted."
        return _decline("refuse_paid_invoice", prompt, [look], "invoice_already_paid", why, number)
    if c.k == 0 and status == "sent":
        why = f"Invoices are never deleted; {number} was sent, so I can only void it."
        return _decline("refuse_paid_invoice", prompt, [look], "cannot_delete_invoice", why, number)
    if c.k == 0:
        gold = [
            look,
            sql(f"SELECT COUNT(*) FROM timesheets WHERE invoice_id = {iid}"),
            sql(f"DELETE FROM invoices WHERE number = '{number}'"),
        ]
    else:
        gold = [look, sql(f"UPDATE invoices SET amount = {fixed} WHERE number = '{number}'")]
    return Draft("refuse_paid_invoice", prompt, gold, True)


def refuse_delete_invoice(c: Ctx) -> Draft:
    """Delete an invoice: only a draft that bills no timesheets may go; a paid one is locked
    (the first rule of the policy's list that applies)."""
    rng = c.s.rng
    case = rng.choices(("empty", "sent", "billed", "paid"), (6, 1, 1, 2))[0]
    status = case if case in ("sent", "paid") else "draft"
    iid, number = _invoice_case(
        c, status, float(rng.randrange(1_200, 9_000, 40)), billed=case == "billed"
    )
    prompt = f"Invoice {number}: {rng.choice(DELETE_WHY)}. Please delete it from the database."
    gold = [
        sql(f"SELECT id, number, status, amount FROM invoices WHERE number = '{number}'"),
        sql(f"SELECT COUNT(*) FROM timesheets WHERE invoice_id = {iid}"),
    ]
    if case == "paid":
        why = f"Invoice {number} is paid, so it is locked and cannot be deleted."
        return _decline("refuse_delete_invoice", prompt, gold, "invoice_already_paid", why, number)
    if case != "empty":
        why = f"Invoices are never deleted (only an empty draft may go); I can void {number}."
        return _decline("refuse_delete_invoice", prompt, gold, "cannot_delete_invoice", why, number)
    gold.append(sql(f"DELETE FROM invoices WHERE number = '{number}'"))
    return Draft("refuse_delete_invoice", prompt, gold, True)


RAISE_REASONS = ("merit", "promotion", "adjustment")


def raise_story(c: Ctx, family: str, allowed: bool, *, look_first: bool = False) -> Draft:
    """A raise stated as a new amount or an increase (never a percentage): whether it stays
    within 10% of the current salary is in the data. A namesake with another salary may exist."""
    s: Story = c.s
    rng = s.rng
    dept = rng.choice(("DATA", "ENG", "DES", "SALES", "FIN"))
    current = float(rng.randrange(52_000, 140_000, 100))
    p: Person = s.person(dept, salary=current)
    if rng.random() < 0.5:
        s.person(dept, salary=round(current * rng.choice((0.8, 1.15)), -2), name=(p.first, p.last))
    pct = rng.uniform(1.5, 9.3) if allowed else rng.uniform(10.8, 22.0)
    new = round(current * (1 + pct / 100), -2)
    assert (new <= round(current * 1.10, 2)) == allowed
    reason = rng.choice(RAISE_REASONS)
    when = effective_day(s)
    asks = (
        f"Please raise the salary of {p.name} ({p.no}) to {money(new)} a year, effective "
        f"{when} ({reason}).",
        f"Please record a {reason} raise of {money(new - current)} a year for {p.name} "
        f"({p.no}), effective {when}.",
        f"Please set the annual salary of {p.name} ({p.no}) to {money(new)} from {when}; "
        f"it's a {reason} raise.",
    )
    prompt = asks[c.k % len(asks)]
    gold = [
        sql(f"""SELECT s.effective_date, s.amount FROM salaries s
                JOIN employees e ON e.id = s.employee_id WHERE e.employee_no = '{p.no}'
                ORDER BY s.effective_date DESC""")
    ]
    if look_first:
        gold.insert(0, describe("salaries"))
    if not allowed:
        why = (
            f"The raise for {p.no} is above 10% of the current salary and needs the CFO's approval."
        )
        return _decline(family, prompt, gold, "raise_over_limit", why, p.no)
    gold.append(
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                VALUES ({p.id}, '{when}', {new}, '{reason}')""")
    )
    return Draft(family, prompt, gold, True)


def refuse_big_raise(c: Ctx) -> Draft:
    return raise_story(c, "refuse_big_raise", c.s.rng.random() >= FORBIDDEN, look_first=c.k == 1)


def refuse_salary_rewrite(c: Ctx) -> Draft:
    """Fix the latest salary row: history is append-only, except a row not yet in effect."""
    rng = c.s.rng
    current = float(rng.randrange(50_000, 110_000, 100))
    p = c.s.person(rng.choice(("FIN", "HR", "OPS", "DEL")), title="Accountant", salary=current)
    allowed = rng.random() >= FORBIDDEN
    amount = round(current * rng.uniform(1.02, 1.06), -2)
    when = (
        c.s.day(date(2026, 3, 23), date(2026, 6, 30))
        if allowed
        else c.s.day(date(2025, 9, 1), date(2026, 3, 13))
    )
    row = c.s.b.add(
        "salaries", employee_id=p.id, effective_date=when.isoformat(), amount=amount, reason="merit"
    )
    fixed = amount + float(rng.randrange(-900, 1_200, 100) or 300)
    prompt = (
        f"The latest salary row of {p.name} ({p.no}) is wrong: it should say "
        f"{money(fixed)}. Please fix that existing row."
    )
    look = sql(f"""SELECT s.id, s.effective_date, s.amount FROM salaries s
                   JOIN employees e ON e.id = s.employee_id WHERE e.employee_no = '{p.no}'
                   ORDER BY s.effective_date DESC""")
    if not allowed:
        why = (
            f"Salary history is append-only: the {when.isoformat()} row of {p.no} is in effect "
            "and cannot be changed; a new row with a later effective date can correct it."
        )
        return _decline(
            "refuse_salary_rewrite", prompt, [look], "salary_rewrite_forbidden", why, p.no
        )
    gold = [look, sql(f"UPDATE salaries SET amount = {fixed} WHERE id = {row['id']}")]
    return Draft("refuse_salary_rewrite", prompt, gold, True)


def refuse_approve_rejected(c: Ctx) -> Draft:
    """Approve one timesheet: only a submitted one can be approved; one billed on a paid invoice
    is locked (the first rule of the policy's list that applies)."""
    rng = c.s.rng
    proj = c.s.project(kind=rng.choice(("Data Platform", "Mobile App", "Billing Suite")))
    p = c.s.person()
    week = rng.choice((date(2026, 2, 23), date(2026, 3, 2), date(2026, 3, 9)))
    status = rng.choices(("submitted", "rejected", "approved", "invoiced"), (6, 1.5, 0.5, 2))[0]
    paid_id, paid_no = (
        c.s.invoice(proj, 4_000.0, "paid", week) if status == "invoiced" else (None, "")
    )
    sid = c.s.sheet(p, proj, week, float(rng.randrange(20, 56, 2)), status, invoice_id=paid_id)
    other = date(2026, 2, 16) if week != date(2026, 2, 16) else date(2026, 3, 9)
    c.s.sheet(p, proj, other, 40, "submitted" if status != "submitted" else "rejected")
    prompt = (
        f"{p.name} ({p.no}) says their timesheet on project {proj.code} for the week starting "
        f"{week.isoformat()} {rng.choice(('is fine', 'was checked again', 'is correct'))}. "
        "Please approve it."
    )
    gold = [
        sql(f"""SELECT t.id, t.week_start, t.hours, t.status, i.number FROM timesheets t
                JOIN employees e ON e.id = t.employee_id
                LEFT JOIN invoices i ON i.id = t.invoice_id WHERE e.employee_no = '{p.no}'""")
    ]
    if status == "invoiced":
        why = f"The timesheet of {p.no} for {week.isoformat()} is billed on paid {paid_no}: locked."
        return _decline(
            "refuse_approve_rejected", prompt, gold, "invoice_already_paid", why, paid_no
        )
    if status != "submitted":
        why = (
            f"The timesheet of {p.no} for the week of {week.isoformat()} is {status}; only "
            "submitted timesheets can be approved."
        )
        return _decline(
            "refuse_approve_rejected", prompt, gold, "timesheet_not_submitted", why, p.no
        )
    gold.append(sql(f"UPDATE timesheets SET status = 'approved' WHERE id = {sid}"))
    return Draft("refuse_approve_rejected", prompt, gold, True)
