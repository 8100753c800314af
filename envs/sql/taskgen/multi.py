"""Stories with several requests in one message (one of them may be refused by policy)."""

from __future__ import annotations

from datetime import date

from envs.sql.taskgen.kit import LIST, Ctx, Draft, describe, sql
from envs.sql.taskgen.writes import FEB_WEEKS, billable_month, invoice_statements


def month_end(c: Ctx) -> Draft:
    """Record a payment, void a draft (freeing its timesheets), invoice a project: 8 calls."""
    proj, team = billable_month(c, 120.0)
    _, sent = c.s.invoice(proj, 5_760.0, "sent", date(2026, 1, 5))
    draft_id, draft = c.s.invoice(proj, 0.0, "draft", date(2026, 2, 5))
    for p in team:
        c.s.sheet(p, proj, date(2026, 1, 12), 20, "invoiced", invoice_id=draft_id)
    c.s.rows["invoices"][-1]["amount"] = 40 * proj.rate
    number = f"INV-2026-{9000 + c.s.index * 10 + 5}"
    prompt = (
        f"Month-end for project {proj.code}, three things: (1) the customer paid {sent} on "
        f"2026-03-11; (2) void the draft {draft}, its timesheets go back to approved; "
        f"(3) then invoice the project for February 2026 (timesheets whose week starts in "
        f"February) as draft {number}, issued 2026-03-16."
    )
    gold = [
        sql(f"""SELECT number, status, amount FROM invoices
                WHERE project_id = (SELECT id FROM projects WHERE code = '{proj.code}')"""),
        sql(
            f"UPDATE invoices SET status = 'paid', paid_date = '2026-03-11' WHERE number = '{sent}'"
        ),
        sql(f"SELECT id, week_start, status FROM timesheets WHERE invoice_id = {draft_id}"),
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {draft_id}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{draft}'"),
        *invoice_statements(proj.code, number, "2026-03-16", "2026-04-15"),
    ]
    return Draft("multi_month_end", prompt, gold, True)


def team_lead_leaves(c: Ctx) -> Draft:
    """Reassign reports, reject the lead's pending timesheets, archive old rejects, offboard."""
    proj = c.s.project(kind="API Modernisation")
    lead = c.s.person("ENG", title="Staff Engineer", salary=121_000.0)
    new = c.s.person("ENG", title="Staff Engineer", salary=117_000.0)
    reports = [c.s.person("ENG", manager_id=lead.id) for _ in range(2)]
    c.s.sheet(lead, proj, date(2026, 3, 9), 30, "submitted")
    c.s.sheet(lead, proj, date(2026, 3, 2), 30, "approved")
    c.s.sheet(lead, proj, date(2025, 10, 6), 45, "rejected")
    c.s.sheet(reports[0], proj, date(2026, 3, 9), 40, "submitted")
    prompt = (
        f"{lead.name} ({lead.no}) leaves today, 2026-03-16. Please: move their direct "
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
    """Record one payment; decline to delete a paid invoice (it is locked)."""
    proj = c.s.project()
    _, sent = c.s.invoice(proj, 8_400.0, "sent", date(2026, 2, 5))
    _, paid = c.s.invoice(proj, 6_300.0, "paid", date(2026, 1, 5))
    prompt = (
        f"Two invoice chores: {sent} was paid on 2026-03-13, please record it. And "
        f"{paid} looks like a duplicate, please delete it."
    )
    gold = [
        LIST,
        describe("invoices"),
        sql(f"""SELECT number, status, amount, paid_date FROM invoices
                WHERE number IN ('{sent}', '{paid}')"""),
        sql(
            f"UPDATE invoices SET status = 'paid', paid_date = '2026-03-13' WHERE number = '{sent}'"
        ),
        sql(f"SELECT number, status, paid_date FROM invoices WHERE number = '{sent}'"),
    ]
    why = (
        f"I recorded the payment of {sent}; {paid} is paid, so it is locked and cannot be deleted."
    )
    return Draft(
        "multi_paid_and_refused",
        prompt,
        gold,
        True,
        decline="invoice_already_paid",
        decline_message=why,
    )


def raise_and_refuse(c: Ctx) -> Draft:
    """Two raises asked: one within the 10% cap is recorded, one above it is refused."""
    ok = c.s.person("DES", title="Product Designer", salary=66_000.0)
    big = c.s.person("DES", title="Product Designer", salary=64_000.0)
    prompt = (
        f"Raises effective 2026-04-01: {ok.name} ({ok.no}) gets 6% (merit) and {big.name} "
        f"({big.no}) gets 14% (merit). Please record both."
    )
    gold = [
        describe("salaries"),
        sql(f"""SELECT e.employee_no, s.effective_date, s.amount FROM salaries s
                JOIN employees e ON e.id = s.employee_id
                WHERE e.employee_no IN ('{ok.no}', '{big.no}') ORDER BY e.employee_no,
                s.effective_date"""),
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                VALUES ({ok.id}, '2026-04-01', {round(66_000 * 1.06, 2)}, 'merit')"""),
        sql(f"""SELECT s.effective_date, s.amount FROM salaries s WHERE s.employee_id = {ok.id}
                ORDER BY s.effective_date"""),
    ]
    why = (
        f"I recorded the 6% raise of {ok.no}; the 14% raise of {big.no} is "
        "above 10% and needs the CFO's approval."
    )
    return Draft(
        "multi_raise_and_refuse",
        prompt,
        gold,
        True,
        decline="raise_over_limit",
        decline_message=why,
    )


def close_project(c: Ctx) -> Draft:
    """Approve the last week, invoice February, complete the project: 6 calls."""
    proj, team = billable_month(c, 95.0)
    number = f"INV-2026-{9000 + c.s.index * 10 + 5}"
    prompt = (
        f"Project {proj.code} is finished. Please approve its remaining submitted "
        f"timesheets, invoice February 2026 (weeks starting in February) as draft {number} "
        "issued 2026-03-16, and set the project to completed with end date "
        "2026-03-13."
    )
    gold = [
        sql(f"""UPDATE timesheets SET status = 'approved' WHERE status = 'submitted'
                AND project_id = {proj.id}"""),
        *invoice_statements(proj.code, number, "2026-03-16", "2026-04-15"),
        sql(f"""UPDATE projects SET status = 'completed', end_date = '2026-03-13'
                WHERE code = '{proj.code}'"""),
        sql(f"SELECT code, status, end_date FROM projects WHERE code = '{proj.code}'"),
    ]
    assert FEB_WEEKS and team
    return Draft("multi_close_project", prompt, gold, True)
