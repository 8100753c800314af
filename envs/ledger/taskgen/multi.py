"""Stories with several changes: each needs reading first and the writes in a workable order."""

from __future__ import annotations

from envs.ledger.taskgen.kit import (
    GO,
    NOT_IDENTIFIED,
    OK,
    C,
    Ctx,
    Draft,
    decided,
    find,
    look,
    money,
    outcome,
    world_rule,
)
from envs.ledger.taskgen.reads import history


def close_savings(c: Ctx) -> Draft:
    """Sweep savings into checking, then close it: allowed, or refused because savings is
    frozen by the fraud team (no posting can leave it) or the customer is not identified."""
    verdict = outcome(c, "account_frozen", NOT_IDENTIFIED)
    p = c.person()
    history(c, p, c.amount(200, 500), c.amount(100, 600))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    c.s.cash(sav, c.amount(20, 90), "deposit", 15, "Interest")
    if verdict == "account_frozen":
        sav.row["status"], sav.row["freeze_reason"] = "frozen", "suspected_fraud"
    world_rule(c, p, verdict)
    prompt = (
        f"{p.hello()} I want to close my savings account {sav.number}. Move whatever is "
        f"left in it to my checking {chk.number} first. {GO}"
    )
    acts = [
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=chk.number,
          amount=sav.balance),
        C("close_account", customer_id=p.id, account_number=sav.number),
    ]  # fmt: skip
    why = f"Savings {sav.number} is frozen (suspected_fraud): nothing can leave it or close it."
    return decided("multi_close_savings", prompt, [find(p), look(p, sav)], acts, verdict, why)


def reverse_duplicate_transfer(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(600, 900), c.amount(100, 300))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    amount = c.amount(40, 200)
    c.s.transfer(chk, sav, amount, 1, "To savings")
    dup = c.s.transfer(chk, sav, amount, 1 - 0.002, "To savings")
    prompt = (
        f"{p.hello()} Yesterday my transfer of {money(amount)} from checking {chk.number} to "
        f"savings went through twice. Please reverse the duplicate (the later one). {GO}"
    )
    gold = [
        find(p),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="transfer"),
        C("get_transaction", customer_id=p.id, reference=dup),
        C("reverse_transaction", customer_id=p.id, reference=dup, reason="duplicate"),
    ]
    return Draft("multi_reverse_duplicate", prompt, gold, True)


def payoff_loan(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(800, 990))
    chk = p.accounts["checking"]
    loan = c.s.account(p, "loan", c.amount(500, 800))
    c.s.transfer(chk, loan, c.amount(100, 300), 25, "Loan repayment")
    prompt = (
        f"{p.hello()} Please pay off the rest of my loan {loan.number} from my checking and "
        f"then close the loan account. {GO}"
    )
    gold = [
        find(p),
        look(p, loan),
        C("transfer", customer_id=p.id, from_account=chk.number, to_account=loan.number,
          amount=-loan.balance),
        C("close_account", customer_id=p.id, account_number=loan.number),
    ]  # fmt: skip
    return Draft("multi_payoff_loan", prompt, gold, True)


def close_with_hold(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(150, 400), c.amount(100, 400))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    code = c.s.hold(chk, c.amount(20, 80), "Shell Station 114", 200, 120)
    prompt = (
        f"{p.hello()} Please close my checking account {chk.number}: move its whole balance "
        f"to my savings {sav.number}, then close it. There's an old gas station hold on it "
        f"from over a week ago that never went away. {GO}"
    )
    gold = [
        find(p),
        look(p, chk),
        C("release_hold", customer_id=p.id, hold_code=code),
        C("transfer", customer_id=p.id, from_account=chk.number, to_account=sav.number,
          amount=chk.balance),
        C("close_account", customer_id=p.id, account_number=chk.number),
    ]  # fmt: skip
    return Draft("multi_close_with_hold", prompt, gold, True)


def secure_and_replace(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(400, 900), c.amount(100, 400))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    amount = c.amount(20, int(chk.balance) - 20)
    prompt = (
        f"{p.hello()} My debit card for checking {chk.number} was stolen. First move "
        f"{money(amount)} from checking to my savings {sav.number}, then freeze the checking "
        "account (it's a lost card), and order a replacement card, charging the fee to my "
        f"savings. {GO}"
    )
    gold = [
        find(p),
        look(p, chk),
        C("transfer", customer_id=p.id, from_account=chk.number, to_account=sav.number,
          amount=amount),
        C("freeze_account", customer_id=p.id, account_number=chk.number, reason="lost_card"),
        C("charge_fee", customer_id=p.id, account_number=sav.number, fee_type="card_replacement"),
    ]  # fmt: skip
    return Draft("multi_secure_and_replace", prompt, gold, True)


def travel_prep(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(100, 250))
    chk = p.accounts["checking"]
    sav = c.s.account(
        p, "savings", c.amount(500, 900), status="frozen", freeze_reason="customer_request"
    )
    code = c.s.hold(chk, c.amount(30, 90), "Avis Rent-A-Car", 160, 120)
    move, cash = c.amount(100, 400), float(c.s.rng.randint(2, 5) * 20)
    prompt = (
        f"{p.hello()} Before my trip: remove the expired Avis hold on my checking "
        f"{chk.number}, unfreeze my savings {sav.number} (I froze it myself), move "
        f"{money(move)} from savings to checking, and let me withdraw {money(cash)} in cash "
        f"from checking. {GO}"
    )
    gold = [
        find(p),
        look(p, chk),
        C("release_hold", customer_id=p.id, hold_code=code),
        C("unfreeze_account", customer_id=p.id, account_number=sav.number),
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=chk.number,
          amount=move),
        C("withdraw", customer_id=p.id, account_number=chk.number, amount=cash),
    ]  # fmt: skip
    return Draft("multi_travel_prep", prompt, gold, True)


def loan_from_savings(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(100, 300), c.amount(900, 990))
    sav = p.accounts["savings"]
    loan = c.s.account(p, "loan", c.amount(300, 600))
    cash = c.amount(50, 200)
    prompt = (
        f"{p.hello()} Please pay off my loan {loan.number} completely from my savings "
        f"{sav.number}, close the loan account, and then deposit {money(cash)} in cash "
        f"into my savings. {GO}"
    )
    gold = [
        find(p),
        look(p, loan),
        look(p, sav),
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=loan.number,
          amount=-loan.balance),
        C("close_account", customer_id=p.id, account_number=loan.number),
        C("deposit", customer_id=p.id, account_number=sav.number, amount=cash),
    ]  # fmt: skip
    return Draft("multi_loan_from_savings", prompt, gold, True)


def consolidate(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(100, 300), c.amount(700, 990))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    loan = c.s.account(p, "loan", c.amount(200, 500))
    rest = round(sav.balance + loan.balance, 2)
    prompt = (
        f"{p.hello()} I'm simplifying my banking. Use my savings {sav.number} to pay off my "
        f"loan {loan.number} in full, move whatever remains in savings to my checking "
        f"{chk.number}, then close both the loan and the savings account. {GO}"
    )
    gold = [
        find(p),
        look(p, loan),
        look(p, sav),
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=loan.number,
          amount=-loan.balance),
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=chk.number,
          amount=rest),
        C("close_account", customer_id=p.id, account_number=loan.number),
        C("close_account", customer_id=p.id, account_number=sav.number),
    ]  # fmt: skip
    return Draft("multi_consolidate", prompt, gold, True)


def month_end(c: Ctx) -> Draft:
    p, q = c.person(), c.person()
    history(c, p, c.amount(100, 200), c.amount(800, 990))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    c.s.fee(chk, 12.0, 1, "Fee: monthly maintenance")
    dup = c.s.fee(chk, 12.0, 1 - 0.003, "Fee: monthly maintenance")
    landlord = c.s.account(q, "checking", c.amount(100, 300))
    rent, top_up = c.amount(400, 600), c.amount(500, 750)
    prompt = (
        f"{p.hello()} Month-end errands, you have my confirmation for all of them. 1) "
        f"Yesterday's monthly "
        f"maintenance fee on checking {chk.number} was charged twice: reverse the duplicate. "
        f"2) Move {money(top_up)} from savings {sav.number} to checking. 3) Save my "
        f"landlord's account {landlord.number} as a payee named 'Landlord' and pay "
        f"{money(rent)} rent to it from checking. 4) I want a paper statement; charge its "
        "fee to savings."
    )
    gold = [
        find(p),
        look(p, chk),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="fee"),
        C("reverse_transaction", customer_id=p.id, reference=dup, reason="duplicate"),
        C("transfer", customer_id=p.id, from_account=sav.number, to_account=chk.number,
          amount=top_up),
        C("add_beneficiary", customer_id=p.id, account_number=landlord.number,
          nickname="Landlord"),
        C("transfer", customer_id=p.id, from_account=chk.number, to_account=landlord.number,
          amount=rent),
        C("charge_fee", customer_id=p.id, account_number=sav.number, fee_type="paper_statement"),
    ]  # fmt: skip
    return Draft("multi_month_end", prompt, gold, True)


def repay_refuse_close(c: Ctx) -> Draft:
    """Pay X into the loan, then close it: allowed when X is exactly what is owed, a partial
    refusal (the payment made, the close declined) when X leaves something outstanding."""
    verdict = outcome(c, "balance_not_zero")
    p = c.person()
    history(c, p, c.amount(500, 900))
    chk = p.accounts["checking"]
    loan = c.s.account(p, "loan", c.amount(400, 950))
    if c.s.rng.random() < 0.5:
        c.s.transfer(chk, loan, c.amount(20, 90), 20, "Loan repayment")
    owed = -loan.balance
    amount = owed if verdict == OK else c.amount(30, int(owed) - 20)
    if amount > chk.balance - 5:
        c.s.cash(chk, round(amount - chk.balance + 100, 2), "deposit", 6, "Bonus")
    prompt = (
        f"{p.hello()} Please pay {money(amount)} towards my loan {loan.number} from my "
        f"checking {chk.number}, and then close the loan account. {GO}"
    )
    pay = C(
        "transfer", customer_id=p.id, from_account=chk.number, to_account=loan.number, amount=amount
    )
    close = C("close_account", customer_id=p.id, account_number=loan.number)
    left = money(owed - amount)
    why = f"Loan {loan.number} still has {left} USD outstanding after the payment; it stays open."
    checks = [find(p), look(p, loan), look(p, chk)]
    return decided("repay_and_close", prompt, checks, [close], verdict, why, done=[pay])
