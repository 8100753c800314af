"""The hard tier: requests whose steps interact, over long histories, with sums the tools do
not make and rules with exceptions at their boundaries (today, 10.00%, the hours limit). Each
stays fair: the request, the policy and the tables decide every step (gold 1, no-op 0).

- `hard_quarter_close`: two payments (each refused when already paid), void a draft whose weeks
  come back and are billed again, reject/approve at a limit, invoice the month: 12-14 calls.
- `hard_payroll_review`: raises on the salary in effect today (not a scheduled row), a promotion
  against the 10% limit, two corrections each in effect or not: 10-15 calls.
- `hard_customer_month`: void, reject/approve, then answer the month's bill over projects with
  their own rates: 11-12 calls.
Refusals name each refused record (`SqlDraft.refused`).
"""

from __future__ import annotations

from datetime import date, timedelta

from envs.sql.taskgen.kit import (
    CUSTOMER_KINDS,
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
            inv: int | None = None
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
    # Two payments to record: each invoice still sent (recorded) or already paid (refused).
    payments = []
    for issued_on in (date(2025, 10, 6), date(2025, 11, 10)):
        locked = rng.random() < FORBIDDEN * 0.6
        amount = float(rng.randrange(4_000, 20_000, 40))
        _, no = c.s.invoice(proj, amount, "paid" if locked else "sent", issued_on)
        payments.append((no, c.s.day(date(2026, 3, 2), date(2026, 3, 13)).isoformat(), locked))
    c.s.invoice(proj, float(rng.randrange(4_000, 20_000, 40)), "paid", date(2025, 9, 8))
    number = c.s.invoice_no()
    issued, due = issue_day(c)
    prompt = (
        f"Closing the books on project {proj.code}, in this order: (1) the customer paid "
        f"{payments[0][0]} on {payments[0][1]} and {payments[1][0]} on {payments[1][1]}, please "
        f"record both; (2) void the draft {draft} (it billed the "
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
    refused_calls: list[dict] = []
    for no, paid_on, locked in payments:
        record = sql(f"""UPDATE invoices SET status = 'paid', paid_date = '{paid_on}'
                         WHERE number = '{no}'""")
        (refused_calls if locked else gold).append(record)
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
    refused = tuple(no for no, _, locked in payments if locked)
    if not refused:
        return SqlDraft("hard_quarter_close", prompt, gold, True)
    why = f"{' and '.join(refused)} already paid, so locked; I did the rest."
    return SqlDraft(
        "hard_quarter_close",
        prompt,
        gold,
        True,
        forbidden=(refused_calls[0], "invoice_already_paid"),
        decline="invoice_already_paid",
        decline_message=why,
        refused=refused,
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
    forbidden_calls: list[dict] = []
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


def _billable(sheets: list[dict], first: date, end: date) -> dict[int, float]:
    """Approved billable hours per project among `sheets` whose week starts in [first, end)."""
    hours: dict[int, float] = {}
    for s in sheets:
        week = date.fromisoformat(s["week_start"])
        if s["status"] == "approved" and s["billable"] and first <= week < end:
            hours[s["project_id"]] = hours.get(s["project_id"], 0.0) + s["hours"]
    return hours


def hard_customer_month(c: Ctx) -> Draft:
    """A customer's month across two or three projects with their own rates: void a draft that
    billed the wrong weeks (some of another month), reject the month's submitted weeks over a
    limit and approve the rest (exactly the limit is not over it), then answer what the month
    bills: approved billable hours x each project's rate, after those steps (before them, or
    with one rate, or with the weeks around the month, the sum differs). A namesake customer
    has a project and weeks of its own."""
    rng = c.s.rng
    cust, cust_name = c.s.customer()
    last = cust_name.split()[0]
    kinds = [k for k in CUSTOMER_KINDS if f"{last} {k}" != cust_name]
    other = int(
        c.s.b.add(
            "customers",
            code=f"C-{c.s.b.code(6)}",
            name=f"{last} {rng.choice(kinds)}",
            country=rng.choice(("Germany", "Italy", "Spain")),
            industry="Services",
            status="active",
        )["id"]
    )
    rates = rng.sample((85.0, 95.0, 110.0, 125.0, 140.0, 160.0), 3)
    projects = [
        c.s.project(customer_id=cust, rate=rates[n], kind=rng.choice(("ERP", "CRM Rollout", "ETL")))
        for n in range(rng.randint(2, 3))
    ]
    namesake_proj = c.s.project(customer_id=other, rate=rates[-1], kind="Data Platform")
    m = rng.randrange(1, len(MONTHS))
    first, end = MONTHS[m]
    weeks = mondays_of(MONTHS[m - 1][0], end + timedelta(days=7))  # before, in, after
    last_prev = max(w for w in weeks if w < first)
    in_month = [w for w in weeks if first <= w < end]
    limit = rng.choice((36, 40, 44))
    draft_proj = projects[0]
    draft_id, draft_no = c.s.invoice(draft_proj, 0.0, "draft", first + timedelta(days=2))
    team = [c.s.person() for _ in range(rng.randint(2, 3))]
    draft_hours = 0.0
    for p in team:
        for proj in projects:
            for week in weeks:
                if rng.random() < 0.25:
                    continue
                h = float(rng.choice((8, 16, 24, 32, 36)))
                billable = rng.random() > 0.08
                inv: int | None = None
                if proj is draft_proj and (week in in_month[-2:] or week == last_prev):
                    status, inv = "invoiced", draft_id
                    billable = True
                else:
                    status, inv = rng.choices(
                        (("approved", None), ("submitted", None), ("rejected", None)), (6, 3, 1)
                    )[0]
                if status == "submitted" and rng.random() < 0.6:
                    h = float(limit + rng.choice((0, 0, 2, 6)))
                if status == "invoiced":
                    draft_hours += h
                c.s.sheet(p, proj, week, h, status, billable=billable, invoice_id=inv)
        for week in in_month:  # the namesake's own weeks
            c.s.sheet(p, namesake_proj, week, float(rng.choice((16, 24, 40))), "approved")
    next(r for r in c.s.rows["invoices"] if r["id"] == draft_id)["amount"] = (
        draft_hours * draft_proj.rate
    )
    c.s.invoice(draft_proj, float(rng.randrange(4_000, 20_000, 40)), "paid", date(2025, 9, 8))
    # The state after the steps, computed here: the month's bill.
    sheets = [dict(s) for s in c.s.rows["timesheets"]]
    ours = {p.id for p in projects}
    for s in sheets:
        if s["invoice_id"] == draft_id:
            s.update(status="approved", invoice_id=None)
        week = date.fromisoformat(s["week_start"])
        if s["status"] == "submitted" and s["project_id"] in ours and first <= week < end:
            s["status"] = "rejected" if s["hours"] > limit else "approved"
    hours = _billable([s for s in sheets if s["project_id"] in ours], first, end)
    rate = {p.id: p.rate for p in projects}
    total = round(sum(h * rate[pid] for pid, h in hours.items()), 2)
    prompt = (
        f"Month end for our customer {cust_name}, in this order: (1) void their draft "
        f"invoice {draft_no} (it billed the wrong weeks), its timesheets go back to approved; "
        f"(2) of the submitted timesheets on {cust_name}'s projects for {month_label(first)} "
        f"(weeks that start in that month), reject those with more than {limit} hours and "
        f"approve the others; (3) then tell me how much {month_label(first)} bills to "
        f"{cust_name} in total: all approved billable timesheets of their projects whose week "
        f"starts in that month, hours x each project's hourly rate, summed. Don't create the "
        f"invoice, I'll do it."
    )
    period = f"t.week_start >= '{first.isoformat()}' AND t.week_start < '{end.isoformat()}'"
    theirs = f"(SELECT p.id FROM projects p JOIN customers c ON c.id = p.customer_id WHERE c.name = '{cust_name}')"  # noqa: E501
    gold = [
        sql(f"SELECT id, code, name FROM customers WHERE name LIKE '{last} %'"),
        sql(f"""SELECT id, code, hourly_rate FROM projects WHERE customer_id = {cust}
                ORDER BY code"""),
        sql(f"""SELECT number, status, amount, issue_date FROM invoices
                WHERE customer_id = {cust} ORDER BY issue_date"""),
        sql(f"SELECT id, week_start, hours, status FROM timesheets WHERE invoice_id = {draft_id}"),
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {draft_id}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{draft_no}'"),
        sql(f"""SELECT t.id, t.project_id, t.week_start, t.hours FROM timesheets t
                WHERE t.project_id IN {theirs} AND t.status = 'submitted' AND {period}"""),
    ]
    submitted = [
        s
        for s in c.s.rows["timesheets"]
        if s["status"] == "submitted"
        and s["project_id"] in ours
        and first <= date.fromisoformat(s["week_start"]) < end
    ]
    if any(s["hours"] > limit for s in submitted):
        gold.append(
            sql(f"""UPDATE timesheets AS t SET status = 'rejected' WHERE t.project_id IN {theirs}
                    AND t.status = 'submitted' AND {period} AND t.hours > {limit}""")
        )
    if any(s["hours"] <= limit for s in submitted):
        gold.append(
            sql(f"""UPDATE timesheets AS t SET status = 'approved' WHERE t.project_id IN {theirs}
                    AND t.status = 'submitted' AND {period}""")
        )
    gold += [
        sql(f"""SELECT p.code, SUM(t.hours), p.hourly_rate FROM timesheets t JOIN projects p
                ON p.id = t.project_id WHERE t.project_id IN {theirs} AND t.status = 'approved'
                AND t.billable = 1 AND {period} GROUP BY p.code"""),
        sql(f"""SELECT ROUND(SUM(t.hours * p.hourly_rate), 2) FROM timesheets t JOIN projects p
                ON p.id = t.project_id WHERE t.project_id IN {theirs} AND t.status = 'approved'
                AND t.billable = 1 AND {period}"""),
    ]

    def _total(results: list) -> tuple[str, object]:
        rows = results[-1]["rows"]
        assert rows == [[total]], (rows, total)
        return "amount", total

    return SqlDraft("hard_customer_month", prompt, gold, True, answer_from=_total)
