"""Single requests the data decides: each family words its request from one pool, and the
task's world either permits it (the gold checks the facts, then acts) or breaks one rule of the
policy (the gold checks the same facts, then declines with that rule's code). About half of the
draws go each way, the forbidden half spread over the family's rules, so neither the wording
nor a training task's decline predicts the outcome (docs/generating_tasks.md, "Twins")."""

from __future__ import annotations

from envs.ledger.taskgen.kit import (
    GO,
    NOT_IDENTIFIED,
    OK,
    OTHER_CUSTOMER,
    Acct,
    C,
    Ctx,
    Draft,
    Person,
    decided,
    find,
    look,
    money,
    outcome,
    pick,
    world_rule,
)
from envs.ledger.taskgen.reads import history

MERCHANTS = ("Hertz Airport", "Marriott Bayfront", "Hilton Downtown", "Avis Rent-A-Car",
             "Shell Station 114", "Enterprise Rent-A-Car")  # fmt: skip
FREEZES = {"liftable": ("lost_card", "customer_request"),
           "team": ("suspected_fraud", "legal_order")}  # fmt: skip


def frozen(c: Ctx, a: Acct, reasons: tuple[str, ...] = ("lost_card", "suspected_fraud")) -> str:
    reason = reasons[c.s.rng.randrange(len(reasons))]
    a.row["status"], a.row["freeze_reason"] = "frozen", reason
    return reason


def spent_today(c: Ctx, a: Acct, limit: float, left: float) -> None:
    """Earlier today the account already sent `limit - left` out (a big deposit paid for it)."""
    c.s.cash(a, limit + 200.0, "deposit", c.s.rng.randint(20, 28), "Car sale")
    c.s.cash(a, limit - left, "withdrawal", 0.05 + c.s.rng.random() / 4, "Branch withdrawal")


def hold_some(c: Ctx, a: Acct, share: float = 0.5) -> float:
    """Maybe an active hold on `a` (a look-alike: the balance is not what is available)."""
    if c.s.rng.random() >= share:
        return 0.0
    amount = c.amount(30, 150)
    merchant = MERCHANTS[c.s.rng.randrange(len(MERCHANTS))]
    c.s.hold(a, amount, merchant, c.s.rng.randint(5, 40), 96)
    return amount


def person(c: Ctx, verdict: str) -> Person:
    return c.person(kyc="pending" if verdict == "kyc_incomplete" else "verified")


def withdraw(c: Ctx) -> Draft:
    verdict = outcome(
        c,
        "kyc_incomplete",
        "insufficient_funds",
        "daily_limit",
        "account_frozen",
        NOT_IDENTIFIED,
        OTHER_CUSTOMER,
    )
    p = person(c, verdict)
    overdraft = 300.0 if c.k % 2 else 0.0
    chk = history(c, p, c.amount(200, 400), overdraft=overdraft)
    if verdict == "daily_limit":
        left = float(c.s.rng.randint(1, 4) * 20)
        spent_today(c, chk, 5000.0, left)
        amount = left + float(c.s.rng.randint(1, 6) * 20)
    held = hold_some(c, chk)
    room = chk.balance - held + overdraft
    if verdict == "insufficient_funds":  # above what is available, often below the balance
        amount = float((int(room) // 20 + c.s.rng.randint(1, 4)) * 20)
    elif verdict != "daily_limit":
        amount = float(c.s.rng.randint(2, max(2, int(room) // 20)) * 20)
    if verdict == "account_frozen":
        frozen(c, chk)
    world_rule(c, p, verdict, chk)
    prompt = pick(
        c,
        f"{p.hello()} I'd like to withdraw {money(amount)} in cash from my checking account "
        f"{chk.number}. {GO}",
        f"{p.hello()} Please pay me out {money(amount)} in cash from my checking "
        f"{chk.number}. {GO}",
    )
    act = C("withdraw", customer_id=p.id, account_number=chk.number, amount=amount)
    why = f"The withdrawal of {money(amount)} USD from {chk.number} breaks the {verdict} rule."
    return decided("withdraw", prompt, [find(p), look(p, chk)], [act], verdict, why)


def transfer_own(c: Ctx) -> Draft:
    verdict = outcome(
        c,
        "currency_mismatch",
        "insufficient_funds",
        "daily_limit",
        "account_frozen",
        "kyc_incomplete",
        NOT_IDENTIFIED,
    )
    p = person(c, verdict)
    chk = history(c, p, c.amount(400, 900))
    currency = "EUR" if verdict == "currency_mismatch" else "USD"
    sav = c.s.account(p, "savings", c.amount(100, 500), currency=currency)
    if c.s.rng.random() < 0.4:  # a look-alike savings account in the other currency
        c.s.account(
            p,
            "savings",
            c.amount(50, 300),
            label="other",
            currency="USD" if currency == "EUR" else "EUR",
        )
    src, dst = (chk, sav) if c.k % 2 == 0 else (sav, chk)
    limit = 5000.0 if src is chk else 2500.0
    if verdict == "daily_limit":
        left = float(c.s.rng.randint(1, 4) * 25)
        spent_today(c, src, limit, left)
        amount = round(left + c.amount(10, 150), 2)
    held = hold_some(c, src) if src is chk else 0.0
    room = src.balance - held
    if verdict == "insufficient_funds":
        amount = cents_up(room + c.amount(1, 200))
    elif verdict != "daily_limit":
        amount = c.amount(20, int(min(600, room - 5)))
    if verdict == "account_frozen":
        frozen(c, (src, dst)[c.s.rng.randrange(2)], ("lost_card", "customer_request"))
    world_rule(c, p, verdict)
    prompt = pick(
        c,
        f"{p.hello()} Please move {money(amount)} from my {src.type} {src.number} to my "
        f"{dst.type} {dst.number}. {GO}",
        f"{p.hello()} Please transfer {money(amount)} from my {src.type} account {src.number} "
        f"into my {dst.type} account {dst.number}. {GO}",
    )
    act = C(
        "transfer", customer_id=p.id, from_account=src.number, to_account=dst.number, amount=amount
    )
    why = f"The transfer of {money(amount)} from {src.number} to {dst.number} breaks {verdict}."
    return decided("transfer_own", prompt, [find(p), look(p, src)], [act], verdict, why)


def cents_up(value: float) -> float:
    """An amount with cents (above what is available when asked for more than that)."""
    return round(value, 2)


def send_money(c: Ctx) -> Draft:
    """Send X to account N, "it's Q's": saved as a payee or not (a payee named Q may hold
    another of Q's accounts: the number decides), enough money, a verified customer."""
    verdict = outcome(
        c, "not_a_beneficiary", "insufficient_funds", "kyc_incomplete", NOT_IDENTIFIED
    )
    p, q = person(c, verdict), c.person()
    chk = history(c, p, c.amount(300, 800))
    other = c.s.account(q, "checking", c.amount(100, 300))
    old = c.s.account(q, "savings", c.amount(50, 200))
    if verdict == "not_a_beneficiary":
        if c.s.rng.random() < 0.6:  # the look-alike: Q saved, but with Q's other account
            c.s.payee(p, old, q.first)
    else:
        c.s.payee(p, other, q.first)
    room = chk.balance - hold_some(c, chk)
    if verdict == "insufficient_funds":
        amount = cents_up(room + c.amount(1, 150))
    else:
        amount = c.amount(20, int(min(400, room - 5)))
    world_rule(c, p, verdict)
    prompt = pick(
        c,
        f"{p.hello()} Send {money(amount)} from my checking {chk.number} to account "
        f"{other.number} please, it's {q.first}'s. Just the transfer, don't save anything. {GO}",
        f"{p.hello()} Please transfer {money(amount)} from my checking account {chk.number} to "
        f"{q.first}'s account {other.number}. Nothing else, just that transfer. {GO}",
    )
    act = C(
        "transfer",
        customer_id=p.id,
        from_account=chk.number,
        to_account=other.number,
        amount=amount,
    )
    why = f"Sending {money(amount)} to {other.number} breaks the {verdict} rule."
    return decided("send_money", prompt, [find(p), look(p, chk)], [act], verdict, why)


def pay_beneficiary(c: Ctx) -> Draft:
    verdict = outcome(c, "insufficient_funds", "kyc_incomplete", "account_frozen", NOT_IDENTIFIED)
    p, q, r = person(c, verdict), c.person(), c.person()
    chk = history(c, p, c.amount(400, 900))
    other = c.s.account(q, "checking", c.amount(100, 300))
    nicks = ["Landlord", "Mom", "Piano teacher", "Gym", "Babysitter"]
    c.s.rng.shuffle(nicks)
    nick = nicks[0]
    c.s.payee(p, other, nick)
    c.s.payee(p, c.s.account(r, "checking", c.amount(100, 300)), nicks[1])  # another payee
    if verdict == "account_frozen":  # the payee's account is closed now
        other.row["status"] = "closed"
        other.row["closed_at"] = c.s._ts(3)
        c.s.cash(other, other.balance, "withdrawal", 3.5, "Closing withdrawal")
    room = chk.balance - hold_some(c, chk)
    if verdict == "insufficient_funds":
        amount = cents_up(room + c.amount(1, 150))
    else:
        amount = c.amount(40, int(min(350, room - 5)))
    world_rule(c, p, verdict)
    prompt = (
        f"{p.hello()} Send {money(amount)} from my checking account to my saved payee "
        f"'{nick}'. {GO}"
    )
    act = C(
        "transfer",
        customer_id=p.id,
        from_account=chk.number,
        to_account=other.number,
        amount=amount,
    )
    why = f"Sending {money(amount)} to '{nick}' ({other.number}) breaks the {verdict} rule."
    return decided("transfer_beneficiary", prompt, [find(p), look(p, chk)], [act], verdict, why)


def add_and_pay(c: Ctx) -> Draft:
    verdict = outcome(c, "kyc_incomplete", "insufficient_funds", NOT_IDENTIFIED)
    p, q = person(c, verdict), c.person()
    chk = history(c, p, c.amount(300, 900))
    other = c.s.account(q, "checking", c.amount(100, 300))
    nick = f"{q.first} {q.last}"
    room = chk.balance - hold_some(c, chk)
    if verdict == "insufficient_funds":
        amount = cents_up(room + c.amount(1, 150))
    else:
        amount = c.amount(30, int(min(250, room - 5)))
    world_rule(c, p, verdict)
    prompt = (
        f"{p.hello()} Please save account {other.number} as a payee under the name "
        f"'{nick}' and then send {money(amount)} to it from my checking. {GO}"
    )
    add = C("add_beneficiary", customer_id=p.id, account_number=other.number, nickname=nick)
    pay = C(
        "transfer",
        customer_id=p.id,
        from_account=chk.number,
        to_account=other.number,
        amount=amount,
    )
    checks = [find(p), look(p, chk)]
    why = f"Sending {money(amount)} to {other.number} breaks the {verdict} rule."
    if verdict == "insufficient_funds":  # the payee is saved (allowed), the payment is not
        return decided("add_beneficiary", prompt, checks, [pay], verdict, why, done=[add])
    return decided("add_beneficiary", prompt, checks, [add, pay], verdict, why)


def lost_card(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 600))
    chk = p.accounts["checking"]
    prompt = (
        f"{p.hello()} I lost my debit card for checking account {chk.number}. Please freeze "
        f"the account and order me a replacement card, charged to that account. {GO}"
    )
    gold = [
        find(p),
        look(p, chk),
        C("charge_fee", customer_id=p.id, account_number=chk.number, fee_type="card_replacement"),
        C("freeze_account", customer_id=p.id, account_number=chk.number, reason="lost_card"),
    ]
    return Draft("lost_card", prompt, gold, True)


def freeze(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 600), c.amount(200, 600))
    acct = p.accounts[("checking", "savings")[c.k % 2]]
    reason, why = (
        ("suspected_fraud", "I think someone got into my online banking"),
        ("customer_request", "I want nothing to move on it for a while"),
    )[c.s.rng.randrange(2)]
    prompt = f"{p.hello()} Please freeze my {acct.type} account {acct.number}; {why}. {GO}"
    gold = [find(p), look(p, acct), C("freeze_account", customer_id=p.id,
                                      account_number=acct.number, reason=reason)]  # fmt: skip
    return Draft("freeze", prompt, gold, True)


def unfreeze(c: Ctx) -> Draft:
    verdict = outcome(c, "freeze_not_liftable", NOT_IDENTIFIED, OTHER_CUSTOMER)
    p = c.person()
    history(c, p, c.amount(200, 600))
    sav = c.s.account(
        p,
        ("savings", "checking")[c.k % 2] if c.k else "savings",
        c.amount(100, 500),
        label="blocked",
    )
    pool = FREEZES["liftable"] if verdict == OK else FREEZES["team"]
    frozen(c, sav, pool)
    world_rule(c, p, verdict, sav)
    prompt = pick(
        c,
        f"{p.hello()} My {sav.type} account {sav.number} is blocked. Please unfreeze it. {GO}",
        f"{p.hello()} Please lift the freeze on my {sav.type} account {sav.number}, I need it "
        f"again. {GO}",
    )
    act = C("unfreeze_account", customer_id=p.id, account_number=sav.number)
    why = f"{sav.number} is frozen for {sav.row['freeze_reason']}; only that team can lift it."
    return decided("unfreeze", prompt, [find(p), look(p, sav)], [act], verdict, why)


def release_hold(c: Ctx) -> Draft:
    verdict = outcome(c, "hold_not_expired", NOT_IDENTIFIED)
    p = c.person()
    chk = history(c, p, c.amount(300, 600))
    merchants = list(MERCHANTS)
    c.s.rng.shuffle(merchants)
    merchant = merchants[0]
    days = c.s.rng.randint(2, 6)
    valid = (days * 24 - c.s.rng.randint(4, 30)) if verdict == OK else days * 24 + 48
    code = c.s.hold(chk, c.amount(40, 200), merchant, days * 24 + 1, valid)
    # A look-alike: another merchant's hold, expired or not.
    c.s.hold(chk, c.amount(20, 150), merchants[1], c.s.rng.randint(5, 200), 96)
    world_rule(c, p, verdict)
    prompt = pick(
        c,
        f"{p.hello()} A hold from {merchant} is still blocking money on my checking "
        f"{chk.number}; that was {days} days ago. Please remove it. {GO}",
        f"{p.hello()} Please release the {merchant} hold on my checking account {chk.number}, "
        f"I was done there {days} days ago. {GO}",
    )
    act = C("release_hold", customer_id=p.id, hold_code=code)
    why = f"The {merchant} hold {code} has not expired yet; it cannot be released."
    return decided("release_hold", prompt, [find(p), look(p, chk)], [act], verdict, why)


def repay_loan(c: Ctx) -> Draft:
    verdict = outcome(c, "loan_rules", "insufficient_funds", "account_frozen", NOT_IDENTIFIED)
    p = c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(200, 700))
    room = chk.balance - hold_some(c, chk)
    amount = cents_up(room + c.amount(1, 100))  # insufficient_funds: more than is available
    if verdict == "insufficient_funds":
        principal = c.amount(int(amount) + 100, int(amount) + 400)
    else:
        principal = c.amount(200, 950)
    loan = c.s.account(p, "loan", principal)
    if rng.random() < 0.5:  # an earlier repayment, in cash at a branch
        paid = c.amount(20, 90)
        c.s.post("deposit", 10, [(loan, paid), ("INT-USD-CASH", -paid)], "Loan repayment")
    owed = -loan.balance
    if verdict == "loan_rules":  # more than is owed, and affordable
        amount = round(owed + c.amount(1, 60), 2)
        if amount > room:
            c.s.cash(chk, round(amount - room + 50, 2), "deposit", 8, "Payroll")
    elif verdict != "insufficient_funds":
        amount = c.amount(20, max(21, int(min(owed, room - 5))))
    if verdict == "account_frozen":
        frozen(c, chk)
    world_rule(c, p, verdict)
    prompt = (
        f"{p.hello()} Please pay {money(amount)} towards my loan {loan.number} from my "
        f"checking account {chk.number}. {GO}"
    )
    act = C(
        "transfer", customer_id=p.id, from_account=chk.number, to_account=loan.number, amount=amount
    )
    why = f"Paying {money(amount)} into loan {loan.number} breaks the {verdict} rule."
    checks = [find(p), look(p, loan), look(p, chk)]
    return decided("repay_loan", prompt, checks, [act], verdict, why)


def deposit(c: Ctx) -> Draft:
    verdict = outcome(c, "account_frozen", NOT_IDENTIFIED, OTHER_CUSTOMER)
    p = c.person(kyc=("verified", "pending")[c.s.rng.randrange(2)])  # deposits need no KYC
    history(c, p, c.amount(100, 400), c.amount(100, 400))
    acct = p.accounts[("checking", "savings")[c.k % 2]]
    if verdict != OK:
        frozen(c, acct, ("lost_card", "customer_request", "suspected_fraud"))
    amount = c.amount(50, 900)
    world_rule(c, p, verdict, acct)
    prompt = pick(
        c,
        f"{p.hello()} I'm at the counter with {money(amount)} in cash; please deposit it "
        f"into my {acct.type} account {acct.number}. {GO}",
        f"{p.hello()} Please put {money(amount)} in cash into my {acct.type} {acct.number}. {GO}",
    )
    act = C("deposit", customer_id=p.id, account_number=acct.number, amount=amount)
    why = f"{acct.number} is frozen and accepts no postings; unfreezing it comes first."
    return decided("deposit", prompt, [find(p), look(p, acct)], [act], verdict, why)


def reverse_fee(c: Ctx) -> Draft:
    """A fee charged twice; the later one reversed, unless it already was."""
    verdict = outcome(c, "already_reversed", NOT_IDENTIFIED)
    p = c.person()
    chk = history(c, p, c.amount(200, 600))
    days = c.s.rng.randint(2, 9)
    c.s.fee(chk, 12.0, days, "Fee: monthly maintenance")
    dup = c.s.fee(chk, 12.0, days - 0.01, "Fee: monthly maintenance")
    if verdict != OK:  # refunded already (by a colleague, a day later)
        c.s.rows["transactions"][-1]["status"] = "reversed"
        c.s.post(
            "reversal",
            days - 1,
            [(chk, 12.0), ("INT-USD-FEES", -12.0)],
            f"Reversal of {dup} (duplicate)",
            reverses=dup,
        )
    reason = ("duplicate", "posted_in_error")[c.k % 2]
    world_rule(c, p, verdict)
    prompt = (
        f"{p.hello()} The monthly maintenance fee was charged twice on my checking "
        f"{chk.number} {days} days ago. Please reverse the second one. {GO}"
    )
    if reason == "posted_in_error":
        prompt = prompt.replace(
            "reverse the second one", "reverse the later charge, it was posted in error"
        )
    checks = [find(p), C("list_transactions", customer_id=p.id, account_number=chk.number,
                         kind="fee")]  # fmt: skip
    act = C("reverse_transaction", customer_id=p.id, reference=dup, reason=reason)
    why = f"{dup} has already been reversed; nothing is reversed twice."
    return decided("reverse_fee", prompt, checks, [act], verdict, why)


def close_loan(c: Ctx) -> Draft:
    """Close a loan, "no payment today": paid off (close it) or still owing (decline)."""
    verdict = outcome(c, "balance_not_zero", NOT_IDENTIFIED, OTHER_CUSTOMER)
    p = c.person()
    chk = history(c, p, c.amount(400, 900))
    principal = c.amount(200, 600)
    loan = c.s.account(p, "loan", principal)
    first = c.amount(20, int(principal) // 2)
    c.s.cash(chk, principal, "deposit", 60, "Bonus")
    c.s.transfer(chk, loan, first, 40, "Loan repayment")
    if verdict == OK:  # the rest repaid too: nothing outstanding
        c.s.transfer(chk, loan, principal - first, c.s.rng.randint(2, 20), "Loan repayment")
    world_rule(c, p, verdict, loan)
    prompt = pick(
        c,
        f"{p.hello()} I'm done with my loan {loan.number}, please close that account. "
        "I don't want to make any payment today.",
        f"{p.hello()} Please close my loan account {loan.number}; I'm not paying anything "
        "into it today.",
    )
    act = C("close_account", customer_id=p.id, account_number=loan.number)
    why = f"Loan {loan.number} still has {money(-loan.balance)} USD outstanding."
    return decided("close_loan", prompt, [find(p), look(p, loan)], [act], verdict, why)


def reverse_transaction(c: Ctx) -> Draft:
    """Reverse transaction REF, "posted in error": a recent fee or own transfer (allowed), one
    already reversed, one older than 30 days, or a transfer to another customer."""
    verdict = outcome(
        c, "already_reversed", "reversal_window", "reversal_not_allowed", NOT_IDENTIFIED
    )
    p = c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(500, 900))
    sav = c.s.account(p, "savings", c.amount(100, 300))
    days = rng.randint(35, 80) if verdict == "reversal_window" else rng.randint(1, 25)
    if verdict == "reversal_not_allowed":
        q = c.person()
        other = c.s.account(q, "checking", c.amount(100, 300))
        c.s.payee(p, other, q.first)
        amount = c.amount(40, 230)
        ref = c.s.transfer(chk, other, amount, days, f"To {q.first}")
    elif rng.random() < 0.5:
        amount = (12.0, 25.0, 3.0)[rng.randrange(3)]
        ref = c.s.fee(chk, amount, days, "Fee")
    else:
        amount = c.amount(40, 230)
        ref = c.s.transfer(chk, sav, amount, days, "To savings")
    if verdict == "already_reversed":
        tx = next(t for t in c.s.rows["transactions"] if t["reference"] == ref)
        tx["status"] = "reversed"
        legs = [
            (e["account_id"], e["amount"])
            for e in c.s.rows["entries"]
            if e["transaction_id"] == tx["id"]
        ]
        back = [(_acct_or_internal(c, aid), -amt) for aid, amt in legs]
        c.s.post("reversal", days - 0.5, back, f"Reversal of {ref}", reverses=ref)
    world_rule(c, p, verdict)
    prompt = pick(
        c,
        f"{p.hello()} The {money(amount)} transaction {ref} on my checking {chk.number} was "
        f"posted in error. Please reverse it. {GO}",
        f"{p.hello()} Please reverse transaction {ref} ({money(amount)}) on my checking account "
        f"{chk.number}; it was posted in error. {GO}",
    )
    checks = [find(p), C("get_transaction", customer_id=p.id, reference=ref)]
    act = C("reverse_transaction", customer_id=p.id, reference=ref, reason="posted_in_error")
    why = f"{ref} cannot be reversed under the {verdict} rule."
    return decided("reverse_transaction", prompt, checks, [act], verdict, why)


def _acct_or_internal(c: Ctx, account_id: int) -> Acct | str:
    """The story's account with that id, or the internal account's number."""
    for person_accounts in c.s.accounts:
        if person_accounts.id == account_id:
            return person_accounts
    return next(n for n, (i, _) in c.s.internal.accounts.items() if i == account_id)
