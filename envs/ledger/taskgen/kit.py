"""Building blocks of the ledger task generator: a seed builder per task story (customers,
accounts with their opening history, holds, payees) and gold-call helpers (the rest is
app/taskgen/kit.py).

Seeded histories go through balanced postings too, and the internal cash and fee accounts are
re-balanced in the seed, so every seeded state already satisfies the ledger's invariants.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.sdk.taskgen import Draft as Draft  # re-exported: what the families return
from app.sdk.taskgen import (
    Phrasing,
    SeedBuilder,
    call,
    name_pool,
    opening,
    sentence_starting,
    sentence_with,
)
from envs.ledger import ENVIRONMENT
from envs.ledger.data import AS_OF, DAILY_LIMIT, TYPE_PREFIX
from envs.ledger.models import Account
from envs.ledger.ops import cents

NOW = AS_OF
# The seed's table order (parents first).
SEED_TABLES = ("customers", "accounts", "transactions", "entries", "holds", "beneficiaries")


def money(value: float) -> str:
    """How amounts appear in prompts and expected outputs (task amounts stay below 1,000)."""
    return f"{value:.2f}"


@dataclass
class Acct:
    id: int
    number: str
    type: str
    currency: str
    row: dict[str, Any]

    @property
    def balance(self) -> float:
        return float(self.row["balance"])


@dataclass
class Person:
    id: int
    first: str
    last: str
    email: str
    dob: str
    accounts: dict[str, Acct] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    def hello(self) -> str:
        return f"Hi, this is {self.name} ({self.email}, born {self.dob})."


class Internal:
    """The base data's internal accounts: number -> (id, balance), read once."""

    def __init__(self, db: Session) -> None:
        rows = db.execute(
            select(Account.number, Account.id, Account.balance).where(Account.type == "internal")
        ).all()
        self.accounts = {n: (i, float(b)) for n, i, b in rows}


class Story:
    """The rows one task seeds on top of the base data (its `SeedBuilder`, id block `index`)."""

    def __init__(self, index: int, rng: random.Random, internal: Internal) -> None:
        self.index, self.rng, self.internal = index, rng, internal
        self.b = SeedBuilder(index, SEED_TABLES, NOW)
        self.rows = self.b.rows
        self.internal_delta: dict[str, float] = defaultdict(float)
        self.accounts: list[Acct] = []  # every account the story opened, in order

    def _ts(self, days_ago: float) -> str:
        return (NOW - timedelta(days=days_ago)).isoformat()

    def person(self, first: str, last: str, kyc: str = "verified") -> Person:
        dob = date(self.rng.randint(1955, 2003), self.rng.randint(1, 12), self.rng.randint(1, 28))
        email = f"{first}.{last}{self.b.code(5)}@example.org".lower()  # the world's number
        row = self.b.add(
            "customers",
            email=email,
            first_name=first,
            last_name=last,
            phone=f"+1-555-{self.rng.randint(100, 999)}-{self.rng.randint(0, 9999):04d}",
            date_of_birth=dob.isoformat(),
            kyc_status=kyc,
            created_at=self._ts(700),
        )
        return Person(row["id"], first, last, email, dob.isoformat())

    def account(
        self,
        p: Person,
        kind: str,
        opening: float,
        *,
        label: str | None = None,
        currency: str = "USD",
        overdraft: float = 0.0,
        status: str = "open",
        freeze_reason: str | None = None,
    ) -> Acct:
        """An account with its opening posting: a cash deposit, or a loan's disbursement."""
        aid = self.b.next_id("accounts")
        row = self.b.add(
            "accounts",
            number=f"{TYPE_PREFIX[kind]}{aid:06d}",
            customer_id=p.id,
            type=kind,
            currency=currency,
            status=status,
            freeze_reason=freeze_reason,
            overdraft_allowed=overdraft > 0,
            overdraft_limit=overdraft,
            daily_limit=DAILY_LIMIT[kind],
            balance=0.0,
            opened_at=self._ts(400),
            closed_at=None,
        )
        acct = Acct(aid, row["number"], kind, currency, row)
        self.accounts.append(acct)
        p.accounts[label or kind] = acct
        if opening:
            memo = "Loan disbursement" if kind == "loan" else "Opening deposit"
            how = "transfer" if kind == "loan" else "deposit"
            self.cash(acct, opening, how, 300, memo)
        return acct

    def _leg(self, target: Acct | str, amount: float) -> tuple[int, float]:
        if isinstance(target, str):  # an internal account's number
            self.internal_delta[target] = cents(self.internal_delta[target] + amount)
            return self.internal.accounts[target][0], amount
        target.row["balance"] = cents(target.row["balance"] + amount)
        return target.id, amount

    def post(
        self,
        kind: str,
        days_ago: float,
        legs: list[tuple[Acct | str, float]],
        memo: str,
        status: str = "posted",
        reverses: str | None = None,
    ) -> str:
        """A balanced transaction; returns its reference."""
        # References are the world's numbers; a reversal's is its original's, as the tool makes.
        ref = f"RV{reverses[2:]}" if kind == "reversal" and reverses else f"TX{self.b.code(9)}"
        rev_id = next(
            (t["id"] for t in self.rows["transactions"] if t["reference"] == reverses), None
        )
        tx = self.b.add(
            "transactions",
            reference=ref,
            kind=kind,
            status=status,
            created_at=self._ts(days_ago),
            memo=memo,
            reverses_id=rev_id,
        )
        for target, amount in legs:
            aid, amt = self._leg(target, cents(amount))
            self.b.add("entries", transaction_id=tx["id"], account_id=aid, amount=amt)
        return ref

    def cash(self, acct: Acct, amount: float, kind: str, days_ago: float, memo: str) -> str:
        """Cash in (deposit, amount > 0) or out (withdrawal); a loan's disbursement."""
        vault = f"INT-{acct.currency}-CASH"
        sign = -1 if kind == "withdrawal" else 1
        if acct.type == "loan":
            sign = -1
        return self.post(kind, days_ago, [(acct, sign * amount), (vault, -sign * amount)], memo)

    def fee(self, acct: Acct, amount: float, days_ago: float, memo: str) -> str:
        income = f"INT-{acct.currency}-FEES"
        return self.post("fee", days_ago, [(acct, -amount), (income, amount)], memo)

    def transfer(self, src: Acct, dst: Acct, amount: float, days_ago: float, memo: str) -> str:
        return self.post("transfer", days_ago, [(src, -amount), (dst, amount)], memo)

    def hold(
        self, acct: Acct, amount: float, merchant: str, hours_ago: float, hours_valid: float
    ) -> str:
        code = f"HD{self.b.code(7)}"
        created = NOW - timedelta(hours=hours_ago)
        self.b.add(
            "holds",
            code=code,
            account_id=acct.id,
            amount=amount,
            merchant=merchant,
            status="active",
            created_at=created.isoformat(),
            expires_at=(created + timedelta(hours=hours_valid)).isoformat(),
            released_at=None,
        )
        return code

    def payee(self, p: Person, acct: Acct, nickname: str) -> None:
        self.b.add(
            "beneficiaries",
            customer_id=p.id,
            account_id=acct.id,
            nickname=nickname,
            created_at=self._ts(90),
        )

    def seed(self) -> dict[str, Any]:
        """The seed, with the internal accounts' new balances (updates of base rows)."""
        balances = [
            {
                "id": self.internal.accounts[number][0],
                "balance": cents(self.internal.accounts[number][1] + delta),
            }
            for number, delta in sorted(self.internal_delta.items())
        ]
        return self.b.seed(updates={"accounts": balances})


C = partial(call, ENVIRONMENT)


def find(p: Person) -> dict[str, Any]:
    return C("find_customer", email=p.email, date_of_birth=p.dob)


def look(p: Person, a: Acct) -> dict[str, Any]:
    return C("get_account", customer_id=p.id, account_number=a.number)


NAMES = name_pool()


@dataclass
class Ctx:
    """What a family function gets: its story (seed builder), its variant k, the name pool."""

    s: Story
    k: int
    names: list[tuple[str, str]]

    def person(self, kyc: str = "verified") -> Person:
        first, last = self.names.pop()
        return self.s.person(first, last, kyc)

    def amount(self, lo: int, hi: int) -> float:
        """A realistic amount with cents, below 1,000 so it reads the same everywhere."""
        return cents(self.s.rng.randint(lo * 100, hi * 100) / 100)


GO = "Please go ahead, you have my confirmation."
# What a draw may reword (app/sdk/phrasing.py): the "Please ..." request (not the consent), the
# consent sentence, and the greeting saying who the customer is (`Person.hello`).
PHRASING = Phrasing(
    request=sentence_starting("Please"),
    keep_request=("go ahead", "confirm"),
    consent=sentence_with("confirmation"),
    greeting=opening(("Hi",), ("this is",)),
    closing=("confirm", "go ahead", "proceed"),
)


def asked(family: str, prompt: str, gold: list[dict[str, Any]], kind: str, value: Any) -> Draft:
    """A question: the gold reads; build_row ends it submitting `value` (a `kind` of
    app/core/values.py)."""
    return Draft(family, prompt, gold, False, answer=(kind, value))


def refused(family: str, prompt: str, gold: list[dict[str, Any]], code: str, message: str) -> Draft:
    """A request the policy forbids: the gold reads, then declines it with reason `code`
    (envs/ledger/policy.py DECLINE_REASONS)."""
    return Draft(family, prompt, gold, False, decline=code, decline_message=message)


OK = "ok"
# Share of draws whose data permits the request (the rest: one of the family's rules forbids it),
# so the request's wording predicts the outcome no better than a coin.
ALLOWED_SHARE = 0.5


def outcome(c: Ctx, *rules: str) -> str:
    """What the data will decide for this draw: OK, or one of `rules` (a decline reason code,
    envs/ledger/policy.py), drawn from the story's seed."""
    rng = c.s.rng
    return OK if rng.random() < ALLOWED_SHARE else rules[rng.randrange(len(rules))]


# Rules every request can break through its world: the date of birth the customer gives is not
# the one on record, or the account they name is a household member's, not theirs.
NOT_IDENTIFIED, OTHER_CUSTOMER = "not_identified", "other_customer"


def misidentified(c: Ctx, p: Person) -> None:
    """The record's date of birth differs from the one the customer states (`p.dob`)."""
    row = next(r for r in c.s.rows["customers"] if r["id"] == p.id)
    born = date.fromisoformat(p.dob)
    shift = (timedelta(days=365), timedelta(days=-1), timedelta(days=31))[c.s.rng.randrange(3)]
    row["date_of_birth"] = (born + shift).isoformat()


def someone_elses(c: Ctx, p: Person, acct: Acct) -> Person:
    """`acct` belongs to a household member (same last name), not to `p`."""
    first, _ = c.names.pop()
    q = c.s.person(first, p.last)
    acct.row["customer_id"] = q.id
    return q


def decided(
    family: str,
    prompt: str,
    checks: list[dict[str, Any]],
    acts: list[dict[str, Any]],
    verdict: str,
    why: str,
    *,
    done: list[dict[str, Any]] | None = None,
) -> Draft:
    """A request the data decides: the gold checks the facts (`checks`, the same in both twins),
    then acts when `verdict` is OK, else declines with the rule's code. `done` are allowed parts
    of the request carried out first (a partial refusal when the rest is forbidden)."""
    done = done or []
    if verdict == OK:
        return Draft(family, prompt, [*checks, *done, *acts], True)
    if verdict == NOT_IDENTIFIED:  # find_customer finds no one: nothing else can be done
        why = "The email and date of birth you gave do not match our records."
        return Draft(family, prompt, [], False, decline=verdict, decline_message=why)
    if verdict == OTHER_CUSTOMER:  # identified; the account is not theirs to look at
        checks, done = checks[:1], []
        why = "That account is not one of yours; I cannot act on another customer's account."
    # The self-check replays the refused call on the gold's final state: the tool itself must
    # refuse it with the rule's code, so the data really decides (one rule broken, not two).
    return Draft(
        family,
        prompt,
        [*checks, *done],
        bool(done),
        forbidden=(acts[0], verdict),
        decline=verdict,
        decline_message=why,
    )


def pick(c: Ctx, *texts: str) -> str:
    """One wording of the family's pool (drawn, never by outcome)."""
    return texts[c.s.rng.randrange(len(texts))]


def world_rule(c: Ctx, p: Person, verdict: str, acct: Acct | None = None) -> None:
    """Make the world break `verdict` when it is one of the rules every request can break."""
    if verdict == NOT_IDENTIFIED:
        misidentified(c, p)
    elif verdict == OTHER_CUSTOMER:
        assert acct is not None
        someone_elses(c, p, acct)
