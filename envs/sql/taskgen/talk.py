"""Conversational stories: the colleague is on the line (`Draft.user`, app/core/conversation.py).

The request leaves out what picks the rows (which invoice, which namesake); the colleague tells
each fact only when asked, corrects a proposal of a look-alike, or changes their mind once. The
gold asks, queries, proposes the exact change naming its record ids ("... Shall I proceed?") and
runs the statements only after the yes (the confirmation covers run_sql). Twins: the data may
forbid the change; then the gold declines with the rule's code and asks for no yes.
"""

from __future__ import annotations

from datetime import date

from app.sdk.taskgen import UserChange, UserFact, UserScript
from envs.sql.taskgen.kit import (
    DEPT_NAMES,
    Ctx,
    Draft,
    Person,
    Proj,
    SqlDraft,
    call,
    effective_day,
    sql,
)
from envs.sql.taskgen.refusals import FORBIDDEN, RAISE_REASONS

YES = ("Yes, please go ahead.", "Yes, that's right. Go ahead.", "Yes, do it please.")
INVOICE_ASKS = [
    "invoice number", "which invoice", "what invoice", "invoice no", "which one", "invoice id",
    "number of the invoice",
]  # fmt: skip
DATE_ASKS = ["date", "when", "which day", "what day", "paid on"]
WHO_ASKS = [
    "which department", "what department", "department", "which one", "which employee",
    "employee number", "which of", "team",
]  # fmt: skip


def _message(text: str) -> dict[str, object]:
    return call("message_user", text=text)


def _decline(
    family: str, prompt: str, gold: list, code: str, why: str, user: UserScript, record: str
) -> Draft:
    """A refusal of one record, named by its key (employee_no, invoice number)."""
    return SqlDraft(
        family, prompt, gold, False, decline=code, decline_message=why, user=user, refused=(record,)
    )


def talk_record_payment(c: Ctx) -> Draft:
    """Facts over turns: which invoice was paid (k=0: and when) is told when asked; the
    customer's other open invoice is the look-alike. Twins: the invoice is sent (recorded) or
    already paid (declined: invoice_already_paid)."""
    s, rng = c.s, c.s.rng
    cid, customer = s.customer()
    proj: Proj = s.project(customer_id=cid)
    forbidden = rng.random() < FORBIDDEN
    amount = float(rng.randrange(3_000, 25_000, 40))
    issued = s.day(date(2025, 12, 1), date(2026, 2, 20))
    _, number = s.invoice(proj, amount, "paid" if forbidden else "sent", issued)
    _, other = s.invoice(proj, float(rng.randrange(3_000, 25_000, 40)), "sent", date(2026, 3, 5))
    paid = s.day(date(2026, 3, 2), date(2026, 3, 16)).isoformat()
    facts = [
        UserFact(
            key="invoice",
            value=number,
            asked_by=INVOICE_ASKS,
            reply=f"It's invoice {number}, the {amount:.2f} one.",
        )
    ]
    look = sql(f"SELECT number, status, amount, paid_date FROM invoices WHERE number = '{number}'")
    if c.k == 0:
        prompt = "One of our customers paid an invoice. Please record the payment."
        facts.append(
            UserFact(key="paid", value=paid, asked_by=DATE_ASKS, reply=f"They paid on {paid}.")
        )
        unclear = "A customer paid one of our invoices; I need the payment recorded."
        gold = [_message("Which invoice was paid, and on what date?"), look]
    else:
        prompt = f"{customer} paid one of their invoices on {paid}. Please record the payment."
        unclear = f"{customer} paid one of their invoices on {paid}; please record it."
        listed = sorted((number, other))
        gold = [
            sql(f"""SELECT i.number, i.status, i.amount FROM invoices i
                    JOIN customers c ON c.id = i.customer_id WHERE c.name = '{customer}'"""),
            _message(
                f"{customer} has two invoices on record, {listed[0]} and {listed[1]}. "
                "Which invoice did they pay?"
            ),
            look,
        ]
    script = UserScript(
        goal=f"Record that {customer} paid invoice {number} on {paid}.",
        facts=facts,
        changes=[
            UserChange(
                tools=["run_sql"],
                identifiers=[number],
                wrong=[other],
                yes=rng.choice(YES),
                correction=f"No, not that one: invoice {number}, the {amount:.2f} one.",
            )
        ],
        unclear=unclear,
    )
    if forbidden:
        why = f"Invoice {number} is already paid, so it is locked; I changed nothing."
        return _decline(
            "talk_record_payment", prompt, gold, "invoice_already_paid", why, script, number
        )
    propose = (
        f"Invoice {number} ({amount:.2f}) is sent. I will set its status to paid with paid date "
        f"{paid}. Shall I proceed?"
    )
    gold += [
        _message(propose),
        sql(f"UPDATE invoices SET status = 'paid', paid_date = '{paid}' WHERE number = '{number}'"),
    ]
    return Draft("talk_record_payment", prompt, gold, True, user=script)


def talk_raise_namesake(c: Ctx) -> Draft:
    """Confirm or correct: two employees share the name in two departments; the colleague says
    which when asked and corrects a proposal for the other. Twins: the raise is within 10% of
    the right one's salary (recorded) or above it (declined: raise_over_limit)."""
    s, rng = c.s, c.s.rng
    dept, other_dept = rng.sample(("DATA", "ENG", "DES", "SALES", "FIN", "OPS"), 2)
    current = float(rng.randrange(52_000, 140_000, 100))
    p: Person = s.person(dept, salary=current)
    twin_salary = round(current * rng.choice((0.8, 0.85, 1.15, 1.2)), -2)
    twin: Person = s.person(other_dept, salary=twin_salary, name=(p.first, p.last))
    allowed = rng.random() >= FORBIDDEN
    pct = rng.uniform(1.5, 9.3) if allowed else rng.uniform(10.8, 22.0)
    new = round(current * (1 + pct / 100), -2)
    assert (new <= round(current * 1.10, 2)) == allowed
    reason = rng.choice(RAISE_REASONS)
    when = effective_day(s)
    if c.k == 0:
        prompt = f"Please raise {p.name}'s salary to {new:,.2f} a year from {when} ({reason})."
    else:
        prompt = f"Please set the annual salary of {p.name} to {new:,.2f} from {when}; {reason}."
    script = UserScript(
        goal=(
            f"Raise the salary of {p.name} of {DEPT_NAMES[dept]} ({p.no}) to {new:.2f} a year "
            f"from {when} ({reason})."
        ),
        facts=[
            UserFact(
                key="department",
                value=DEPT_NAMES[dept],
                asked_by=WHO_ASKS,
                reply=f"{p.first} in {DEPT_NAMES[dept]}.",
            )
        ],
        changes=[
            UserChange(
                tools=["run_sql"],
                identifiers=[p.no],
                wrong=[twin.no],
                yes=rng.choice(YES),
                correction=f"No, not that one: {p.first} in {DEPT_NAMES[dept]}.",
            )
        ],
        unclear=f"I need {p.name}'s salary raised to {new:,.2f} from {when}.",
    )
    # Departments in lower case in the gold's messages: a capitalised one ("Data Science") would
    # be one identifier shared by many tasks' golds (app/taskgen/audit.py reads names in text).
    found = sorted([(p.no, DEPT_NAMES[dept].lower()), (twin.no, DEPT_NAMES[other_dept].lower())])
    gold = [
        sql(f"""SELECT e.id, e.employee_no, d.name, e.title FROM employees e
                JOIN departments d ON d.id = e.department_id
                WHERE e.first_name = '{p.first}' AND e.last_name = '{p.last}'"""),
        _message(
            f"I found two employees named {p.name}: {found[0][0]} in {found[0][1]} and "
            f"{found[1][0]} in {found[1][1]}. Which one do you mean?"
        ),
        sql(f"""SELECT s.effective_date, s.amount FROM salaries s
                JOIN employees e ON e.id = s.employee_id WHERE e.employee_no = '{p.no}'
                ORDER BY s.effective_date DESC"""),
    ]
    if not allowed:
        why = (
            f"The raise for {p.no} is above 10% of the current salary and needs the CFO's approval."
        )
        return _decline("talk_raise_namesake", prompt, gold, "raise_over_limit", why, script, p.no)
    propose = (
        f"{p.name} ({p.no}, {DEPT_NAMES[dept].lower()}) earns {current:.2f} now. I will add a "
        f"salary row of {new:.2f} a year effective {when} (reason: {reason}). Shall I proceed?"
    )
    gold += [
        _message(propose),
        sql(f"""INSERT INTO salaries (employee_id, effective_date, amount, reason)
                VALUES ({p.id}, '{when}', {new}, '{reason}')"""),
    ]
    return Draft("talk_raise_namesake", prompt, gold, True, user=script)


def talk_void_mind(c: Ctx) -> Draft:
    """Change of mind: the colleague asks to void one invoice, then, on the proposal, the other
    invoice of the project instead. Twins: the second invoice is draft or sent (voided, its
    timesheets back to approved) or paid (declined: invoice_already_paid)."""
    s, rng = c.s, c.s.rng
    proj = s.project(rate=float(rng.choice((95, 110, 125))))
    team = [s.person() for _ in range(2)]
    allowed = rng.random() >= FORBIDDEN
    statuses = (rng.choice(("draft", "sent")), rng.choice(("draft", "sent")) if allowed else "paid")
    invoices: list[tuple[int, str, int]] = []
    weeks = ((date(2026, 1, 5), date(2026, 1, 12)), (date(2026, 2, 2), date(2026, 2, 9)))
    for n, status in enumerate(statuses):
        iid, number = s.invoice(proj, 0.0, status, s.day(date(2026, 1, 19), date(2026, 2, 27)))
        hours = 0.0
        for p in team:
            for week in weeks[n]:
                h = float(rng.randrange(12, 40, 2))
                s.sheet(p, proj, week, h, "invoiced", invoice_id=iid)
                hours += h
        s.rows["invoices"][n]["amount"] = hours * proj.rate
        invoices.append((iid, number, 2 * len(team)))
    (_, first, sheets), (b_id, second, _) = invoices
    if c.k == 0:
        prompt = (
            f"Invoice {first} went out with the wrong hours. Please void it; its timesheets "
            "should go back to approved so they can be billed again."
        )
    else:
        prompt = (
            f"Please void invoice {first} (wrong hours) and put its timesheets back to approved."
        )
    script = UserScript(
        goal=(
            f"Ask to void invoice {first}; when asked to confirm, change your mind: it is invoice "
            f"{second} of the same project that has the wrong hours."
        ),
        changes=[
            UserChange(
                tools=["run_sql"],
                identifiers=[first],
                yes=rng.choice(YES),
                correction=f"No, I mean invoice {first}.",
                change_of_mind=(
                    f"Oh wait, sorry, I mixed them up: it's invoice {second} that has the wrong "
                    f"hours, {first} is fine. Please void {second} instead."
                ),
            ),
            UserChange(
                tools=["run_sql"],
                identifiers=[second],
                wrong=[first],
                yes=rng.choice(YES),
                correction=f"No, leave {first} alone: it's invoice {second}.",
            ),
        ],
        unclear=f"Invoice {first} went out with the wrong hours and needs voiding.",
    )
    gold = [
        sql(f"SELECT id, number, status FROM invoices WHERE number = '{first}'"),
        _message(
            f"Invoice {first} is {statuses[0]}. I will void it and set its {sheets} timesheets "
            "back to approved. Shall I proceed?"
        ),
        sql(f"SELECT id, number, status FROM invoices WHERE number = '{second}'"),
        sql(f"SELECT id, status FROM timesheets WHERE invoice_id = {b_id}"),
    ]
    if not allowed:
        why = f"Invoice {second} is paid, so it and its timesheets are locked; I changed nothing."
        return _decline("talk_void_mind", prompt, gold, "invoice_already_paid", why, script, second)
    gold += [
        _message(
            f"Invoice {second} is {statuses[1]}. I will void it and set its {sheets} timesheets "
            "back to approved. Shall I proceed?"
        ),
        sql(f"""UPDATE timesheets SET status = 'approved', invoice_id = NULL
                WHERE invoice_id = {b_id}"""),
        sql(f"UPDATE invoices SET status = 'void' WHERE number = '{second}'"),
    ]
    return Draft("talk_void_mind", prompt, gold, True, user=script)
