"""Helpers for ledger tests: run tools directly on an in-memory database, make small fixtures.

Fixture accounts are funded through real balanced postings, so every state a test builds already
satisfies the ledger's invariants.
"""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy.orm import Session

from app.authoring.replay import open_task_db
from app.authoring.testing import ToolCalls
from app.sdk.environment import ToolContext
from envs.ledger import ENVIRONMENT
from envs.ledger.data import DAILY_LIMIT, TYPE_PREFIX
from envs.ledger.models import Account, Customer, Hold
from envs.ledger.ops import CASH, internal_account, post

NOW = ENVIRONMENT.default_now
DOB = date(1980, 5, 17)


def fresh_db() -> Session:
    db, _ = open_task_db(ENVIRONMENT)
    return db


CALLS = ToolCalls(ENVIRONMENT, omitted_as_null=True)
run, fails = CALLS.run, CALLS.fails


_ids = iter(range(900_000, 1_000_000))


def customer(db: Session, kyc: str = "verified") -> Customer:
    n = next(_ids)
    row = Customer(
        id=n,
        email=f"test{n}@example.org",
        first_name="Test",
        last_name=f"User{n}",
        phone=None,
        date_of_birth=DOB,
        kyc_status=kyc,
        created_at=NOW - timedelta(days=100),
    )
    db.add(row)
    db.flush()
    return row


def account(
    db: Session,
    owner: Customer,
    kind: str = "checking",
    balance: float = 0.0,
    *,
    currency: str = "USD",
    overdraft: float = 0.0,
    days_ago: float = 10,
) -> Account:
    """An open account funded by a cash deposit (or a loan's disbursement) `days_ago`."""
    n = next(_ids)
    acct = Account(
        id=n,
        number=f"{TYPE_PREFIX[kind]}{n:06d}",
        customer_id=owner.id,
        type=kind,
        currency=currency,
        status="open",
        overdraft_allowed=overdraft > 0,
        overdraft_limit=overdraft,
        daily_limit=DAILY_LIMIT[kind],
        balance=0.0,
        opened_at=NOW - timedelta(days=200),
    )
    db.add(acct)
    db.flush()
    if balance:
        cash = internal_account(db, currency, CASH)
        when = ToolContext(now=NOW - timedelta(days=days_ago), session_id="fixture")
        post(db, when, "deposit", [(cash, -balance), (acct, balance)], "Opening")
    db.commit()
    return acct


def hold(db: Session, acct: Account, amount: float, *, expires_in_hours: float) -> Hold:
    n = next(_ids)
    row = Hold(
        code=f"HDT{n}",
        account_id=acct.id,
        amount=amount,
        merchant="Test Merchant",
        status="active",
        created_at=NOW - timedelta(days=3),
        expires_at=NOW + timedelta(hours=expires_in_hours),
    )
    db.add(row)
    db.commit()
    return row


def violations(db: Session) -> list[str]:
    return [v for check in ENVIRONMENT.invariants for v in check(db)]
