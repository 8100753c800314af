"""Answer-only stories: lookups whose answers come from the task's own world (gold = the reads,
then the answer; state unchanged). Histories hold look-alike records (other fees, other
transfers, holds) so an answer is found by reading, not by pattern."""

from __future__ import annotations

from envs.ledger.taskgen.kit import Acct, C, Ctx, Draft, Person, asked, find, look, money


def history(
    c: Ctx, p: Person, opening: float, savings: float | None = None, *, overdraft: float = 0.0
) -> Acct:
    """A checking account (and savings) with a few weeks of ordinary postings: paydays, cash
    withdrawals and a maintenance fee, a varying number of each (never on the clock's day)."""
    rng = c.s.rng
    chk = c.s.account(p, "checking", opening, overdraft=overdraft)
    paydays = rng.randint(1, 3)
    for i in range(paydays):
        c.s.cash(chk, c.amount(300, 600), "deposit", 12 + 14 * i + rng.random(), "Payroll")
    for _ in range(rng.randint(1, paydays)):
        atm = float(rng.randint(2, 12) * 20)
        c.s.cash(chk, atm, "withdrawal", rng.randint(2, 40) + rng.random(), "ATM withdrawal")
    c.s.fee(chk, 12.0, 20 + rng.random(), "Fee: monthly maintenance")
    if savings is not None:
        c.s.account(p, "savings", savings)
    return chk


def lookup_balance(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(100, 300), c.amount(200, 900))
    sav = p.accounts["savings"]
    if c.s.rng.random() < 0.5:  # interest or a transfer in: the balance is the world's own
        c.s.cash(sav, c.amount(5, 90), "deposit", c.s.rng.randint(2, 25), "Interest")
    prompt = f"{p.hello()} How much money is in my savings account right now?"
    return asked("lookup_balance", prompt, [find(p)], "amount", money(sav.balance))


def lookup_available(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(300, 500))
    chk = p.accounts["checking"]
    held = 0.0
    merchants = ["Hilton Downtown", "Avis Rent-A-Car", "Shell Station 114", "Delta Air Lines"]
    c.s.rng.shuffle(merchants)
    for merchant in merchants[: c.s.rng.randint(1, 3)]:  # one to three holds, all counted
        amount = c.amount(20, 120)
        held += amount
        c.s.hold(chk, amount, merchant, c.s.rng.randint(2, 40), 96)
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
    rng = c.s.rng
    days = rng.randint(2, 6)
    wire = c.s.fee(chk, 25.0, days + rng.random(), "Fee: wire transfer")
    # Look-alikes: an older wire fee and a recent fee of another kind.
    c.s.fee(chk, 25.0, days + rng.randint(12, 30), "Fee: wire transfer")
    c.s.fee(chk, 3.0, rng.randint(1, 9) + 0.5, "Fee: paper statement")
    prompt = (
        f"{p.hello()} I see a 25.00 fee on my checking account {chk.number} from {days} days "
        "ago. What is the reference of that transaction? I need it for my records."
    )
    gold = [find(p), C("list_transactions", customer_id=p.id, account_number=chk.number,
                       kind="fee")]  # fmt: skip
    return asked("lookup_transaction", prompt, gold, "id", wire)


def lookup_transfer(c: Ctx) -> Draft:
    p = c.person()
    history(c, p, c.amount(600, 900), c.amount(100, 300))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    rng = c.s.rng
    other = c.s.account(p, "savings", c.amount(50, 200), label="savings2")
    to, decoy = (sav, other) if rng.random() < 0.5 else (other, sav)
    amount = c.amount(100, 360)
    days = rng.randint(2, 5)
    ref = c.s.transfer(chk, to, amount, days + 0.3, "Moving money")
    # A look-alike: another transfer out, to the other account, another day and amount.
    c.s.transfer(chk, decoy, amount + 20 * rng.randint(1, 4), days + 1.4, "Moving money")
    prompt = (
        f"{p.hello()} {days} days ago {money(amount)} left my checking account {chk.number} by "
        "transfer. Which account did it go to?"
    )
    gold = [
        find(p),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="transfer"),
        C("get_transaction", customer_id=p.id, reference=ref),
    ]
    return asked("lookup_transaction", prompt, gold, "id", to.number)
