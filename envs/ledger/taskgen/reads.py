"""Answer-only stories: lookups and policy-says-no requests (gold = the reads, state unchanged)."""

from __future__ import annotations

from envs.ledger.taskgen.kit import GO, C, Ctx, Draft, Person, asked, find, look, money, refused


def history(c: Ctx, p: Person, opening: float, savings: float | None = None) -> None:
    """A checking account (and savings) with a few weeks of ordinary postings."""
    chk = c.s.account(p, "checking", opening)
    c.s.cash(chk, c.amount(300, 600), "deposit", 12, "Payroll")
    c.s.cash(chk, float(c.s.rng.randint(2, 12) * 20), "withdrawal", 6, "ATM withdrawal")
    c.s.fee(chk, 12.0, 20, "Fee: monthly maintenance")
    if savings is not None:
        c.s.account(p, "savings", savings)


def lookup_balance(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(100, 300), c.amount(200, 900))
    sav = p.accounts["savings"]
    prompt = f"{p.hello()} How much money is in my savings account right now?"
    return asked("lookup_balance", prompt, [find(p)], "amount", money(sav.balance))


def lookup_available(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(300, 500))
    chk = p.accounts["checking"]
    held = c.amount(60, 150)
    c.s.hold(chk, held, ("Hilton Downtown", "Avis Rent-A-Car")[c.k % 2], 20, 96)
    available = round(chk.balance - held, 2)
    prompt = (
        f"{p.hello()} A hotel put something on my card. How much can I actually spend from "
        f"my checking account {chk.number} at the moment?"
    )
    return asked("lookup_available", prompt, [find(p), look(p, chk)], "amount", money(available))


def lookup_fees(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 400))
    chk = p.accounts["checking"]
    wire = c.s.fee(chk, 25.0, 3, "Fee: wire transfer")
    prompt = (
        f"{p.hello()} I see a 25.00 fee on my checking account {chk.number} a few days ago. "
        "What is the reference of that transaction? I need it for my records."
    )
    gold = [find(p), C("list_transactions", customer_id=p.id, account_number=chk.number,
                       kind="fee")]  # fmt: skip
    return asked("lookup_transaction", prompt, gold, "id", wire)


def lookup_transfer(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(500, 900), c.amount(100, 300))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    amount = float(c.s.rng.randint(3, 9) * 40)
    ref = c.s.transfer(chk, sav, amount, 2, "Moving money")
    prompt = (
        f"{p.hello()} Two days ago {money(amount)} left my checking account {chk.number} by "
        "transfer. Which account did it go to?"
    )
    gold = [
        find(p),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="transfer"),
        C("get_transaction", customer_id=p.id, reference=ref),
    ]
    return asked("lookup_transaction", prompt, gold, "id", sav.number)


def refuse_kyc(c: Ctx) -> Draft:
    p = c.person(kyc="pending")
    history(c, p, c.amount(400, 800))
    chk = p.accounts["checking"]
    prompt = (
        f"{p.hello()} Please withdraw 100.00 in cash from my checking account {chk.number}. {GO}"
    )
    why = "Your identity verification is not complete, so cash withdrawals are not possible."
    return refused("refuse_kyc", prompt, [find(p)], "kyc_incomplete", why)


def refuse_currency(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(400, 800))
    chk = p.accounts["checking"]
    eur = c.s.account(p, "savings", c.amount(100, 500), currency="EUR")
    prompt = (
        f"{p.hello()} Please transfer 150.00 from my checking {chk.number} to my savings "
        f"account {eur.number}. {GO}"
    )
    why = f"{eur.number} is in EUR and {chk.number} in USD; transfers need one currency."
    return refused("refuse_currency", prompt, [find(p)], "currency_mismatch", why)


def refuse_not_beneficiary(c: Ctx) -> Draft:
    p, q = c.person(), c.person()
    history(c, p, c.amount(400, 800))
    other = c.s.account(q, "checking", c.amount(100, 300))
    prompt = (
        f"{p.hello()} Send 80.00 from my checking to account {other.number} please, it's "
        f"a friend's. Just the transfer, don't save anything. {GO}"
    )
    why = f"{other.number} is not one of your saved beneficiaries, so I cannot send to it."
    return refused("refuse_not_beneficiary", prompt, [find(p)], "not_a_beneficiary", why)


def refuse_unfreeze(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 600))
    reason = ("suspected_fraud", "legal_order")[c.k % 2]
    sav = c.s.account(p, "savings", c.amount(100, 500), status="frozen", freeze_reason=reason)
    prompt = f"{p.hello()} My savings account {sav.number} is blocked. Unfreeze it now, please."
    team = "fraud" if reason == "suspected_fraud" else "legal"
    why = f"{sav.number} is frozen for {reason}; only the {team} team can lift that freeze."
    return refused("refuse_unfreeze", prompt, [find(p), look(p, sav)], "freeze_not_liftable", why)


def refuse_insufficient(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(150, 300))
    chk = p.accounts["checking"]
    if c.k % 2:
        c.s.hold(chk, c.amount(40, 90), "Shell Station 114", 10, 72)
    available = round(chk.balance - sum(h["amount"] for h in c.s.rows["holds"]), 2)
    want = float((int(available) // 50 + 3) * 50)
    prompt = (
        f"{p.hello()} I need to withdraw {money(want)} in cash from my checking account "
        f"{chk.number}. {GO}"
    )
    why = f"{chk.number} has {money(available)} USD available, less than {money(want)}."
    gold = [find(p), look(p, chk)]
    return refused("refuse_insufficient_funds", prompt, gold, "insufficient_funds", why)


def refuse_close_loan(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 400))
    loan = c.s.account(p, "loan", float(c.s.rng.randint(8, 19) * 50))
    c.s.transfer(p.accounts["checking"], loan, 50.0, 10, "Loan repayment")
    prompt = (
        f"{p.hello()} I'm done with my loan {loan.number}, please close that account. "
        "I don't want to make any payment today."
    )
    why = f"Loan {loan.number} still has {money(-loan.balance)} USD outstanding."
    gold = [find(p), look(p, loan)]
    return refused("refuse_close_nonzero", prompt, gold, "balance_not_zero", why)


def refuse_daily_limit(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 400), 0.0)
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    c.s.cash(sav, 2900.0, "deposit", 30, "Bonus")
    c.s.transfer(sav, chk, 2300.0, 0.05, "Rent money")
    prompt = (
        f"{p.hello()} Please move another 400.00 from my savings {sav.number} to my "
        f"checking {chk.number} today. {GO}"
    )
    why = f"{sav.number} has 200.00 USD of today's daily limit left, less than 400.00."
    return refused("refuse_daily_limit", prompt, [find(p), look(p, sav)], "daily_limit", why)


def refuse_hold(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(300, 600))
    chk = p.accounts["checking"]
    amount = c.amount(50, 200)
    c.s.hold(chk, amount, "Marriott Bayfront", 30, 72)
    prompt = (
        f"{p.hello()} There's a hold from Marriott Bayfront on my checking {chk.number}. "
        "I already checked out, please release it right away."
    )
    why = f"The {money(amount)} USD Marriott hold has not expired yet; it cannot be released."
    gold = [find(p), look(p, chk)]
    return refused("refuse_hold_not_expired", prompt, gold, "hold_not_expired", why)


def refuse_reverse_twice(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(300, 600))
    chk = p.accounts["checking"]
    ref = c.s.fee(chk, 12.0, 5, "Fee: monthly maintenance")
    c.s.rows["transactions"][-1]["status"] = "reversed"
    c.s.post("reversal", 4, [(chk, 12.0), ("INT-USD-FEES", -12.0)], "Fee refund", reverses=ref)
    prompt = (
        f"{p.hello()} The monthly maintenance fee {ref} on my checking was charged by "
        f"mistake. Please reverse it. {GO}"
    )
    gold = [find(p), C("get_transaction", customer_id=p.id, reference=ref)]
    why = f"{ref} has already been reversed; nothing is reversed twice."
    return refused("refuse_reverse_twice", prompt, gold, "already_reversed", why)


def refuse_reverse_payee(c: Ctx) -> Draft:
    p, q = c.person(), c.person()
    history(c, p, c.amount(500, 900))
    chk = p.accounts["checking"]
    other = c.s.account(q, "checking", c.amount(100, 300))
    c.s.payee(p, other, q.first)
    amount = float(c.s.rng.randint(3, 9) * 25)
    ref = c.s.transfer(chk, other, amount, 1, f"To {q.first}")
    prompt = (
        f"{p.hello()} Yesterday I sent {money(amount)} to {q.first} from my checking by "
        f"mistake. Please reverse that transfer. {GO}"
    )
    gold = [
        find(p),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="transfer"),
        C("get_transaction", customer_id=p.id, reference=ref),
    ]
    why = f"The {money(amount)} USD transfer went to another customer; {q.first} must send it back."
    return refused("refuse_reverse_payee", prompt, gold, "reversal_not_allowed", why)
