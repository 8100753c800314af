"""The hard tier (difficulty 5): several intents that interact, found by searching a long
history, with amounts to compute and rules with exceptions. One part is often forbidden by the
data (declined at the end, after the allowed parts), another depends on what the agent finds.
Every task stays solvable from its request, the policy and the tools alone."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from envs.ledger.data import DAILY_LIMIT
from envs.ledger.taskgen.kit import NOW, C, Ctx, Draft, find, look, money
from envs.ledger.taskgen.reads import history

FEES = ((12.0, "Fee: monthly maintenance"), (3.0, "Fee: paper statement"),
        (25.0, "Fee: wire transfer"), (10.0, "Fee: card replacement"))  # fmt: skip
MERCHANTS = ("Hertz Airport", "Marriott Bayfront", "Hilton Downtown", "Avis Rent-A-Car",
             "Shell Station 114", "Delta Air Lines", "Enterprise Rent-A-Car")  # fmt: skip


def half_cents(value: float) -> float:
    """Half of `value`, rounded down to the cent."""
    return int(round(value * 100)) // 2 / 100


def ago(day: int, hour: int, minute: int) -> float:
    """Days before the clock of `hour:00` plus `minute` minutes on the calendar day `day` days
    before today."""
    at = datetime.combine(NOW.date() - timedelta(days=day), time(hour)) + timedelta(minutes=minute)
    return (NOW - at) / timedelta(days=1)


def fee_cleanup(c: Ctx) -> Draft:
    """Reverse the later fee of every same-day double in a long fee history (more fees than a
    default page), past look-alikes: a double across midnight, two fees of different kinds on
    one day. A double on the 30-day boundary is in or out by minutes, older ones are out
    (declined, each named). Then release the expired holds (one may expire within minutes of
    now either way), move half of what is then available to savings, settle and close the loan."""
    p = c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(1400, 1900))  # enough for a long run of fees
    sav = c.s.account(p, "savings", c.amount(300, 600))
    for _ in range(rng.randint(1, 3)):  # ordinary card activity
        c.s.cash(chk, c.amount(15, 80), "withdrawal", rng.randint(1, 58) + rng.random(), "Card")
    kinds = list(range(len(FEES)))
    # Every fee event gets calendar days of its own, so the only same-day doubles of one kind are
    # the ones drawn as such; days 19-22 are history()'s maintenance fee, days 29-31 the boundary.
    free = [d for d in range(1, 59) if not 19 <= d <= 22 and not 29 <= d <= 31]
    rng.shuffle(free)
    inside = sorted((d for d in free if d <= 28), reverse=True)
    straddle = next(d for d in inside if d + 1 in inside and d > 1)  # a double across midnight
    days = [d for d in free if d not in (straddle, straddle + 1)]
    recent: list[tuple[str, float]] = []
    refused: list[tuple[str, float]] = []
    old_pair = next(d for d in days if 25 <= d <= 28)  # behind a page of newer fees
    doubles = [old_pair, *[d for d in days if d <= 28 and d != old_pair][: rng.randint(1, 2)]]
    for day in doubles:  # same-day doubles, in window
        amount, memo = FEES[rng.choice(kinds)]
        hour, minute = rng.randint(6, 20), rng.randint(0, 50)
        c.s.fee(chk, amount, ago(day, hour, minute), memo)
        later = ago(day, hour, minute + rng.randint(2, 9))
        recent.append((c.s.fee(chk, amount, later, memo), amount))
        days.remove(day)
    if rng.random() < 0.6:  # a double 30 days ago, its later charge minutes inside or outside
        amount, memo = FEES[rng.choice(kinds)]
        shift = rng.choice((-1, 1)) * rng.randint(1, 40)  # minutes after the clock's time
        c.s.fee(chk, amount, ago(30, 8, rng.randint(0, 40)), memo)
        ref = c.s.fee(chk, amount, ago(30, 9, 30 + shift), memo)
        (recent if shift > 0 else refused).append((ref, amount))
    if rng.random() < 0.35:  # an older double: past the window
        day = next(d for d in days if d >= 33)
        days.remove(day)
        amount, memo = FEES[rng.choice(kinds)]
        c.s.fee(chk, amount, ago(day, 11, rng.randint(0, 20)), memo)
        refused.append((c.s.fee(chk, amount, ago(day, 11, rng.randint(25, 50)), memo), amount))
    amount, memo = FEES[rng.choice(kinds)]
    c.s.fee(chk, amount, ago(straddle + 1, 23, rng.randint(50, 58)), memo)
    c.s.fee(chk, amount, ago(straddle, 0, rng.randint(1, 9)), memo)
    day = days.pop()  # two fees of different kinds on one day: not a double
    for i in rng.sample(kinds, 2):
        c.s.fee(chk, FEES[i][0], ago(day, rng.randint(8, 18), rng.randint(0, 59)), FEES[i][1])
    for day in days:  # single fees: one or two kinds a day in the last 12 days, few before
        for i in rng.sample(kinds, rng.randint(1, 2) if day <= 12 else int(rng.random() < 0.05)):
            amount, memo = FEES[i]
            c.s.fee(chk, amount, ago(day, rng.randint(7, 21), rng.randint(0, 59)), memo)
    merchants = list(MERCHANTS)
    rng.shuffle(merchants)
    expired, live_held = [], 0.0
    for i in range(rng.randint(2, 4)):
        amount = c.amount(20, 90)
        # Within minutes of the clock (either side), or plainly expired, or plainly running.
        near = rng.randint(-40, 40) if i == 0 else None
        if near is not None:
            code = c.s.hold(chk, amount, merchants[i], 72 - near / 60, 72)
            if near <= 0:
                expired.append(code)
            else:
                live_held += amount
        elif i == 1 or rng.random() < 0.5:
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
        f"1) Some fees on my checking {chk.number} were charged twice on the same calendar day: "
        "for every such pair (same fee, same day), reverse the later of the two charges as a "
        "duplicate. 2) Release every hold on that account that has already expired. 3) Then "
        "move half of the checking account's available balance (rounded down to the cent) to "
        f"my savings {sav.number}. 4) If my loan {loan.number} still has anything outstanding, "
        "pay it off from savings; then close the loan account."
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
    if not refused:
        return Draft("hard_fee_cleanup", prompt, gold, True)
    refuse = [
        C("reverse_transaction", customer_id=p.id, reference=ref, reason="duplicate")
        for ref, _ in refused
    ]
    names = " and ".join(ref for ref, _ in refused)
    why = f"{names}: charged more than 30 days ago, so no longer reversible."
    return Draft(
        "hard_fee_cleanup",
        prompt,
        gold,
        True,
        forbidden=(refuse[0], "reversal_window"),
        also_refused=tuple(refuse[1:]),
        decline="reversal_window",
        decline_message=why,
    )


def move_out(c: Ctx) -> Draft:
    """Moving out: pay the landlord the rent prorated to the days stayed, settle the loan from
    savings and close it, release the savings hold if it has expired (its expiry within minutes
    of now, either side, or plainly past or future), sweep savings into checking and close it;
    a hold still running keeps savings open (declined) and only the available money moves."""
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
    hold_amount = c.amount(15, 60)
    merchant = MERCHANTS[rng.randrange(7)]
    if rng.random() < 0.6:  # expiring within minutes of now: expired at or before it
        near = rng.randint(-45, 45)
        hold = c.s.hold(sav, hold_amount, merchant, 72 - near / 60, 72)
        blocked = near > 0
    else:
        blocked = rng.random() < 0.5
        hours_ago = rng.randint(2, 30) if blocked else rng.randint(100, 200)
        hold = c.s.hold(sav, hold_amount, merchant, hours_ago, 96 if blocked else 72)
    rent, stayed = c.amount(600, 900), rng.randint(3, 27)
    while round(rent * 100) * stayed % 30 == 15:  # no half cent: one rounding, no doubt
        stayed = rng.randint(3, 27)
    prorated = round(round(rent * 100) * stayed / 30) / 100
    prompt = (
        f"{p.hello()} I'm moving out, you have my confirmation for everything here. 1) My rent "
        f"is {money(rent)} for a 30-day month and I stayed {stayed} days of it: send my saved "
        "payee 'Landlord' that share (rent times days over 30, rounded to the cent) from my "
        f"checking {chk.number}. 2) Pay off my loan {loan.number} from my savings {sav.number} "
        "and close the loan. 3) If the hold on my savings has already expired, release it. "
        "Then move everything available in savings to checking and close the savings account; "
        "if the hold is still running, move what is available anyway and leave savings open. "
        "4) I'd like a paper statement of my checking, charged to checking."
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
    """Pay four or five saved payees from checking, top checking up from savings to a floor of
    available money if it fell below it (balance after holds and payments), withdraw cash, a
    statement fee from savings, and freeze savings (after the fee: a frozen account takes no
    posting). The day's limit on checking is nearly used by a transfer early today (a large one
    late yesterday does not count): the cash fits within cents, or misses by cents (declined);
    or one payee's account is closed now (that payment declined)."""
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
    way = rng.choice(("ok", "ok", "closed", "limit"))
    if way == "closed":  # one payee closed that account since it was saved
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
    # Out of checking today before the call: the limit left is within 40.00 of what the bills
    # and the cash need, at most exactly it (fits) or over by cents (the cash is refused).
    need = round(sum(a for _, _, a in paid) + cash, 2)
    over = c.amount(0, 40) if way == "limit" else -c.amount(0, 40)
    if way == "limit" and over == 0:
        over = 0.01
    early = round(DAILY_LIMIT["checking"] - need + over, 2)
    late = c.amount(300, 900)  # yesterday 23:xx: another calendar day
    c.s.cash(chk, round(early + late, 2), "deposit", 3 + rng.random(), "Bonus")
    c.s.cash(chk, late, "withdrawal", ago(1, 23, rng.randint(20, 58)), "Cash withdrawal")
    c.s.transfer(chk, sav, early, ago(0, rng.randint(0, 7), rng.randint(1, 59)), "Auto-save")
    bills = "; ".join(f"'{nick}' {money(amount)}" for nick, _, amount in payees)
    prompt = (
        f"{p.hello()} Bills day, you have my confirmation for all of it. 1) From my checking "
        f"{chk.number}, pay my saved payees: {bills}. 2) After that, if the available balance "
        f"of my checking is below {money(floor)}, move exactly the difference from my savings "
        f"{sav.number} so that {money(floor)} is available. 3) Then withdraw {money(cash)} in "
        "cash from checking. 4) I'd like a paper statement, charged to my savings. 5) Finally "
        "freeze my savings account at my request: nothing should move on it for a while."
    )
    pay = [
        C(
            "transfer",
            customer_id=p.id,
            from_account=chk.number,
            to_account=acct.number,
            amount=amount,
        )
        for _, acct, amount in paid
    ]
    gold = [find(p), look(p, chk), *pay, look(p, chk), look(p, sav)]
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
    withdraw = C("withdraw", customer_id=p.id, account_number=chk.number, amount=cash)
    if way != "limit":
        gold.append(withdraw)
    gold += [
        C("charge_fee", customer_id=p.id, account_number=sav.number, fee_type="paper_statement"),
        C("freeze_account", customer_id=p.id, account_number=sav.number, reason="customer_request"),
    ]
    if way == "ok":
        return Draft("hard_budget_day", prompt, gold, True)
    if way == "limit":
        why = (
            f"Checking {chk.number}: {money(cash)} in cash would take today's transfers and "
            f"withdrawals over its {money(DAILY_LIMIT['checking'])} daily limit."
        )
        return Draft(
            "hard_budget_day",
            prompt,
            gold,
            True,
            forbidden=(withdraw, "daily_limit"),
            decline="daily_limit",
            decline_message=why,
        )
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
