"""Single-request write stories: one change the customer asks for, after the reads it needs."""

from __future__ import annotations

from envs.ledger.taskgen.kit import GO, C, Ctx, Draft, find, look, money
from envs.ledger.taskgen.reads import history


def deposit(c: Ctx) -> Draft:
    p = c.person(kyc=("verified", "pending")[c.k % 2])  # deposits need no verified KYC
    history(c, p, c.amount(100, 400), c.amount(100, 400))
    acct = p.accounts[("checking", "savings")[c.k % 2]]
    amount = c.amount(50, 900)
    prompt = (
        f"{p.hello()} I'm at the counter with {money(amount)} in cash; please deposit it "
        f"into my {acct.type} account {acct.number}. {GO}"
    )
    gold = [find(p), C("deposit", customer_id=p.id, account_number=acct.number, amount=amount)]
    return Draft("deposit", prompt, gold, True)


def withdraw(c: Ctx) -> Draft:
    p = c.person()
    overdraft = 500.0 if c.k % 2 else 0.0
    chk = c.s.account(p, "checking", c.amount(200, 400), overdraft=overdraft)
    c.s.cash(chk, c.amount(100, 300), "deposit", 9, "Payroll")
    amount = float((int(chk.balance) // 20 + (5 if overdraft else -3)) * 20)
    prompt = (
        f"{p.hello()} I'd like to withdraw {money(amount)} in cash from my checking account "
        f"{chk.number}. {GO}"
    )
    gold = [find(p), look(p, chk),
            C("withdraw", customer_id=p.id, account_number=chk.number, amount=amount)]  # fmt: skip
    return Draft("withdraw", prompt, gold, True)


def transfer_own(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(400, 900), c.amount(100, 500))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    src, dst = (chk, sav) if c.k % 2 == 0 else (sav, chk)
    amount = c.amount(50, int(min(300, src.balance - 10)))
    prompt = (
        f"{p.hello()} Please move {money(amount)} from my {src.type} {src.number} to my "
        f"{dst.type} {dst.number}. {GO}"
    )
    gold = [find(p)]
    if c.k >= 1:
        gold.append(look(p, src))
    gold.append(
        C(
            "transfer",
            customer_id=p.id,
            from_account=src.number,
            to_account=dst.number,
            amount=amount,
        )
    )
    return Draft("transfer_own", prompt, gold, True)


def pay_beneficiary(c: Ctx) -> Draft:
    p, q = c.person(), c.person()
    history(c, p, c.amount(400, 900))
    chk = p.accounts["checking"]
    other = c.s.account(q, "checking", c.amount(100, 300))
    nick = ("Landlord", "Mom", "Piano teacher")[c.k % 3]
    c.s.payee(p, other, nick)
    amount = c.amount(40, 350)
    prompt = (
        f"{p.hello()} Send {money(amount)} from my checking account to my saved payee "
        f"'{nick}'. {GO}"
    )
    gold = [find(p), C("transfer", customer_id=p.id, from_account=chk.number,
                       to_account=other.number, amount=amount)]  # fmt: skip
    return Draft("transfer_beneficiary", prompt, gold, True)


def add_and_pay(c: Ctx) -> Draft:
    p, q = c.person(), c.person()
    history(c, p, c.amount(400, 900))
    chk = p.accounts["checking"]
    other = c.s.account(q, "checking", c.amount(100, 300))
    nick = f"{q.first} {q.last}"
    amount = c.amount(30, 250)
    prompt = (
        f"{p.hello()} Please save account {other.number} as a payee under the name "
        f"'{nick}' and then send {money(amount)} to it from my checking. {GO}"
    )
    gold = [
        find(p),
        C("add_beneficiary", customer_id=p.id, account_number=other.number, nickname=nick),
        C("transfer", customer_id=p.id, from_account=chk.number, to_account=other.number,
          amount=amount),
    ]  # fmt: skip
    return Draft("add_beneficiary", prompt, gold, True)


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
    )[c.k % 2]
    prompt = f"{p.hello()} Please freeze my {acct.type} account {acct.number}; {why}. {GO}"
    gold = [find(p), C("freeze_account", customer_id=p.id, account_number=acct.number,
                       reason=reason)]  # fmt: skip
    return Draft("freeze", prompt, gold, True)


def unfreeze(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 600))
    reason = ("lost_card", "customer_request")[c.k % 2]
    sav = c.s.account(p, "savings", c.amount(100, 500), status="frozen", freeze_reason=reason)
    why = "I found my card again" if reason == "lost_card" else "I'm back from my trip"
    prompt = (
        f"{p.hello()} {why.capitalize()}. Please unfreeze my savings account {sav.number}. {GO}"
    )
    gold = [find(p), look(p, sav),
            C("unfreeze_account", customer_id=p.id, account_number=sav.number)]  # fmt: skip
    return Draft("unfreeze", prompt, gold, True)


def reverse_fee(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(200, 600))
    chk = p.accounts["checking"]
    c.s.fee(chk, 12.0, 2, "Fee: monthly maintenance")
    dup = c.s.fee(chk, 12.0, 2 - 0.01, "Fee: monthly maintenance")
    reason = ("duplicate", "posted_in_error")[c.k % 2]
    prompt = (
        f"{p.hello()} The monthly maintenance fee was charged twice on my checking "
        f"{chk.number} two days ago. Please reverse the second one. {GO}"
    )
    if reason == "posted_in_error":
        prompt = prompt.replace(
            "reverse the second one", "reverse the later charge, it was posted in error"
        )
    gold = [
        find(p),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="fee"),
        C("reverse_transaction", customer_id=p.id, reference=dup, reason=reason),
    ]
    return Draft("reverse_fee", prompt, gold, True)


def release_hold(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(300, 600))
    chk = p.accounts["checking"]
    code = c.s.hold(chk, c.amount(40, 200), "Hertz Airport", 150, 120)
    prompt = (
        f"{p.hello()} A car rental hold from Hertz is still blocking money on my checking "
        f"{chk.number}, and I returned the car a week ago. Please remove it. {GO}"
    )
    gold = [find(p), look(p, chk), C("release_hold", customer_id=p.id, hold_code=code)]
    return Draft("release_hold", prompt, gold, True)


def repay_loan(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(600, 900))
    chk = p.accounts["checking"]
    loan = c.s.account(p, "loan", float(c.s.rng.randint(8, 19) * 50))
    amount = float(c.s.rng.randint(2, 6) * 25)
    prompt = (
        f"{p.hello()} Please pay {money(amount)} towards my loan {loan.number} from my "
        f"checking account. {GO}"
    )
    gold = [find(p), look(p, loan),
            C("transfer", customer_id=p.id, from_account=chk.number, to_account=loan.number,
              amount=amount)]  # fmt: skip
    return Draft("repay_loan", prompt, gold, True)
