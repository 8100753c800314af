"""The deterministic base dataset: ~220 customers, ~385 accounts, ~2,500 transactions.

Built with Core bulk inserts (explicit ids 1..N, stable across builds; task seeds use ids >=
100000). History is simulated in time order through the same posting rules the tools enforce, so
the base state already satisfies every invariant. Randomness comes only from the `rng` passed in.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from envs.ledger.models import CURRENCIES, Account, Beneficiary, Customer, Entry, Hold, Transaction
from envs.ledger.ops import CASH, FEE_INCOME, FEES, cents

N_CUSTOMERS = 220
AS_OF = datetime(2026, 4, 15, 9, 30)
# Base history stops before the clock's day, so no base posting counts towards today's limits.
HISTORY_END = datetime(2026, 4, 14, 18, 0)
TYPE_PREFIX = {"checking": "11", "savings": "22", "loan": "33"}
DAILY_LIMIT = {"checking": 5000.0, "savings": 2500.0, "loan": 100000.0, "internal": 1e9}

FIRST = (
    "Olivia Liam Emma Noah Ava Elijah Sophia James Isabella Lucas Mia Mason Amelia Ethan Harper "
    "Logan Evelyn Aiden Abigail Caleb Ella Owen Scarlett Daniel Grace Henry Chloe Jack Zoe Levi "
    "Lily Samuel Nora Wyatt Hannah Julian Aria Mateo Layla Ezra Riley Leo Camila Isaac Penelope"
).split()
LAST = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill"
).split()
MERCHANTS = ("Shell Station 114", "Hilton Downtown", "Avis Rent-A-Car", "Delta Air Lines",
             "Whole Foods #22", "Marriott Bayfront", "Hertz Airport", "Best Buy #310")  # fmt: skip


def account_number(kind: str, account_id: int) -> str:
    return f"{TYPE_PREFIX[kind]}{account_id:06d}"


class _Ledger:
    """Rows being built, plus the running balances the posting rules check."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: dict[type, list[dict[str, Any]]] = {}
        self.balance: dict[int, float] = {}
        self.accounts: dict[int, dict[str, Any]] = {}
        self.refs: set[str] = set()

    def add(self, model: type, **row: Any) -> int:
        rows = self.rows.setdefault(model, [])
        row["id"] = len(rows) + 1
        rows.append(row)
        return int(row["id"])

    def account(self, **row: Any) -> int:
        row.setdefault("status", "open")
        row.setdefault("freeze_reason", None)
        row.setdefault("closed_at", None)
        row.setdefault("overdraft_allowed", False)
        row.setdefault("overdraft_limit", 0.0)
        row["daily_limit"] = DAILY_LIMIT[row["type"]]
        aid = self.add(Account, balance=0.0, **row)
        if row["type"] != "internal":
            self.rows[Account][-1]["number"] = account_number(row["type"], aid)
        self.balance[aid] = 0.0
        self.accounts[aid] = self.rows[Account][-1]
        return aid

    def can_debit(self, aid: int, amount: float) -> bool:
        acct = self.accounts[aid]
        if acct["type"] == "internal":
            return True
        floor = -acct["overdraft_limit"] if acct["overdraft_allowed"] else 0.0
        return acct["type"] != "loan" and cents(self.balance[aid] - amount) >= floor

    def post(self, kind: str, when: datetime, legs: list[tuple[int, float]], memo: str) -> int:
        ref = f"TX{self.rng.getrandbits(40):010X}"
        while ref in self.refs:
            ref = f"TX{self.rng.getrandbits(40):010X}"
        self.refs.add(ref)
        tid = self.add(
            Transaction,
            reference=ref,
            kind=kind,
            status="posted",
            created_at=when,
            memo=memo,
            reverses_id=None,
        )
        for aid, amount in legs:
            self.add(Entry, transaction_id=tid, account_id=aid, amount=cents(amount))
            self.balance[aid] = cents(self.balance[aid] + amount)
        return tid

    def reverse(self, tid: int, when: datetime) -> None:
        original = self.rows[Transaction][tid - 1]
        original["status"] = "reversed"
        legs = [
            (e["account_id"], -e["amount"]) for e in self.rows[Entry] if e["transaction_id"] == tid
        ]
        rid = self.post("reversal", when, legs, f"Reversal of {original['reference']} (fee_refund)")
        row = self.rows[Transaction][rid - 1]
        row["reference"] = "RV" + original["reference"][2:]
        row["reverses_id"] = tid


def _customer(lg: _Ledger, n: int, internal: dict[tuple[str, str], int]) -> None:
    rng = lg.rng
    first, last = rng.choice(FIRST), rng.choice(LAST)
    opened = AS_OF - timedelta(days=rng.randint(60, 900))
    cid = lg.add(
        Customer,
        email=f"{first}.{last}{n}@mail.example".lower(),
        first_name=first,
        last_name=last,
        phone=f"+1-555-{rng.randint(100, 999)}-{rng.randint(0, 9999):04d}",
        date_of_birth=date(rng.randint(1950, 2004), rng.randint(1, 12), rng.randint(1, 28)),
        kyc_status=rng.choices(("verified", "pending", "rejected"), (88, 8, 4))[0],
        created_at=opened,
    )
    cur = rng.choices(CURRENCIES, (80, 12, 8))[0]
    overdraft = rng.random() < 0.3
    limit = rng.choice((500.0, 1000.0)) if overdraft else 0.0
    checking = lg.account(
        customer_id=cid,
        type="checking",
        currency=cur,
        opened_at=opened,
        overdraft_allowed=overdraft,
        overdraft_limit=limit,
    )
    savings = loan = None
    if rng.random() < 0.6:
        savings = lg.account(customer_id=cid, type="savings", currency=cur, opened_at=opened)
    if rng.random() < 0.15:
        loan = lg.account(customer_id=cid, type="loan", currency=cur, opened_at=opened)
    span = (HISTORY_END - opened).total_seconds()

    def at(share: float) -> datetime:
        return opened + timedelta(seconds=int(span * share))

    cash, fees = internal[(cur, CASH)], internal[(cur, FEE_INCOME)]
    lg.post(
        "deposit",
        at(0.001),
        [(cash, -(o := rng.randint(3, 60) * 50.0)), (checking, o)],
        "Opening deposit",
    )
    if savings:
        lg.post(
            "deposit",
            at(0.002),
            [(cash, -(o := rng.randint(2, 80) * 100.0)), (savings, o)],
            "Opening deposit",
        )
    if loan:
        principal = rng.randint(5, 40) * 500.0
        lg.post(
            "transfer", at(0.003), [(loan, -principal), (checking, principal)], "Loan disbursement"
        )
    for share in sorted(rng.uniform(0.01, 1.0) for _ in range(rng.randint(4, 14))):
        when, roll = at(share), rng.random()
        if roll < 0.3:
            amount = float(rng.randint(800, 4200))
            lg.post("deposit", when, [(cash, -amount), (checking, amount)], "Payroll")
        elif roll < 0.55 and lg.can_debit(checking, a := float(rng.randint(2, 40) * 10)):
            lg.post("withdrawal", when, [(checking, -a), (cash, a)], "ATM withdrawal")
        elif roll < 0.7 and savings and lg.can_debit(checking, a := float(rng.randint(1, 20) * 50)):
            lg.post("transfer", when, [(checking, -a), (savings, a)], "To savings")
        elif roll < 0.8 and loan and lg.balance[loan] < 0:
            a = min(-lg.balance[loan], float(rng.randint(2, 10) * 50))
            if lg.can_debit(checking, a):
                lg.post("transfer", when, [(checking, -a), (loan, a)], "Loan repayment")
        elif lg.can_debit(checking, fee := FEES["monthly_maintenance"]):
            tid = lg.post("fee", when, [(checking, -fee), (fees, fee)], "Fee: monthly maintenance")
            if rng.random() < 0.15:
                lg.reverse(tid, when + timedelta(days=2))
    _statuses(lg, [a for a in (checking, savings, loan) if a])


def _statuses(lg: _Ledger, accounts: list[int]) -> None:
    rng = lg.rng
    for aid in accounts:
        acct, roll = lg.accounts[aid], rng.random()
        if acct["type"] == "savings" and roll < 0.06:  # emptied to cash, then closed
            bal, cash = lg.balance[aid], None
            cash = next(
                a for a, r in lg.accounts.items() if r["number"] == f"INT-{acct['currency']}-{CASH}"
            )
            closed = HISTORY_END + timedelta(minutes=rng.randint(1, 120))
            if bal > 0:
                lg.post("withdrawal", closed, [(aid, -bal), (cash, bal)], "Closing withdrawal")
            acct.update(status="closed", closed_at=closed + timedelta(minutes=5))
        elif roll > 0.95:
            reason = rng.choice(("lost_card", "customer_request", "suspected_fraud", "legal_order"))
            acct.update(status="frozen", freeze_reason=reason)
        if acct["type"] == "checking" and acct["status"] == "open" and rng.random() < 0.25:
            created = AS_OF - timedelta(hours=rng.randint(2, 240))
            released = rng.random() < 0.5
            lg.add(
                Hold,
                code=f"HD{len(lg.rows.get(Hold, [])) + 1:06d}",
                account_id=aid,
                amount=float(rng.randint(2, 30) * 10),
                merchant=rng.choice(MERCHANTS),
                status="released" if released else "active",
                created_at=created,
                expires_at=created + timedelta(days=5),
                released_at=created + timedelta(days=1) if released else None,
            )


def _beneficiaries(lg: _Ledger) -> None:
    rng = lg.rng
    checking = [r for r in lg.rows[Account] if r["type"] == "checking" and r["status"] != "closed"]
    seen: set[tuple[int, int]] = set()
    for _ in range(150):
        payer, payee = rng.sample(checking, 2)
        key = (payer["customer_id"], payee["id"])
        if key in seen or payee["customer_id"] == payer["customer_id"]:
            continue
        seen.add(key)
        payee_customer = lg.rows[Customer][payee["customer_id"] - 1]
        lg.add(
            Beneficiary,
            customer_id=key[0],
            account_id=key[1],
            nickname=f"{payee_customer['first_name']} {payee_customer['last_name'][0]}.",
            created_at=AS_OF - timedelta(days=rng.randint(5, 400)),
        )


def build_base(db: Session, rng: random.Random) -> None:
    lg = _Ledger(rng)
    internal: dict[tuple[str, str], int] = {}
    for cur in CURRENCIES:
        for purpose in (CASH, FEE_INCOME):
            internal[(cur, purpose)] = lg.account(
                number=f"INT-{cur}-{purpose}",
                customer_id=None,
                type="internal",
                currency=cur,
                opened_at=datetime(2015, 1, 1),
                overdraft_allowed=True,
                overdraft_limit=1e9,
            )
    for n in range(1, N_CUSTOMERS + 1):
        _customer(lg, n, internal)
    _beneficiaries(lg)
    for aid, balance in lg.balance.items():
        lg.accounts[aid]["balance"] = balance
    for model in (Customer, Account, Transaction, Entry, Hold, Beneficiary):
        # One executemany per table, parents first; a reversal's original precedes it.
        db.execute(insert(model), lg.rows[model])
