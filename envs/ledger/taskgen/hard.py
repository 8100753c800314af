"""The hard tier (difficulty 5): several intents that interact, found by searching a long
history, with amounts to compute and rules with exceptions. One part is often forbidden by the
data (declined at the end, after the allowed parts), another depends on what the agent finds.
Every task stays solvable from its request, the policy and the tools alone."""

from __future__ import annotations

from envs.ledger.taskgen.kit import C, Ctx, Draft, find, look, money
from envs.ledger.taskgen.reads import history

FEES = ((12.0, "Fee: monthly maintenance"), (3.0, "Fee: paper statement"),
        (25.0, "Fee: wire transfer"), (10.0, "Fee: card replacement"))  # fmt: skip
MERCHANTS = ("Hertz Airport", "Marriott Bayfront", "Hilton Downtown", "Avis Rent-A-Car",
             "Shell Station 114", "Delta Air Lines", "Enterprise Rent-A-Car")  # fmt: skip


def half_cents(value: float) -> float:
    """Half of `value`, rounded down to the cent."""
    return int(round(value * 100)) // 2 / 100


def fee_cleanup(c: Ctx) -> Draft:
    """Reverse the second of every same-day double fee (one pair may be past the 30-day
    window: declined), release the expired holds (not the live ones), move half of what is then
    available to savings, settle and close the loan (already repaid, or paid from savings)."""
    p = c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(700, 950))
    sav = c.s.account(p, "savings", c.amount(300, 600))
    for _ in range(rng.randint(3, 8)):  # ordinary card and cash activity: a long history
        c.s.cash(chk, c.amount(15, 80), "withdrawal", rng.randint(1, 58) + rng.random(), "Card")
    # Calendar days: every fee at 04:42-04:57 of its day (the clock is 09:30), so a pair is on
    # one day and no two of these days meet; days 19-22 are left to history()'s own fee.
    days = rng.sample([d for d in range(1, 29) if not 19 <= d <= 22], 6)
    recent = []
    for day in days[: rng.randint(2, 3)]:  # same-day doubles inside the window
        amount, memo = FEES[rng.randrange(len(FEES))]
        c.s.fee(chk, amount, day + 0.2, memo)
        recent.append((c.s.fee(chk, amount, day + 0.19, memo), amount))
    for day in days[3:]:  # single fees of the same kinds: not duplicates
        amount, memo = FEES[rng.randrange(len(FEES))]
        c.s.fee(chk, amount, day + 0.2, memo)
    old = rng.random() < 0.5
    if old:  # a double past the window: the policy forbids its reversal
        amount, memo = FEES[rng.randrange(len(FEES))]
        day = rng.randint(33, 55)
        c.s.fee(chk, amount, day + 0.2, memo)
        stale = c.s.fee(chk, amount, day + 0.19, memo)
    merchants = list(MERCHANTS)
    rng.shuffle(merchants)
    expired, live_held = [], 0.0
    for i in range(rng.randint(2, 4)):
        amount = c.amount(20, 90)
        if i == 0 or rng.random() < 0.5:
            expired.append(c.s.hold(chk, amount, merchants[i], rng.randint(100, 300), 72))
        else:
            live_held += amount
            c.s.hold(chk, amount, merchants[i], rng.randint(2, 40), 96)
    loan = c.s.account(p, "loan", c.amount(150, 400))
    repaid = rng.random() < 0.5
    if repaid:
        c.s.transfer(chk, loan, -loan.balance, rng.randint(2, 20), "Loan repayment")
    elif rng.random() < 0.5:
        c.s.transfer(chk, loan, c.amount(20, 100), rng.randint(2, 20), "Loan repayment")
    owed = -loan.balance
    refunds = sum(a for _, a in recent)
    move = half_cents(chk.balance + refunds - live_held)
    prompt = (
        f"{p.hello()} I'm tidying up my accounts, you have my confirmation for all of this. "
        f"1) Some fees on my checking {chk.number} were charged twice on the same day: for "
        "every such pair, reverse the second charge as a duplicate. 2) Release every hold on "
        "that account that has already expired. 3) Then move half of the checking account's "
        f"available balance (rounded down to the cent) to my savings {sav.number}. 4) If my "
        f"loan {loan.number} still has anything outstanding, pay it off from savings; then "
        "close the loan account."
    )
    gold = [
        find(p),
        look(p, chk),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="fee", limit=100),
        *(
            C("reverse_transaction", customer_id=p.id, reference=ref, reason="duplicate")
            for ref, _ in recent
        ),
        *(C("release_hold", customer_id=p.id, hold_code=code) for code in expired),
        look(p, chk),
        C(
            "transfer",
            customer_id=p.id,
            from_account=chk.number,
            to_account=sav.number,
            amount=move,
        ),
        look(p, loan),
    ]
    if owed:
        gold.append(
            C(
                "transfer",
                customer_id=p.id,
                from_account=sav.number,
                to_account=loan.number,
                amount=owed,
            )
        )
    gold.append(C("close_account", customer_id=p.id, account_number=loan.number))
    if not old:
        return Draft("hard_fee_cleanup", prompt, gold, True)
    refuse = C("reverse_transaction", customer_id=p.id, reference=stale, reason="duplicate")
    why = f"{stale} was charged more than 30 days ago; it can no longer be reversed."
    return Draft(
        "hard_fee_cleanup",
        prompt,
        gold,
        True,
        forbidden=(refuse, "reversal_window"),
        decline="reversal_window",
        decline_message=why,
    )


def move_out(c: Ctx) -> Draft:
    """Moving out: pay the landlord the rent prorated to the days stayed, settle the loan from
    savings and close it, sweep savings into checking and close savings unless a hold that has
    not expired yet keeps it open (declined); an expired hold is released first."""
    p, q = c.person(), c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(600, 950))
    sav = c.s.account(p, "savings", c.amount(500, 900))
    for _ in range(rng.randint(2, 6)):
        c.s.cash(sav, c.amount(10, 60), "deposit", rng.randint(1, 50) + rng.random(), "Interest")
    landlord = c.s.account(q, "checking", c.amount(100, 300))
    c.s.payee(p, landlord, "Landlord")
    loan = c.s.account(p, "loan", c.amount(100, 400))
    if rng.random() < 0.5:
        c.s.transfer(chk, loan, c.amount(20, 90), rng.randint(5, 25), "Loan repayment")
    owed = -loan.balance
    blocked = rng.random() < 0.5
    hold_amount = c.amount(15, 60)
    if blocked:  # still running: savings cannot be closed, only what is available moves
        hold = c.s.hold(sav, hold_amount, MERCHANTS[rng.randrange(7)], rng.randint(2, 30), 96)
    else:  # expired: released first
        hold = c.s.hold(sav, hold_amount, MERCHANTS[rng.randrange(7)], rng.randint(100, 200), 72)
    rent, stayed = c.amount(600, 900), rng.randint(3, 27)
    while round(rent * 100) * stayed % 30 == 15:  # no half cent: one rounding, no doubt
        stayed = rng.randint(3, 27)
    prorated = round(round(rent * 100) * stayed / 30) / 100
    prompt = (
        f"{p.hello()} I'm moving out, you have my confirmation for everything here. 1) My rent "
        f"is {money(rent)} for a 30-day month and I stayed {stayed} days of it: send my saved "
        "payee 'Landlord' that share (rent times days over 30, rounded to the cent) from my "
        f"checking {chk.number}. 2) Pay off my loan {loan.number} from my savings {sav.number} "
        "and close the loan. 3) Move everything left in savings to checking and close the "
        "savings account. 4) I'd like a paper statement of my checking, charged to checking."
    )
    sweep = round(sav.balance - owed - (hold_amount if blocked else 0.0), 2)
    statement = C(
        "charge_fee", customer_id=p.id, account_number=chk.number, fee_type="paper_statement"
    )
    gold = [
        find(p),
        look(p, chk),
        C("transfer", customer_id=p.id, from_account=chk.number, to_account=landlord.number,
          amount=prorated),
        look(p, loan),
        look(p, sav),
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=loan.number,
          amount=owed),
        C("close_account", customer_id=p.id, account_number=loan.number),
    ]  # fmt: skip
    if not blocked:
        gold.append(C("release_hold", customer_id=p.id, hold_code=hold))
    gold.append(
        C(
            "transfer",
            customer_id=p.id,
            from_account=sav.number,
            to_account=chk.number,
            amount=sweep,
        )
    )
    close = C("close_account", customer_id=p.id, account_number=sav.number)
    if not blocked:
        return Draft("hard_move_out", prompt, [*gold, close, statement], True)
    gold.append(statement)
    why = (
        f"Savings {sav.number} still has an active {money(hold_amount)} hold that has not "
        "expired; it stays open until the hold ends."
    )
    return Draft(
        "hard_move_out",
        prompt,
        gold,
        True,
        forbidden=(close, "active_holds"),
        decline="active_holds",
        decline_message=why,
    )


def budget_day(c: Ctx) -> Draft:
    """Pay four or five saved payees from checking (one payee's account may be closed now:
    that payment is declined), then top checking up from savings to a floor of available money
    if it fell below it (balance after holds and payments), withdraw cash, a statement fee from
    savings, and freeze savings (after the fee: a frozen account takes no posting)."""
    p = c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(900, 990))
    c.s.cash(chk, c.amount(600, 900), "deposit", rng.randint(1, 5) + 0.5, "Payroll")
    sav = c.s.account(p, "savings", c.amount(700, 990))
    held = 0.0
    for _ in range(rng.randint(0, 2)):
        amount = c.amount(20, 80)
        held += amount
        c.s.hold(chk, amount, MERCHANTS[rng.randrange(7)], rng.randint(2, 40), 96)
    nicks = ["Landlord", "Gym", "Mom", "Piano teacher", "Babysitter", "Dentist"]
    rng.shuffle(nicks)
    payees = []
    for nick in nicks[: rng.randint(4, 5)]:
        q = c.person()
        acct = c.s.account(q, "checking", c.amount(50, 300))
        c.s.payee(p, acct, nick)
        payees.append((nick, acct, c.amount(40, 220)))
    closed = rng.random() < 0.5
    if closed:  # one payee closed that account since it was saved
        _, gone, _ = payees[rng.randrange(len(payees))]
        c.s.cash(gone, gone.balance, "withdrawal", 4.5, "Closing withdrawal")
        gone.row["status"], gone.row["closed_at"] = "closed", c.s._ts(4)
    paid = [(nick, acct, amount) for nick, acct, amount in payees if acct.row["status"] == "open"]
    available = round(chk.balance - held - sum(a for _, _, a in paid), 2)
    floor = float(rng.randint(4, 9) * 50) if rng.random() < 0.5 else 0.0
    if floor == 0.0 or floor <= available:  # half of the draws need no top-up
        floor = float(max(100, int(available) // 50 * 50 - 50 * rng.randint(0, 2)))
    top_up = round(floor - available, 2) if floor > available else 0.0
    cash = float(rng.randint(2, int(floor) // 20 - 1) * 20)
    bills = "; ".join(f"'{nick}' {money(amount)}" for nick, _, amount in payees)
    prompt = (
        f"{p.hello()} Bills day, you have my confirmation for all of it. 1) From my checking "
        f"{chk.number}, pay my saved payees: {bills}. 2) After that, if the available balance "
        f"of my checking is below {money(floor)}, move exactly the difference from my savings "
        f"{sav.number} so that {money(floor)} is available. 3) Then withdraw {money(cash)} in "
        "cash from checking. 4) I'd like a paper statement, charged to my savings. 5) Finally "
        "freeze my savings account at my request: nothing should move on it for a while."
    )
    gold = [
        find(p),
        look(p, chk),
        *(
            C(
                "transfer",
                customer_id=p.id,
                from_account=chk.number,
                to_account=acct.number,
                amount=amount,
            )
            for _, acct, amount in paid
        ),
        look(p, chk),
        look(p, sav),
    ]
    if top_up:
        gold.append(
            C(
                "transfer",
                customer_id=p.id,
                from_account=sav.number,
                to_account=chk.number,
                amount=top_up,
            )
        )
    gold += [
        C("withdraw", customer_id=p.id, account_number=chk.number, amount=cash),
        C("charge_fee", customer_id=p.id, account_number=sav.number, fee_type="paper_statement"),
        C("freeze_account", customer_id=p.id, account_number=sav.number, reason="customer_request"),
    ]
    if not closed:
        return Draft("hard_budget_day", prompt, gold, True)
    nick, gone, amount = next(x for x in payees if x[1].row["status"] == "closed")
    refuse = C(
        "transfer", customer_id=p.id, from_account=chk.number, to_account=gone.number, amount=amount
    )
    why = f"'{nick}' ({gone.number}) is closed and accepts no payment; {money(amount)} not sent."
    return Draft(
        "hard_budget_day",
        prompt,
        gold,
        True,
        forbidden=(refuse, "account_frozen"),
        decline="account_frozen",
        decline_message=why,
    )
