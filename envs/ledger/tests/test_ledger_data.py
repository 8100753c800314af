"""The base dataset: the promised size, balanced books (one seed builds the same data twice:
the contract's check, envs check)."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.authoring.replay import memory_engine
from envs.ledger import ENVIRONMENT
from envs.ledger.models import Account, Beneficiary, Customer, Entry, Hold, Transaction
from envs.ledger.testing import violations


def build(seed: int = ENVIRONMENT.base_seed) -> Session:
    db = Session(memory_engine(ENVIRONMENT))
    ENVIRONMENT.build_base(db, random.Random(seed))
    db.commit()
    return db


def count(db: Session, model: Any, *where: Any) -> int:
    return int(db.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def test_realistic_size_and_variety() -> None:
    db = build()
    try:
        assert count(db, Customer) == 220
        assert 300 <= count(db, Account) <= 600
        assert 1500 <= count(db, Transaction) <= 4000
        assert count(db, Entry) == 2 * count(db, Transaction)
        assert count(db, Hold, Hold.status == "active") > 5
        assert count(db, Beneficiary) > 100
        for status in ("open", "frozen", "closed"):
            assert count(db, Account, Account.status == status) > 0, status
        for kind in ("transfer", "deposit", "withdrawal", "fee", "reversal"):
            assert count(db, Transaction, Transaction.kind == kind) > 0, kind
        assert count(db, Customer, Customer.kyc_status != "verified") > 0
        # Base ids stay far below the task range.
        for model in (Customer, Account, Transaction, Entry, Hold, Beneficiary):
            assert (db.scalar(select(func.max(model.id))) or 0) < 100_000
    finally:
        db.close()


def test_base_books_balance_and_closed_accounts_are_empty() -> None:
    db = build()
    try:
        assert violations(db) == []
        closed = db.scalars(select(Account).where(Account.status == "closed")).all()
        assert closed and all(a.balance == 0 for a in closed)
        # Nothing in the base history counts towards today's daily limits.
        today = ENVIRONMENT.default_now.replace(hour=0, minute=0)
        assert count(db, Transaction, Transaction.created_at >= today) == 0
    finally:
        db.close()
