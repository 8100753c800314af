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
    TODAY,
    Ctx,
    Draft,
    Person,
    SqlDraft,
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
    last_prev = max(w for w in weeks if w < first)
    draft_id, draft = c.s.invoice(proj, 0.0, "draft", first + timedelta(days=3))
    billed_hours = 0.0
    submitted: list[tuple[int, float]] = []
    for n, p in enumerate(team):
        for week in weeks:
            h = float(rng.choice((16, 24, 32, 36, 40)))
            # The draft billed the wrong weeks: the month's last two and the month before's last.
            drafted = (week in weeks[-2:] or week == last_prev) and n % 2 == 0
            if drafted:
                status, inv = "invoiced", draft_id
            elif week < first:  # the month before: outside the invoice asked for
                status, inv = rng.choices((("approved", None), ("submitted", None)), (4, 1))[0]
            else:
                status, inv = rng.choices(
                    (("approved", None), ("submitted", None), ("rejected", None)), (6, 3, 1)
                )[0]
            if status == "submitted" and rng.random() < 0.6:
                # Over the limit, or exactly at it (not more than it: approved).
                h = float(limit + rng.choice((0, 0, 2, 4, 8)))
            if status == "invoiced":
                billed_hours += h
            # Now and then an approved week in the month is not billable: never invoiced.
            billable = not (status == "approved" and week >= first and rng.random() < 0.1)
            sid = c.s.sheet(p, proj, week, h, status, billable=billable, invoice_id=inv)
            if status == "submitted":
                submitted.append((sid, h))
        # The week after the month (approved, billable): outside the invoice.
        c.s.sheet(p, proj, weeks[-1] + timedelta(days=7), 8, "approved")
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
        return SqlDraft("hard_quarter_close", prompt, gold, True)
    why = f"{paid_no} is already paid, so it is locked; I did the rest."
    payment = sql(f"""UPDATE invoices SET status = 'paid', paid_date = '{paid_on}'
                      WHERE number = '{paid_no}'""")
    return SqlDraft(
        "hard_quarter_close",
        prompt,
        gold,
        True,
        forbidden=(payment, "invoice_already_paid"),
        decline="invoice_already_paid",
        decline_message=why,
        refused=(paid_no,),
    )


def _history(c: Ctx, p: Person, current: float) -> None:
    """Older merit rows below `current` (the person's row in effect from 2025-07-01)."""
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


def _salary_row(c: Ctx, p: Person, day: date, amount: float, reason: str) -> dict:
    return c.s.b.add(
        "salaries",
        employee_id=p.id,
        effective_date=day.isoformat(),
        amount=amount,
        reason=reason,
    )


# When a corrected adjustment row takes effect: in effect (refused) or not yet (corrected).
# Today itself is in effect ("on or before today"); tomorrow is not.
ROW_DAYS = (
    ("past", True),
    ("today", True),
    ("tomorrow", False),
    ("tomorrow", False),
    ("later", False),
    ("later", False),
    ("later", False),
    ("later", False),
)


def hard_payroll_review(c: Ctx) -> Draft:
    """A lead's team: offboard one, a merit raise for every active report on the salary in
    effect today (a recent adjustment may be it, a raise not yet in effect is not), one report
    promoted to an amount checked against the 10% limit (to the cent, against today's salary,
    not a later row), and two adjustment rows to correct (each in effect or not: refused or
    done). Every refused record is named (employee_no)."""
    rng = c.s.rng
    dept = rng.choice(("ENG", "DATA", "DES", "SALES"))
    lead = c.s.person(dept, title="Team Lead", salary=150_000.0)
    size = rng.randint(6, 8)
    currents = [float(rng.randrange(55_000, 125_000, 100)) for _ in range(size)]
    team = [
        c.s.person(dept, manager_id=lead.id, salary=s, hired=date(2020, 2, 3)) for s in currents
    ]
    for p, s in zip(team, currents, strict=True):
        _history(c, p, s)
    # Roles: 0 promoted, 1 and 2 have an adjustment row to correct, 3 is a distractor with a
    # raise not yet in effect, then one on leave and one who left (still active).
    named, fix_a, fix_b, pending_p = team[0], team[1], team[2], team[3]
    on_leave, leaver = rng.sample(range(4, size), 2)
    c.s.rows["employees"][-size + on_leave]["status"] = "on_leave"
    left = c.s.day(date(2026, 2, 27), date(2026, 3, 13)).isoformat()
    when_day = c.s.day(date(2026, 4, 1), date(2026, 5, 29))
    when = when_day.isoformat()
    current = dict(zip([p.id for p in team], currents, strict=True))

    def future_day() -> date:  # a day after today, never the raises' effective date
        d = c.s.day(date(2026, 3, 18), date(2026, 8, 31))
        return d if d != when_day else d + timedelta(days=1)

    # The promoted report's latest row is a raise not yet in effect (a trap: not the current).
    named_pending = round(currents[0] * rng.uniform(1.04, 1.08), -2)
    _salary_row(c, named, future_day(), named_pending, "promotion")
    _salary_row(c, pending_p, future_day(), round(currents[3] * 1.05, -2), "merit")
    # The two adjustment rows.
    rows = {}
    refused_rows: list[Person] = []
    for p in (fix_a, fix_b):
        when_kind, in_effect = rng.choice(ROW_DAYS)
        day = {
            "past": c.s.day(date(2026, 1, 5), date(2026, 3, 13)),
            "today": TODAY,
            "tomorrow": TODAY + timedelta(days=1),
            "later": future_day(),
        }[when_kind]
        amount = round(current[p.id] * rng.choice((1.02, 1.03, 1.05)), -2)
        row = _salary_row(c, p, day, amount, "adjustment")
        corrected = amount + float(rng.choice((-500, 500, 800, 1_000)))
        rows[p.id] = (row, corrected, in_effect)
        if in_effect:
            current[p.id] = amount  # the row in effect is the current salary
            refused_rows.append(p)
    # The promotion's target against the 10% limit (on today's salary, to the cent).
    base = currents[0]
    limit = round(base * 1.10, 2)
    case = rng.choice(("exact", "exact", "below", "cent_over", "over_latest_ok"))
    target = {
        "exact": limit,  # exactly 10.00%: allowed (only more than 10% is refused)
        "cent_over": round(limit + 0.01, 2),
        "below": round(base * rng.uniform(1.06, 1.095), -1),
        # above 10% of today's salary, within 10% of the later row (a naive check allows it)
        "over_latest_ok": round(
            min(named_pending * 1.10, base * 1.16) - rng.randrange(10, 300, 10), 2
        ),
    }[case]
    over = target > limit
    assert over == (case in ("cent_over", "over_latest_ok")), (case, base, target)
    pct = rng.choice((2, 2.5, 3, 3.5, 4))
    corr = {p.id: rows[p.id][1] for p in (fix_a, fix_b)}
    prompt = (
        f"Payroll review for {lead.name}'s ({lead.no}) direct reports, effective {when}: every "
        f"active report gets a {pct}% merit raise on their current salary (rounded to cents), "
        f"except {named.name} ({named.no}), who is promoted to {money(target)} instead; people "
        f"on leave get nothing this time. Before that: {team[leaver].name} ({team[leaver].no}) "
        f"left on {left}, please offboard them (no raise, of course). Also, two corrections: "
        f"the 'adjustment' salary row of {fix_a.name} ({fix_a.no}) should say "
        f"{money(corr[fix_a.id])}, and the 'adjustment' row of {fix_b.name} ({fix_b.no}) "
        f"should say {money(corr[fix_b.id])} (each has only one such row)."
    )
    reports = f"(SELECT id FROM employees WHERE manager_id = (SELECT id FROM employees WHERE employee_no = '{lead.no}'))"  # noqa: E501
    gold = [
        describe("salaries"),
        sql(f"""SELECT id, employee_no, first_name, last_name, status FROM employees
                WHERE manager_id = (SELECT id FROM employees WHERE employee_no = '{lead.no}')
                ORDER BY employee_no"""),
        sql(f"""SELECT e.employee_no, s.id, s.effective_date, s.amount, s.reason
                FROM salaries s JOIN employees e ON e.id = s.employee_id
                WHERE s.employee_id IN {reports} ORDER BY e.employee_no, s.effective_date"""),
        # The salary in effect today: the latest row on or before today, per report.
        sql(f"""SELECT e.employee_no, s.amount FROM salaries s JOIN employees e
                ON e.id = s.employee_id WHERE s.employee_id IN {reports}
                AND s.effective_date = (SELECT MAX(effective_date) FROM salaries
                WHERE employee_id = s.employee_id AND effective_date <= '{TODAY.isoformat()}')
                ORDER BY e.employee_no"""),
        sql(f"""UPDATE employees SET status = 'terminated', termination_date = '{left}'
                WHERE employee_no = '{team[leaver].no}'"""),
    ]
    for n, p in enumerate(team):
        if n in (0, on_leave, leaver):
            continue
        gold.append(
            sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                    VALUES ({p.id}, '{when}', {round(current[p.id] * (1 + pct / 100), 2)},
                    'merit')""")
        )
    if not over:
        gold.append(
            sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                    VALUES ({named.id}, '{when}', {target}, 'promotion')""")
        )
    forbidden_calls = []
    for p in (fix_a, fix_b):
        row, corrected, in_effect = rows[p.id]
        fix = sql(f"UPDATE salaries SET amount = {corrected} WHERE id = {row['id']}")
        (forbidden_calls if in_effect else gold).append(fix)
    gold.append(
        sql(f"""SELECT e.employee_no, s.effective_date, s.amount, s.reason FROM salaries s
                JOIN employees e ON e.id = s.employee_id WHERE s.employee_id IN {reports}
                AND s.effective_date > '{TODAY.isoformat()}' ORDER BY e.employee_no""")
    )
    refused = tuple(p.no for p in refused_rows) + ((named.no,) if over else ())
    if not refused:
        return SqlDraft("hard_payroll_review", prompt, gold, True)
    # One decline, with the first applicable code of the policy's list, naming every record.
    code = "salary_rewrite_forbidden" if refused_rows else "raise_over_limit"
    parts = [f"the adjustment row of {p.no} is already in effect" for p in refused_rows]
    if over:
        parts.append(f"{named.no}'s promotion is more than 10% over the current salary")
    why = "I recorded the allowed changes; " + "; ".join(parts) + "."
    return SqlDraft(
        "hard_payroll_review",
        prompt,
        gold,
        True,
        forbidden=(forbidden_calls[0], code) if forbidden_calls else None,
        decline=code,
        decline_message=why,
        refused=refused,
    )
