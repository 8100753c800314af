"""The hard tier: several requests whose outcomes interact, over long histories, with sums to
compute and rules with exceptions. Each stays fair: the request, the policy and the tables
decide every step (gold 1, no-op 0, checked like every task).

- `hard_quarter_close`: a project with 12-40 timesheets over three months and a few invoices:
  record a payment (forbidden when the invoice is already paid), void a draft (its timesheets
  come back and, when they fall in the month, are billed again), reject the submitted weeks over
  a limit and approve the rest, then invoice the month: 10-14 calls.
- `hard_payroll_review`: a lead's team with salary histories (some with a raise not yet in
  effect): a percentage for every active report computed on the *current* salary, one named
  report to a new amount (above 10% of the current salary: declined), and a correction of a
  row that may or may not be in effect yet: 8-14 calls.
"""

from __future__ import annotations

from datetime import date, timedelta

from envs.sql.taskgen.kit import (
    MONTHS,
    Ctx,
    Draft,
    Person,
    describe,
    mondays_of,
    money,
    month_label,
    sql,
)
from envs.sql.taskgen.refusals import FORBIDDEN
from envs.sql.taskgen.writes import invoice_statements, issue_day


def hard_quarter_close(c: Ctx) -> Draft:
    rng = c.s.rng
    rate = float(rng.choice((90, 105, 120, 140, 155)))
    proj = c.s.project(rate=rate, kind=rng.choice(("Data Warehouse", "Billing Platform", "ERP")))
    m = rng.randrange(1, len(MONTHS))
    first, end = MONTHS[m]
    prev_first, _ = MONTHS[m - 1]
    team = [c.s.person() for _ in range(rng.randint(2, 4))]
    limit = rng.choice((40, 44, 45))
    weeks = mondays_of(prev_first, end)  # the month before (billed on a draft) and the month
    draft_id, draft = c.s.invoice(proj, 0.0, "draft", first + timedelta(days=3))
    billed_hours = 0.0
    submitted: list[tuple[int, float]] = []
    for n, p in enumerate(team):
        for week in weeks:
            h = float(rng.choice((16, 24, 32, 36, 40)))
            if week < first:  # the month before: outside the invoice asked for
                status, inv = rng.choices((("approved", None), ("submitted", None)), (4, 1))[0]
            elif week in weeks[-2:] and n % 2 == 0:  # the draft billed these (wrong) weeks
                status, inv = "invoiced", draft_id
            else:
                status, inv = rng.choices(
                    (("approved", None), ("submitted", None), ("rejected", None)), (6, 3, 1)
                )[0]
            if status == "submitted" and rng.random() < 0.4:
                h = float(limit + rng.choice((2, 4, 8)))
            if status == "invoiced":
                billed_hours += h
            sid = c.s.sheet(p, proj, week, h, status, invoice_id=inv)
            if status == "submitted":
                submitted.append((sid, h))
    if not billed_hours:  # the draft bills at least one week
        c.s.rows["timesheets"][0].update(status="invoiced", invoice_id=draft_id)
        billed_hours = float(c.s.rows["timesheets"][0]["hours"])
    next(r for r in c.s.rows["invoices"] if r["id"] == draft_id)["amount"] = billed_hours * rate
    forbidden = rng.random() < FORBIDDEN
    _, paid_no = c.s.invoice(
        proj,
        float(rng.randrange(4_000, 20_000, 40)),
        "paid" if forbidden else "sent",
        date(2025, 10, 6),
    )
    c.s.invoice(proj, float(rng.randrange(4_000, 20_000, 40)), "paid", date(2025, 9, 8))
    paid_on = c.s.day(date(2026, 3, 2), date(2026, 3, 13)).isoformat()
    number = c.s.invoice_no()
    issued, due = issue_day(c)
    prompt = (
        f"Closing the books on project {proj.code}, in this order: (1) the customer paid "
        f"{paid_no} on {paid_on}, please record it; (2) void the draft {draft} (it billed the "
        f"wrong weeks), its timesheets go back to approved; (3) reject every submitted "
        f"timesheet of the project with more than {limit} hours and approve the other "
        f"submitted ones; (4) then invoice {month_label(first)} (timesheets whose week "
        f"starts in that month) as draft {number}, issued {issued}."
    )
    project = f"(SELECT id FROM projects WHERE code = '{proj.code}')"
    gold = [
        describe("timesheets"),
        sql(f"""SELECT id, number, status, amount, paid_date FROM invoices
                WHERE project_id = {project} ORDER BY issue_date"""),
    ]
    if not forbidden:
        gold.append(
            sql(f"""UPDATE invoices SET status = 'paid', paid_date = '{paid_on}'
                    WHERE number = '{paid_no}'""")
        )
    gold += [
        sql(f"SELECT id, week_start, hours, status FROM timesheets WHERE invoice_id = {draft_id}"),
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {draft_id}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{draft}'"),
        sql(f"""SELECT id, employee_id, week_start, hours FROM timesheets
                WHERE project_id = {project} AND status = 'submitted'"""),
    ]
    if any(h > limit for _, h in submitted):
        gold.append(
            sql(f"""UPDATE timesheets SET status = 'rejected' WHERE project_id = {project}
                    AND status = 'submitted' AND hours > {limit}""")
        )
    if any(h <= limit for _, h in submitted):
        gold.append(
            sql(f"""UPDATE timesheets SET status = 'approved' WHERE project_id = {project}
                    AND status = 'submitted'""")
        )
    gold += invoice_statements(proj.code, number, issued, due, first, end)
    gold.append(sql(f"SELECT number, amount, status FROM invoices WHERE number = '{number}'"))
    if not forbidden:
        return Draft("hard_quarter_close", prompt, gold, True)
    why = f"{paid_no} is already paid, so it is locked; I did the rest."
    return Draft(
        "hard_quarter_close",
        prompt,
        gold,
        True,
        decline="invoice_already_paid",
        decline_message=why,
    )


def _history(c: Ctx, p: Person, current: float, pending: float | None, when: date) -> None:
    """Older rows below `current` (the person's row in effect from 2025-07-01, added by
    person()), and a raise not yet in effect when `pending` is given."""
    rng = c.s.rng
    amount = round(current / 1.04, -2)
    for year in range(2024, 2024 - rng.randint(1, 3), -1):
        amount = round(amount / 1.03, -2)
        c.s.b.add(
            "salaries",
            employee_id=p.id,
            effective_date=f"{year}-01-01",
            amount=amount,
            reason="merit",
        )
    if pending is not None:
        c.s.b.add(
            "salaries",
            employee_id=p.id,
            effective_date=when.isoformat(),
            amount=pending,
            reason="promotion",
        )


def hard_payroll_review(c: Ctx) -> Draft:
    rng = c.s.rng
    dept = rng.choice(("ENG", "DATA", "DES", "SALES"))
    lead = c.s.person(dept, title="Team Lead", salary=150_000.0)
    size = rng.randint(4, 6)
    currents = [float(rng.randrange(55_000, 125_000, 100)) for _ in range(size)]
    team = [
        c.s.person(dept, manager_id=lead.id, salary=s, hired=date(2020, 2, 3)) for s in currents
    ]
    # Never the named one (index 0): one report on leave, one who has just left (still active).
    on_leave, leaver = rng.sample(range(1, size - 1), 2)
    c.s.rows["employees"][-size + on_leave]["status"] = "on_leave"
    left = c.s.day(date(2026, 2, 27), date(2026, 3, 13)).isoformat()
    later = c.s.day(date(2026, 5, 4), date(2026, 8, 31))
    # The named report: a pending promotion makes their latest row higher than the current one.
    named, named_current = team[0], currents[0]
    pending = round(named_current * rng.uniform(1.04, 1.08), -2)
    for n, (p, s) in enumerate(zip(team, currents, strict=True)):
        _history(c, p, s, pending if n == 0 else None, later)
    # The corrected row: another report's last raise, in effect or not yet (the data decides).
    fixed_p = team[-1]  # neither on leave nor leaving
    fixed_s = currents[team.index(fixed_p)]
    in_effect = rng.random() < FORBIDDEN
    row_day = c.s.day(date(2026, 1, 5), date(2026, 3, 9)) if in_effect else later
    row_amount = round(fixed_s * 1.03, -2)
    row = c.s.b.add(
        "salaries",
        employee_id=fixed_p.id,
        effective_date=row_day.isoformat(),
        amount=row_amount,
        reason="adjustment",
    )
    corrected = row_amount + float(rng.choice((-500, 500, 800, 1_000)))
    pct = rng.choice((2, 2.5, 3, 3.5, 4))
    when = c.s.day(date(2026, 3, 17), later - timedelta(days=3)).isoformat()
    over = rng.random() < FORBIDDEN
    target = round(named_current * (1 + rng.uniform(11, 16) / 100 if over else 1.09), -2)
    if not over:  # within 10% of the current salary (above the pending row, a trap)
        target = round(named_current * rng.uniform(1.085, 1.095), -2)
    assert (target > named_current * 1.10) == over
    prompt = (
        f"Payroll review for {lead.name}'s ({lead.no}) direct reports, effective {when}: every "
        f"active report gets a {pct}% merit raise on their current salary (rounded to cents), "
        f"except {named.name} ({named.no}), who goes to {money(target)} instead (promotion); "
        f"people on leave get nothing this time. Before that: {team[leaver].name} "
        f"({team[leaver].no}) left on {left}, please offboard them (no raise, of course). Also, "
        f"the adjustment row of "
        f"{fixed_p.name} ({fixed_p.no}) (their only 'adjustment' salary row) should say "
        f"{money(corrected)}: please fix that row."
    )
    gold = [
        describe("salaries"),
        sql(f"""SELECT e.id, e.employee_no, e.status, s.effective_date, s.amount
                FROM employees e JOIN salaries s ON s.employee_id = e.id
                WHERE e.manager_id = (SELECT id FROM employees WHERE employee_no = '{lead.no}')
                ORDER BY e.employee_no, s.effective_date"""),
    ]
    gold.append(
        sql(f"""UPDATE employees SET status = 'terminated', termination_date = '{left}'
                WHERE employee_no = '{team[leaver].no}'""")
    )
    # The current salary of each active report: the latest row on or before today.
    for n, (p, s) in enumerate(zip(team, currents, strict=True)):
        if n in (0, on_leave, leaver):
            continue
        current = s
        if p is fixed_p and in_effect:
            current = row_amount  # the row in effect is the current one
        gold.append(
            sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                    VALUES ({p.id}, '{when}', {round(current * (1 + pct / 100), 2)}, 'merit')""")
        )
    if not over:
        gold.append(
            sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                    VALUES ({named.id}, '{when}', {target}, 'promotion')""")
        )
    if not in_effect:
        gold.append(sql(f"UPDATE salaries SET amount = {corrected} WHERE id = {row['id']}"))
    gold.append(
        sql(f"""SELECT e.employee_no, s.effective_date, s.amount, s.reason FROM salaries s
                JOIN employees e ON e.id = s.employee_id WHERE s.effective_date = '{when}'
                AND e.manager_id = (SELECT id FROM employees WHERE employee_no = '{lead.no}')""")
    )
    if not (over or in_effect):
        return Draft("hard_payroll_review", prompt, gold, True)
    # One decline, with the first applicable code of the policy's list.
    code = "salary_rewrite_forbidden" if in_effect else "raise_over_limit"
    why = (
        "I recorded the allowed raises; "
        + (
            f"the {row_day.isoformat()} row of {fixed_p.no} is in effect and cannot be changed"
            if in_effect
            else ""
        )
        + ("; " if in_effect and over else "")
        + (f"{named.no}'s raise is above 10% and needs the CFO's approval" if over else "")
        + "."
    )
    return Draft("hard_payroll_review", prompt, gold, True, decline=code, decline_message=why)
