"""Stories with several requests in one message; the data decides which of them a rule forbids
(a paid invoice, a raise above the cap), and the gold does the allowed ones and declines the rest.
"""

from __future__ import annotations

from datetime import date, timedelta

from envs.sql.taskgen.kit import (
    LIST,
    Ctx,
    Draft,
    SqlDraft,
    describe,
    effective_day,
    mondays_of,
    money,
    month_label,
    sql,
)
from envs.sql.taskgen.refusals import FORBIDDEN, RAISE_REASONS
from envs.sql.taskgen.writes import billable_month, invoice_statements, issue_day


def month_end(c: Ctx) -> Draft:
    """Record a payment, void a draft (freeing its timesheets), invoice a month: 9 calls."""
    rng = c.s.rng
    proj, team, first, end = billable_month(c, float(rng.choice((100, 120, 140))))
    _, sent = c.s.invoice(proj, float(rng.randrange(3_000, 9_000, 40)), "sent", date(2025, 10, 6))
    earlier = mondays_of(first, end)[0] - timedelta(days=14)  # before the month: not re-billed
    draft_id, draft = c.s.invoice(proj, 0.0, "draft", earlier + timedelta(days=7))
    hours = 0.0
    for p in team:
        h = float(rng.choice((16, 20, 24)))
        c.s.sheet(p, proj, earlier, h, "invoiced", invoice_id=draft_id)
        hours += h
    c.s.rows["invoices"][-1]["amount"] = hours * proj.rate
    paid = c.s.day(date(2026, 3, 2), date(2026, 3, 13)).isoformat()
    number = c.s.invoice_no()
    issued, due = issue_day(c)
    prompt = (
        f"Month-end for project {proj.code}, three things: (1) the customer paid {sent} on "
        f"{paid}; (2) void the draft {draft}, its timesheets go back to approved; "
        f"(3) then invoice the project for {month_label(first)} (timesheets whose week starts "
        f"in that month) as draft {number}, issued {issued}."
    )
    gold = [
        sql(f"""SELECT number, status, amount FROM invoices
                WHERE project_id = (SELECT id FROM projects WHERE code = '{proj.code}')"""),
        sql(f"UPDATE invoices SET status = 'paid', paid_date = '{paid}' WHERE number = '{sent}'"),
        sql(f"SELECT id, week_start, status FROM timesheets WHERE invoice_id = {draft_id}"),
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {draft_id}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{draft}'"),
        *invoice_statements(proj.code, number, issued, due, first, end),
    ]
    return Draft("multi_month_end", prompt, gold, True)


def team_lead_leaves(c: Ctx) -> Draft:
    """Reassign reports, reject the lead's pending timesheets, archive old rejects, offboard."""
    rng = c.s.rng
    proj = c.s.project(kind="API Modernisation")
    lead = c.s.person("ENG", title="Staff Engineer", salary=121_000.0)
    new = c.s.person("ENG", title="Staff Engineer", salary=117_000.0)
    reports = [c.s.person("ENG", manager_id=lead.id) for _ in range(rng.randint(2, 3))]
    c.s.sheet(lead, proj, date(2026, 3, 9), float(rng.randrange(20, 40, 2)), "submitted")
    c.s.sheet(lead, proj, date(2026, 3, 2), 30, "approved")
    c.s.sheet(
        lead,
        proj,
        rng.choice((date(2025, 9, 1), date(2025, 10, 6), date(2025, 11, 3))),
        45,
        "rejected",
    )
    c.s.sheet(lead, proj, date(2026, 1, 12), 44, "rejected")  # 2026: stays
    c.s.sheet(reports[0], proj, date(2026, 3, 9), 40, "submitted")
    prompt = (
        f"{lead.name} ({lead.no}) leaves today, 2026-03-16. Please move their direct "
        f"reports to {new.name} ({new.no}); reject {lead.first}'s still-submitted "
        f"timesheets; archive {lead.first}'s rejected timesheets from 2025; and offboard "
        f"{lead.first}."
    )
    old = f"employee_id = {lead.id} AND status = 'rejected' AND week_start < '2026-01-01'"
    gold = [
        sql(
            f"SELECT id, employee_no FROM employees WHERE employee_no IN ('{lead.no}', '{new.no}')"
        ),
        sql(f"UPDATE employees SET manager_id = {new.id} WHERE manager_id = {lead.id}"),
        sql(f"SELECT id, week_start, status FROM timesheets WHERE employee_id = {lead.id}"),
        sql(f"""UPDATE timesheets SET status = 'rejected' WHERE employee_id = {lead.id}
                AND status = 'submitted'"""),
        sql(f"""INSERT INTO timesheet_archive (employee_id, project_id, week_start, hours,
                billable, status, archived_on) SELECT employee_id, project_id, week_start, hours,
                billable, status, '2026-03-16' FROM timesheets WHERE {old}"""),
        sql(f"DELETE FROM timesheets WHERE {old}"),
        sql(f"""UPDATE employees SET status = 'terminated', termination_date = '2026-03-16'
                WHERE id = {lead.id}"""),
    ]
    return Draft("multi_team_lead_leaves", prompt, gold, True)


def paid_and_refused(c: Ctx) -> Draft:
    """Record one payment; delete a 'duplicate' invoice: allowed only for an empty draft (a
    paid one is locked, a sent one is never deleted)."""
    rng = c.s.rng
    proj = c.s.project()
    _, sent = c.s.invoice(proj, float(rng.randrange(3_000, 12_000, 40)), "sent", date(2026, 2, 5))
    status = rng.choices(("draft", "paid", "sent"), (6, 2, 2))[0]
    if c.s.b.world is None:  # the shipped set keeps its one partial refusal (a paid duplicate)
        status = "paid"
    dup_id, dup = c.s.invoice(proj, float(rng.randrange(3_000, 12_000, 40)), status)
    paid = c.s.day(date(2026, 3, 2), date(2026, 3, 13)).isoformat()
    prompt = (
        f"Two invoice chores: {sent} was paid on {paid}, please record it. And "
        f"{dup} looks like a duplicate, please delete it."
    )
    gold = [
        LIST,
        describe("invoices"),
        sql(f"""SELECT id, number, status, amount, paid_date FROM invoices
                WHERE number IN ('{sent}', '{dup}')"""),
        sql(f"UPDATE invoices SET status = 'paid', paid_date = '{paid}' WHERE number = '{sent}'"),
        sql(f"SELECT COUNT(*) FROM timesheets WHERE invoice_id = {dup_id}"),
    ]
    if status == "draft":
        gold.append(sql(f"DELETE FROM invoices WHERE number = '{dup}'"))
        return Draft("multi_paid_and_refused", prompt, gold, True)
    code = "invoice_already_paid" if status == "paid" else "cannot_delete_invoice"
    why = f"I recorded the payment of {sent}; {dup} is {status}, so it cannot be deleted."
    return SqlDraft(
        "multi_paid_and_refused",
        prompt,
        gold,
        True,
        decline=code,
        decline_message=why,
        refused=(dup,),
    )


def raise_and_refuse(c: Ctx) -> Draft:
    """Two raises asked as new amounts: each is recorded unless it is above 10% of the current
    salary (the data decides which, if any, is declined)."""
    rng = c.s.rng
    people, amounts, over = [], [], []
    for _ in range(2):
        current = float(rng.randrange(55_000, 120_000, 100))
        p = c.s.person("DES", title="Product Designer", salary=current)
        big = rng.random() < FORBIDDEN
        new = round(current * (1 + (rng.uniform(11, 20) if big else rng.uniform(2, 9)) / 100), -2)
        people.append(p)
        amounts.append((current, new))
        over.append(big)
    reason = rng.choice(RAISE_REASONS)
    when = effective_day(c.s)
    a, b = people
    prompt = (
        f"Raises effective {when} ({reason}): {a.name} ({a.no}) goes to "
        f"{money(amounts[0][1])} and {b.name} ({b.no}) to {money(amounts[1][1])}. Please "
        "record both."
    )
    gold = [
        describe("salaries"),
        sql(f"""SELECT e.employee_no, s.effective_date, s.amount FROM salaries s
                JOIN employees e ON e.id = s.employee_id
                WHERE e.employee_no IN ('{a.no}', '{b.no}') ORDER BY e.employee_no,
                s.effective_date"""),
    ]
    for p, (_, new), big in zip(people, amounts, over, strict=True):
        if not big:
            gold.append(
                sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                        VALUES ({p.id}, '{when}', {new}, '{reason}')""")
            )
    refused = [p.no for p, big in zip(people, over, strict=True) if big]
    if not refused:
        return Draft("multi_raise_and_refuse", prompt, gold, True)
    why = f"The raise of {' and '.join(refused)} is above 10% and needs the CFO's approval."
    return SqlDraft(
        "multi_raise_and_refuse",
        prompt,
        gold,
        len(refused) < 2,
        decline="raise_over_limit",
        decline_message=why,
        refused=tuple(refused),
    )


def close_project(c: Ctx) -> Draft:
    """Approve the last submitted week, invoice a month, complete the project: 7 calls."""
    rng = c.s.rng
    proj, _, first, end = billable_month(c, float(rng.choice((85, 95, 105))))
    number = c.s.invoice_no()
    issued, due = issue_day(c)
    ended = (date.fromisoformat(issued) - timedelta(days=rng.randint(1, 5))).isoformat()
    prompt = (
        f"Project {proj.code} is finished. Please approve its remaining submitted "
        f"timesheets, invoice {month_label(first)} (weeks starting in that month) as draft "
        f"{number} issued {issued}, and set the project to completed with end date {ended}."
    )
    gold = [
        sql(f"""SELECT t.id, t.week_start, t.hours, t.status FROM timesheets t JOIN projects p
                ON p.id = t.project_id WHERE p.code = '{proj.code}' AND t.status = 'submitted'"""),
        sql(f"""UPDATE timesheets SET status = 'approved' WHERE status = 'submitted'
                AND project_id = {proj.id}"""),
        *invoice_statements(proj.code, number, issued, due, first, end),
        sql(f"""UPDATE projects SET status = 'completed', end_date = '{ended}'
                WHERE code = '{proj.code}'"""),
        sql(f"SELECT code, status, end_date FROM projects WHERE code = '{proj.code}'"),
    ]
    return Draft("multi_close_project", prompt, gold, True)
