"""Conversational families: the customer is on the line (message_user) and tells what the opening
request leaves out only when asked; the gold asks, looks up, proposes the exact change (its
account numbers, references and amount) and acts only after the customer's yes. As in writes.py,
about half of the draws' data forbids the change: the gold then declines with the rule's code,
and the customer's script wants no change (nothing to confirm)."""

from __future__ import annotations

from typing import Any

from app.sdk.taskgen import UserChange, UserFact, UserScript
from envs.ledger.taskgen.kit import (
    OK,
    Acct,
    C,
    Ctx,
    Draft,
    Person,
    find,
    look,
    money,
    outcome,
    pick,
)
from envs.ledger.taskgen.reads import history
from envs.ledger.taskgen.writes import cents_up, frozen

YES = ("Yes, please go ahead.", "Yes, that's right. Go ahead.", "Yes, please do that.")
# Fees a customer disputes: (label in the memo and the request, amount).
FEES = (("wire transfer", 25.0), ("paper statement", 3.0), ("foreign transaction", 7.5))


def say(text: str) -> dict[str, Any]:
    """A gold message to the customer."""
    return C("message_user", text=text)


def talked(
    family: str,
    prompt: str,
    checks: list[dict[str, Any]],
    acts: list[dict[str, Any]],
    verdict: str,
    why: str,
    user: UserScript,
) -> Draft:
    """A conversation the data decides: the gold asks and checks (`checks`, the same in both
    twins), then proposes and acts (`acts`, ending with the write) when `verdict` is OK, else
    declines with the rule's code instead of proposing the change. Both twins' user is the same
    script: the customer wants the change either way; the data, read by the gold, decides."""
    if verdict == OK:
        return Draft(family, prompt, [*checks, *acts], True, user=user)
    return Draft(
        family,
        prompt,
        checks,
        False,
        forbidden=(acts[-1], verdict),
        decline=verdict,
        decline_message=why,
        user=user,
    )


def identity(p: Person) -> UserFact:
    return UserFact(
        key="identity",
        value=f"{p.email}, {p.dob}",
        asked_by=["email", "date of birth", "birth date", "birthday", "born"],
        reply=f"Sure: my email is {p.email} and I was born on {p.dob}.",
    )


def talk_transfer(c: Ctx) -> Draft:
    """Facts over turns: "move some money between my checking and one of my savings accounts"
    (into savings for even variants, out of one for odd ones) from a customer who gave only
    their name; who they are, which of their two savings accounts and how much come when asked."""
    verdict = outcome(c, "insufficient_funds", "account_frozen", "kyc_incomplete")
    p = c.person(kyc="pending" if verdict == "kyc_incomplete" else "verified")
    chk = history(c, p, c.amount(300, 800))
    sav = c.s.account(p, "savings", c.amount(150, 500))
    other = c.s.account(p, "savings", c.amount(150, 500), label="savings2")  # the look-alike
    if c.s.rng.random() < 0.5:
        sav, other = other, sav
    into = c.k % 2 == 0
    src, dst = (chk, sav) if into else (sav, chk)
    room = src.balance
    if verdict == "insufficient_funds":
        amount = cents_up(room + c.amount(1, 200))
    else:
        amount = c.amount(20, int(min(600, room - 5)))
    if verdict == "account_frozen":
        frozen(c, src)
    where = "into" if into else "out of"
    facts = [
        identity(p),
        UserFact(
            key="savings_account",
            value=sav.number,
            asked_by=["which savings", "which account", "account number", "which one", "which of"],
            reply=f"{where.capitalize()} my savings account {sav.number}.",
        ),
        UserFact(
            key="amount",
            value=money(amount),
            asked_by=["how much", "amount", "what sum"],
            reply=f"{money(amount)}, please.",
        ),
    ]
    route = f"from my {src.type} account {src.number} to my {dst.type} account {dst.number}"
    move = UserChange(
        tools=["transfer"],
        identifiers=[src.number, dst.number, money(amount)],
        wrong=[other.number],
        yes=YES[c.s.rng.randrange(len(YES))],
        correction=f"No, that's not right: {money(amount)} {route}.",
    )
    need = (
        "move some money from my checking account into one of my savings accounts"
        if into
        else "move some money from one of my savings accounts into my checking account"
    )
    user = UserScript(
        goal=f"Move {money(amount)} {route}.",
        facts=facts,
        changes=[move],
        unclear=f"I'd just like to {need}.",
    )
    prompt = (
        f"Hi, this is {p.name}. {pick(c, f'I would like to {need}.', f'Can you help me {need}?')}"
    )
    checks = [
        say(
            pick(
                c,
                "Happy to help. First I need to identify you: what is the email address on your "
                "profile, and your date of birth?",
                "Sure. Could you tell me your email address and date of birth, so I can find "
                "your profile?",
            )
        ),
        find(p),
        say(
            pick(
                c,
                f"Thank you. You have two savings accounts: which account should the money go "
                f"{'to' if into else 'out of'} (the account number), and how much would you "
                "like to move?",
                f"Thanks. How much would you like to move, and {where} which savings account? "
                "Please give me the account number.",
            )
        ),
        look(p, src),
    ]
    proposal = say(
        f"To confirm: I will transfer {money(amount)} USD from your {src.type} account "
        f"{src.number} to your {dst.type} account {dst.number}. Shall I proceed?"
    )
    act = C(
        "transfer", customer_id=p.id, from_account=src.number, to_account=dst.number, amount=amount
    )
    why = {
        "insufficient_funds": f"Your {src.type} account {src.number} does not have "
        f"{money(amount)} available, so I cannot make this transfer.",
        "account_frozen": f"Your {src.type} account {src.number} is frozen, so nothing can be "
        "sent from it until the freeze is lifted.",
        "kyc_incomplete": "Your identity verification (KYC) is still pending, and transfers "
        "need it completed first.",
    }.get(verdict, "")
    return talked("talk_transfer", prompt, checks, [proposal, act], verdict, why, user)


def talk_fee(c: Ctx) -> Draft:
    """Confirm or correct: "reverse that fee" when the same fee was charged on both accounts and
    twice on one (the checking account's for even variants, the savings account's for odd); the
    customer's answer picks one, a proposal of another is corrected."""
    verdict = outcome(c, "already_reversed", "reversal_window")
    p = c.person()
    rng = c.s.rng
    history(c, p, c.amount(300, 700), c.amount(200, 600))
    chk, sav = p.accounts["checking"], p.accounts["savings"]
    label, fee = FEES[rng.randrange(len(FEES))]
    acct, elsewhere = (chk, sav) if c.k % 2 == 0 else (sav, chk)
    days = rng.randint(35, 60) if verdict == "reversal_window" else rng.randint(2, 9)
    ref = c.s.fee(acct, fee, days + 0.3, f"Fee: {label}")
    # Look-alikes: the same fee on the other account, and on this one another time.
    near = rng.randint(2, 12)
    wrong = [c.s.fee(elsewhere, fee, near + 0.6, f"Fee: {label}")]
    again = days + rng.randint(8, 15) if verdict != "reversal_window" else rng.randint(2, 9)
    if again == days:
        again += 3
    wrong.append(c.s.fee(acct, fee, again + 0.4, f"Fee: {label}"))
    if verdict == "already_reversed":
        tx = next(t for t in c.s.rows["transactions"] if t["reference"] == ref)
        tx["status"] = "reversed"
        income = f"INT-{acct.currency}-FEES"
        c.s.post(
            "reversal", days - 1, [(acct, fee), (income, -fee)], f"Reversal of {ref}", reverses=ref
        )
    what = f"{money(fee)} {label} fee"
    which = f"the one on my {acct.type} account, charged {days} days ago"
    user = UserScript(
        goal=f"Have the {what} {ref} on {acct.type} {acct.number} reversed (posted in error).",
        facts=[
            UserFact(
                key="which_fee",
                value=ref,
                asked_by=["which fee", "which one", "which account", "which charge", "when"],
                reply=f"It's {which}.",
            )
        ],
        changes=[
            UserChange(
                tools=["reverse_transaction"],
                identifiers=[ref],
                wrong=wrong,
                yes=YES[rng.randrange(len(YES))],
                correction=f"No, not that one. I mean {which}.",
            )
        ],
        unclear=f"I was charged a {what} I never should have paid, and I'd like it reversed.",
    )
    prompt = (
        f"{p.hello()} I was charged a {what} that I never should have paid; it was posted in "
        f"error. {pick(c, 'Please reverse it.', 'Could you reverse it for me?')}"
    )
    checks = [
        find(p),
        say(
            pick(
                c,
                f"I can see more than one {what} on your accounts. Which one do you mean: on "
                "which account was it charged, and when?",
                f"There are several {label} fees of {money(fee)} on your accounts. Which one "
                "should be reversed? Please tell me the account and when it was charged.",
            )
        ),
        C("list_transactions", customer_id=p.id, account_number=acct.number, kind="fee"),
    ]
    charged = c.s._ts(days + 0.3)[:10]
    proposal = say(
        f"I found it: the {what} {ref}, charged to your {acct.type} account {acct.number} on "
        f"{charged}. I will reverse it as posted in error. Shall I proceed?"
    )
    act = C("reverse_transaction", customer_id=p.id, reference=ref, reason="posted_in_error")
    why = {
        "already_reversed": f"The {what} {ref} has already been reversed; it is refunded.",
        "reversal_window": f"The {what} {ref} is older than 30 days, past the window in "
        "which a transaction can be reversed.",
    }.get(verdict, "")
    return talked("talk_fee", prompt, checks, [proposal, act], verdict, why, user)


def talk_change_mind(c: Ctx) -> Draft:
    """A change of mind: "send X to my payee from checking"; on the first right proposal the
    customer wants it sent from their savings instead, and only that transfer is made (or
    declined, when the savings account cannot send it)."""
    verdict = outcome(c, "insufficient_funds", "account_frozen")
    p, q, r = c.person(), c.person(), c.person()
    rng = c.s.rng
    chk = history(c, p, c.amount(400, 900))
    low = verdict == "insufficient_funds"
    sav = c.s.account(p, "savings", c.amount(20, 80) if low else c.amount(300, 700))
    nicks = ["Mom", "Piano teacher", "Gym", "Babysitter", "Landlord", "Dentist"]
    rng.shuffle(nicks)
    nick = nicks[0]
    payee = c.s.account(q, "checking", c.amount(100, 300))
    c.s.payee(p, payee, nick)
    decoy = c.s.account(r, "checking", c.amount(100, 300))
    c.s.payee(p, decoy, nicks[1])  # another payee
    if low:  # checking could send it, savings cannot
        amount = c.amount(int(sav.balance) + 10, int(min(sav.balance + 200, chk.balance - 5)))
    else:
        amount = c.amount(30, int(min(300, chk.balance - 5, sav.balance - 5)))
    if verdict == "account_frozen":
        frozen(c, sav, ("lost_card", "customer_request"))
    send = f"{money(amount)} to {nick}"
    first = UserChange(
        tools=["transfer"],
        identifiers=[chk.number, payee.number, money(amount)],
        wrong=[decoy.number],
        yes=YES[0],
        correction=f"No, that's not it: {send} ({payee.number}).",
        change_of_mind=pick(
            c,
            f"Oh, wait. Actually, please take it from my savings account {sav.number} instead; "
            "I'd rather leave my checking alone this month.",
            f"Hmm, on second thought, send it from my savings account {sav.number} instead of "
            "my checking.",
        ),
    )
    final = UserChange(
        tools=["transfer"],
        identifiers=[sav.number, payee.number, money(amount)],
        wrong=[chk.number, decoy.number],
        yes=YES[rng.randrange(len(YES))],
        correction=f"No, I changed my mind: {send} from my savings account {sav.number}, "
        "not from my checking.",
    )
    user = UserScript(
        goal=f"Send {send} ({payee.number}) from savings {sav.number} (first says checking).",
        changes=[first, final],
        unclear=f"I'd like to send {send}, my saved payee.",
    )
    prompt = (
        f"{p.hello()} Please send {money(amount)} to my saved payee '{nick}' from my checking "
        f"account {chk.number}."
    )

    def proposal(src: Acct) -> dict[str, Any]:
        return say(
            f"I will transfer {money(amount)} USD from your {src.type} account {src.number} to "
            f"your payee '{nick}' (account {payee.number}). Shall I proceed?"
        )

    checks = [find(p), look(p, chk), proposal(chk), look(p, sav)]
    act = C(
        "transfer",
        customer_id=p.id,
        from_account=sav.number,
        to_account=payee.number,
        amount=amount,
    )
    why = {
        "insufficient_funds": f"Your savings account {sav.number} does not have "
        f"{money(amount)} available, so I cannot send it from there.",
        "account_frozen": f"Your savings account {sav.number} is frozen, so nothing can be "
        "sent from it.",
    }.get(verdict, "")
    return talked(
        "talk_change_mind",
        prompt,
        checks,
        [proposal(sav), act],
        verdict,
        why,
        user,
    )
