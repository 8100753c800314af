"""Hard tier by many per-record decisions (difficulty 5): `wire_fees` reviews every wire
transfer fee of a checking account's last 30 days under the policy's wire fee rule. Each fee's
verdict joins facts of several tool outputs: its day (the fee list), the day's transfers out (the
transfer list), where each went (get_transaction against the customer's own accounts), and how
many small transfers to others the month already had (the free allowance, counted from the
1st, often before the 30-day window). Named fees extend the review: charged in error but too old
is declined, each named; due is skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from envs.ledger.taskgen.kit import NOW, Acct, C, Ctx, Draft, Person, find, look, money

WIRE, WIRE_MEMO = 25.0, "Fee: wire transfer"
SMALL = 200.0  # a transfer of at most this much to another customer may be free
FREE_PER_MONTH = 2  # ... but only this many a month per account
WINDOW = timedelta(days=30)
START = NOW - WINDOW  # a fee posted at or after this is still reversible
MEMOS = ("Invoice", "Payment", "Transfer", "Split bill", "Reimbursement", "Deposit share")
NICKS = ("Landlord", "Plumber", "Mom", "Tutor", "Accountant", "Printer shop", "Florist")


@dataclass
class Move:
    """A transfer touching checking: `other` to or from a payee, else savings; `out` or in."""

    when: datetime
    amount: float
    other: bool
    out: bool = True
    payee: int = 0
    ref: str = ""

    @property
    def small(self) -> bool:
        return self.amount <= SMALL


@dataclass
class Fee:
    """A wire fee on checking: `reversed` already; `verdict` due, error or reversed."""

    when: datetime
    reversed: bool = False
    verdict: str = ""
    ref: str = ""


@dataclass
class Plan:
    moves: list[Move] = field(default_factory=list)
    fees: list[Fee] = field(default_factory=list)


def at(day: int, hour: int, minute: int) -> datetime:
    """`hour:minute` on the calendar day `day` days before today (minutes may overflow)."""
    return datetime.combine(NOW.date() - timedelta(days=day), time(hour)) + timedelta(
        minutes=minute
    )


def chargeable(moves: list[Move]) -> list[Move]:
    """The policy's chargeable transfers: out to another customer, over 200.00, or of 200.00 or
    less beyond the month's first two such (counted in posting order)."""
    found: list[Move] = []
    small: dict[tuple[int, int], int] = {}  # month -> small transfers to others so far
    for m in sorted(moves, key=lambda m: m.when):
        if not (m.out and m.other):
            continue
        month = (m.when.year, m.when.month)
        if m.small:
            small[month] = small.get(month, 0) + 1
            if small[month] <= FREE_PER_MONTH:
                continue
        found.append(m)
    return found


def judge(plan: Plan) -> None:
    """Each fee's verdict: per calendar day the earliest posted fees, as many as the day's
    chargeable transfers, are due; every later one is an error; reversed ones are not counted."""
    owed: dict[object, int] = {}
    for m in chargeable(plan.moves):
        owed[m.when.date()] = owed.get(m.when.date(), 0) + 1
    seen: dict[object, int] = {}
    for f in sorted(plan.fees, key=lambda f: f.when):
        if f.reversed:
            f.verdict = "reversed"
            continue
        day = f.when.date()
        seen[day] = seen.get(day, 0) + 1
        f.verdict = "due" if seen[day] <= owed.get(day, 0) else "error"


def draw_plan(c: Ctx, mode: str, payees: int) -> Plan:
    """Transfers from March 1 on and the fees the bank's system charged for them (`mode`: mixed,
    all in error in the window, or none in error in the window)."""
    rng = c.s.rng
    plan = Plan()
    old = sorted(rng.sample(range(31, 46), rng.randint(3, 5)), reverse=True)  # March 1-15
    many = (9, 11) if mode == "none" else (8, 10)
    new = sorted(rng.sample(range(2, 30), rng.randint(*many)), reverse=True)  # window days
    straddle = mode != "none" and rng.random() < 0.4
    if straddle:  # a transfer at 23:5x whose fee came minutes after midnight: the next day
        day = next((d for d in new if d - 1 >= 1 and d - 1 not in new and d + 1 not in new), None)
        straddle = day is not None
    for d in [*old, 30, *new]:
        inside = d <= 30  # the boundary day counts with the window
        kinds = ["big", "small", "small", "own", "in", "pair"]
        if mode == "all" and inside:
            kinds = ["small", "own", "own", "in"]
        elif mode == "none" and inside:
            kinds = ["big", "big", "big", "small", "pair", "in"]
        kind = rng.choice(kinds)
        if mode == "all" and kind == "small" and _smalls(plan, at(d, 12, 0)) >= FREE_PER_MONTH:
            kind = "own"  # a third small one would owe its fee
        if d == 30:  # the window's boundary: a fee minutes inside or outside it
            kind = "big" if mode == "none" else rng.choice(("own", "small"))
        hour, minute = rng.randint(8, 19), rng.randint(0, 50)
        if d == 30:
            hour, minute = 9, 30 + rng.choice((-1, 1)) * rng.randint(1, 25) - 4
        if straddle and d == day:
            hour, minute, kind = 23, rng.randint(48, 53), "late"
        when = at(d, hour, minute)
        calm = mode == "none" and inside  # nothing in error inside the window
        _event(c, plan, kind, when, payees, calm, mode == "all" and inside)
        if kind == "late":
            plan.fees.append(Fee(at(d - 1, 0, rng.randint(1, 9))))
    if not any(f.when < START for f in plan.fees) or mode == "none":
        # An old fee charged in error (for a transfer to savings), one the customer may name.
        d = rng.choice([x for x in range(31, 46) if x not in old])
        when = at(d, rng.randint(8, 19), rng.randint(0, 50))
        plan.moves.append(Move(when, c.amount(40, 400), False))
        plan.fees.append(Fee(when + timedelta(minutes=rng.randint(2, 9))))
    judge(plan)
    return plan


def _smalls(plan: Plan, when: datetime) -> int:
    """Transfers of 200.00 or less to others in `when`'s month so far."""
    return sum(
        m.out and m.other and m.small and (m.when.year, m.when.month) == (when.year, when.month)
        for m in plan.moves
    )


def _event(
    c: Ctx, plan: Plan, kind: str, when: datetime, payees: int, calm: bool, all_err: bool
) -> None:
    """One day's transfers and wire fees (`calm`: no fee in error; `all_err`: no fee due)."""
    rng = c.s.rng
    later = timedelta(minutes=rng.randint(2, 9))
    payee = rng.randrange(payees)
    edge = rng.random() < 0.25  # amounts on the 200.00 line
    if kind in ("big", "late"):
        amount = 200.01 if edge else c.amount(201, 950)
        plan.moves.append(Move(when, amount, True, payee=payee))
        if kind == "big":
            plan.fees.append(Fee(when + later))
            if not calm and rng.random() < 0.2:  # charged twice: the later one in error
                plan.fees.append(Fee(when + later + timedelta(minutes=rng.randint(20, 200))))
    elif kind == "small":
        amount = 200.0 if edge else c.amount(15, 199)
        plan.moves.append(Move(when, amount, True, payee=payee))
        # Fee charged: due if the month's free ones are used up, else in error.
        if all_err or rng.random() < (0.3 if calm else 0.75):
            plan.fees.append(Fee(when + later))
    elif kind in ("own", "in"):
        other = kind == "in" and rng.random() < 0.6
        plan.moves.append(Move(when, c.amount(40, 450), other, out=kind == "own", payee=payee))
        if not calm and (all_err or rng.random() < 0.6):
            plan.fees.append(Fee(when + later, reversed=rng.random() < 0.15))
    else:  # a pair: a chargeable transfer and a transfer to savings, one fee each
        big = Move(when, c.amount(201, 700), True, payee=payee)
        own = Move(when + timedelta(minutes=rng.randint(30, 240)), c.amount(40, 500), False)
        if rng.random() < 0.5:  # the savings transfer first: its fee is the day's due one
            big.when, own.when = own.when, big.when
        plan.moves += [big, own]
        plan.fees.append(Fee(big.when + later))
        if not calm:
            plan.fees.append(Fee(own.when + later))
    if calm:  # a small transfer's fee here must be due: drop it when the month allows it free
        judge(plan)
        plan.fees = [f for f in plan.fees if not (f.when >= START and f.verdict == "error")]


def wire_fees(c: Ctx) -> Draft:
    """Refund every wire fee charged in error on a checking account in the last 30 days (and the
    ones the customer names), by the policy's wire fee rule: a fee per chargeable transfer on its
    own calendar day; small transfers to others free twice a month; the day's earliest fees due.
    A named fee charged in error more than 30 days ago is declined (each named)."""
    rng = c.s.rng
    mode = rng.choices(("mixed", "all", "none"), (8, 1, 1))[0]
    p = c.person()
    chk = _checking(c, p)
    sav = c.s.account(p, "savings", c.amount(600, 990))
    payees: list[Acct] = []
    nicks = list(NICKS)
    rng.shuffle(nicks)
    for nick in nicks[:3]:
        q = c.person()
        acct = c.s.account(q, "checking", c.amount(700, 990))
        c.s.payee(p, acct, nick)
        payees.append(acct)
    for _ in range(20):
        plan = draw_plan(c, mode, len(payees))
        if _fits(plan, mode):
            break
    else:  # pragma: no cover - the draw's numbers never allow it in practice
        raise RuntimeError("no wire fee plan fits")
    _materialise(c, plan, chk, sav, payees)
    for acct in (chk, sav, *payees):  # every balance stays above zero at every step's end
        if acct.balance < 50:
            c.s.cash(acct, round(100 - acct.balance, 2), "deposit", 59.5, "Deposit")
            _stamp(c, at(59, 10, 0))
    named = _named(c, plan, mode)
    outs = sorted((m for m in plan.moves if m.out), key=lambda m: m.when)
    refunds = sorted(
        (f for f in plan.fees if f.verdict == "error" and (f.when >= START)),
        key=lambda f: f.when,
    )
    refused = [f for f in named if f.verdict == "error" and f.when < START]
    ask = ""
    if named:
        refs = ", ".join(f.ref for f in named)
        ask = (
            f" I'm fairly sure {'this one was' if len(named) == 1 else 'these were'} charged in "
            f"error too: {refs}. Refund {'it' if len(named) == 1 else 'them'} as well if "
            f"{'it was' if len(named) == 1 else 'they were'}; if not, leave "
            f"{'it' if len(named) == 1 else 'them'}."
        )
    prompt = (
        f"{p.hello()} I think your system has been charging me wire transfer fees it shouldn't. "
        f"Please go through the wire transfer fees on my checking account {chk.number} from the "
        "last 30 days and refund every one that was charged in error under your wire fee rules; "
        f"the ones that were due can stay.{ask} You have my confirmation."
    )
    gold = [
        find(p),
        look(p, chk),
        C("list_transactions", customer_id=p.id, account_number=chk.number, kind="fee", limit=100),
        C(
            "list_transactions",
            customer_id=p.id,
            account_number=chk.number,
            kind="transfer",
            limit=100,
        ),
        *(C("get_transaction", customer_id=p.id, reference=m.ref) for m in outs),
        *(
            C("reverse_transaction", customer_id=p.id, reference=f.ref, reason="posted_in_error")
            for f in refunds
        ),
    ]
    if not refused:
        return Draft("hard_wire_fees", prompt, gold, True)
    refuse = [
        C("reverse_transaction", customer_id=p.id, reference=f.ref, reason="posted_in_error")
        for f in refused
    ]
    names = " and ".join(f.ref for f in refused)
    why = (
        f"{names}: charged in error, but more than 30 days ago, so no longer reversible. "
        f"{len(refunds)} wire fee(s) of {money(WIRE)} refunded."
    )
    return Draft(
        "hard_wire_fees",
        prompt,
        gold,
        bool(refunds),
        forbidden=(refuse[0], "reversal_window"),
        also_refused=tuple(refuse[1:]),
        decline="reversal_window",
        decline_message=why,
    )


def _checking(c: Ctx, p: Person) -> Acct:
    """A checking account funded for a month and a half of transfers, with the other kinds of
    fees (maintenance, statements) as look-alikes of the wire fees (a story seeds at most 50
    postings: this history stays short)."""
    rng = c.s.rng
    chk = c.s.account(p, "checking", c.amount(700, 990))
    c.s.cash(chk, float(rng.randint(40, 60) * 100), "deposit", 50 + rng.random(), "Bonus")
    c.s.cash(chk, c.amount(600, 990), "deposit", 12 + rng.random(), "Payroll")
    c.s.fee(chk, 12.0, 20 + rng.random(), "Fee: monthly maintenance")
    for _ in range(rng.randint(1, 2)):
        c.s.fee(chk, 3.0, rng.randint(2, 40) + rng.random(), "Fee: paper statement")
    return chk


def _fits(plan: Plan, mode: str) -> bool:
    """The draw is usable: enough fees to review, a gold of 15-30 calls, and the mode holds."""
    outs = sum(m.out for m in plan.moves)
    window = [f for f in plan.fees if f.when >= START]
    errors = sum(f.verdict == "error" for f in window)
    dues = sum(f.verdict == "due" for f in window)
    if mode == "all" and (dues or not errors):
        return False
    if mode == "none" and errors:
        return False
    if mode == "mixed" and not (errors >= 2 and dues >= 2):
        return False
    postings = len(plan.moves) + len(plan.fees) + sum(f.reversed for f in plan.fees)
    return len(window) >= 8 and 15 <= 4 + outs + errors + 1 <= 30 and postings <= 38


def _materialise(c: Ctx, plan: Plan, chk: Acct, sav: Acct, payees: list[Acct]) -> None:
    """The plan's transfers and fees as seeded postings, at their exact times."""
    rng = c.s.rng
    for m in sorted(plan.moves, key=lambda m: m.when):
        other = payees[m.payee] if m.other else sav
        src, dst = (chk, other) if m.out else (other, chk)
        m.ref = c.s.transfer(src, dst, m.amount, _days(m.when), rng.choice(MEMOS))
        _stamp(c, m.when)
    for f in sorted(plan.fees, key=lambda f: f.when):
        f.ref = c.s.fee(chk, WIRE, _days(f.when), WIRE_MEMO)
        _stamp(c, f.when)
        if f.reversed:  # refunded already by a colleague, a day later
            c.s.rows["transactions"][-1]["status"] = "reversed"
            back = f.when + timedelta(days=1)
            c.s.post(
                "reversal",
                _days(back),
                [(chk, WIRE), ("INT-USD-FEES", -WIRE)],
                f"Reversal of {f.ref} (posted_in_error)",
                reverses=f.ref,
            )
            _stamp(c, back)


def _named(c: Ctx, plan: Plan, mode: str) -> list[Fee]:
    """The 0-3 fees the customer names: in about a third of the draws (always when nothing in
    the window was charged in error, so the task is never a no-op) one or two old fees charged
    in error (declined), else none of those; besides, old fees that were due and fees of the
    window, in error or due (skipped or refunded like the rest)."""
    rng = c.s.rng
    wire = [f for f in plan.fees if not f.reversed]
    old_err = [f for f in wire if f.when < START and f.verdict == "error"]
    others = [f for f in wire if f not in old_err]
    named: list[Fee] = []
    if old_err and (mode == "none" or rng.random() < 0.3):
        named = rng.sample(old_err, min(len(old_err), rng.randint(1, 2)))
    if rng.random() < 0.7:
        named += rng.sample(others, rng.randint(1, 3 - len(named)) if len(named) < 3 else 0)
    return sorted(named, key=lambda f: f.when)


def _days(when: datetime) -> float:
    return (NOW - when) / timedelta(days=1)


def _stamp(c: Ctx, when: datetime) -> None:
    """The last posting's exact time (the float of days would drift by microseconds)."""
    c.s.rows["transactions"][-1]["created_at"] = when.isoformat()
