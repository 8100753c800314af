"""Account tools and reads on a real in-memory ledger: statuses, holds, payees, identification."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.replay import dump
from envs.ledger import ENVIRONMENT
from envs.ledger.models import Account, Hold
from envs.ledger.testing import (
    DOB,
    NOW,
    account,
    customer,
    fails,
    fresh_db,
    hold,
    run,
    violations,
)


@pytest.fixture
def db() -> Iterator[Session]:
    session = fresh_db()
    yield session
    assert violations(session) == []
    session.close()


def test_freeze_blocks_postings_and_only_open_accounts_freeze(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=100.0)
    out = run(
        db, "freeze_account", customer_id=c.id, account_number=chk.number, reason="suspected_fraud"
    )
    assert (out["status"], out["freeze_reason"]) == ("frozen", "suspected_fraud")
    fails(db, "freeze_account", customer_id=c.id, account_number=chk.number, reason="lost_card")
    for name in ("deposit", "withdraw"):
        err = fails(db, name, customer_id=c.id, account_number=chk.number, amount=1.0)
        assert err.code == "account_frozen"
    err = fails(
        db, "charge_fee", customer_id=c.id, account_number=chk.number, fee_type="paper_statement"
    )
    assert err.code == "account_frozen"


@pytest.mark.parametrize("reason", ["lost_card", "customer_request"])
def test_customer_freezes_can_be_lifted(db: Session, reason: str) -> None:
    c = customer(db)
    chk = account(db, c, balance=10.0)
    run(db, "freeze_account", customer_id=c.id, account_number=chk.number, reason=reason)
    out = run(db, "unfreeze_account", customer_id=c.id, account_number=chk.number)
    assert (out["status"], out["freeze_reason"]) == ("open", None)
    err = fails(db, "unfreeze_account", customer_id=c.id, account_number=chk.number)
    assert "not frozen" in err.message


@pytest.mark.parametrize(
    ("reason", "team"), [("suspected_fraud", "fraud"), ("legal_order", "legal")]
)
def test_fraud_and_legal_freezes_stay(db: Session, reason: str, team: str) -> None:
    c = customer(db)
    chk = account(db, c, balance=10.0)
    chk.status, chk.freeze_reason = "frozen", reason
    db.commit()
    err = fails(db, "unfreeze_account", customer_id=c.id, account_number=chk.number)
    assert err.code == "freeze_not_liftable" and team in err.message


def test_close_needs_zero_balance_no_active_hold_and_an_open_account(db: Session) -> None:
    c = customer(db)
    chk, sav = account(db, c, balance=50.0), account(db, c, "savings", 25.5)
    err = fails(db, "close_account", customer_id=c.id, account_number=sav.number)
    assert err.code == "balance_not_zero" and "25.50" in err.message
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=sav.number,
        to_account=chk.number,
        amount=25.5,
    )
    h = hold(db, sav, 5.0, expires_in_hours=-1)
    err = fails(db, "close_account", customer_id=c.id, account_number=sav.number)
    assert err.code == "active_holds"
    run(db, "release_hold", customer_id=c.id, hold_code=h.code)
    run(db, "freeze_account", customer_id=c.id, account_number=sav.number, reason="lost_card")
    assert fails(db, "close_account", customer_id=c.id, account_number=sav.number).code == (
        "account_frozen"
    )
    run(db, "unfreeze_account", customer_id=c.id, account_number=sav.number)
    out = run(db, "close_account", customer_id=c.id, account_number=sav.number)
    assert out["status"] == "closed" and db.get_one(Account, sav.id).closed_at == NOW
    err = fails(db, "deposit", customer_id=c.id, account_number=sav.number, amount=1.0)
    assert err.code == "account_frozen"  # one code for the rule: frozen or closed


def test_only_expired_holds_of_the_customer_are_released(db: Session) -> None:
    c, other = customer(db), customer(db)
    chk = account(db, c, balance=100.0)
    live, old = hold(db, chk, 30.0, expires_in_hours=5), hold(db, chk, 20.0, expires_in_hours=-2)
    err = fails(db, "release_hold", customer_id=c.id, hold_code=live.code)
    assert err.code == "hold_not_expired"
    assert fails(db, "release_hold", customer_id=other.id, hold_code=old.code).code == "not_found"
    c_account = db.get_one(Account, old.account_id)
    c_account.status, c_account.freeze_reason = "frozen", "lost_card"  # hold status, not account
    out = run(db, "release_hold", customer_id=c.id, hold_code=old.code.lower())
    assert (out["hold"], out["status"]) == (old.code, "released")
    assert out["account"]["status"] == "frozen" and out["account"]["available_balance"] == 70.0
    released = db.get_one(Hold, old.id)
    assert (released.status, released.released_at) == ("released", NOW)
    assert "already" in fails(db, "release_hold", customer_id=c.id, hold_code=old.code).message


def test_beneficiary_rules(db: Session) -> None:
    me, friend, pending = customer(db), customer(db), customer(db, kyc="pending")
    mine, theirs = account(db, me), account(db, friend)
    err = fails(db, "add_beneficiary", customer_id=me.id, account_number=mine.number, nickname="Me")
    assert "own" in err.message
    run(db, "add_beneficiary", customer_id=me.id, account_number=theirs.number, nickname="Pal")
    err = fails(
        db, "add_beneficiary", customer_id=me.id, account_number=theirs.number, nickname="Again"
    )
    assert err.code == "already_exists"
    fails(db, "add_beneficiary", customer_id=pending.id, account_number=theirs.number, nickname="X")
    closed = account(db, friend, "savings")
    closed.status, closed.closed_at = "closed", NOW
    db.commit()
    fails(db, "add_beneficiary", customer_id=me.id, account_number=closed.number, nickname="Y")
    cash = db.scalars(select(Account).where(Account.type == "internal")).first()
    assert cash is not None
    fails(db, "add_beneficiary", customer_id=me.id, account_number=cash.number, nickname="Z")


def test_find_customer_needs_email_and_date_of_birth(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=12.0)
    out = run(db, "find_customer", email=c.email.upper(), date_of_birth=DOB.isoformat())
    assert out["customer_id"] == c.id and out["kyc_status"] == "verified"
    assert out["accounts"] == [
        {
            "number": chk.number,
            "type": "checking",
            "currency": "USD",
            "status": "open",
            "balance": 12.0,
        }
    ]
    err = fails(db, "find_customer", email=c.email, date_of_birth="1980-05-18")
    assert err.code == "not_found"
    err = fails(db, "find_customer", email=c.email, date_of_birth="May 17th")
    assert err.code == "invalid_arguments"


def test_reads_stay_within_the_customer_and_write_nothing(db: Session) -> None:
    me, other = customer(db), customer(db)
    mine, theirs = account(db, me, balance=30.0), account(db, other, balance=40.0)
    run(db, "charge_fee", customer_id=me.id, account_number=mine.number, fee_type="paper_statement")
    before = dump(db, ENVIRONMENT)
    acct = run(db, "get_account", customer_id=me.id, account_number=mine.number)
    assert [e["amount"] for e in acct["recent_entries"]] == [-3.0, 30.0]
    listed = run(db, "list_transactions", customer_id=me.id, account_number=mine.number, kind="fee")
    (fee,) = listed["transactions"]
    tx = run(db, "get_transaction", customer_id=me.id, reference=fee["reference"])
    assert sorted(e["amount"] for e in tx["entries"]) == [-3.0, 3.0]
    assert dump(db, ENVIRONMENT) == before
    err = fails(db, "get_account", customer_id=me.id, account_number=theirs.number)
    assert err.code == "other_customer"
    fails(db, "list_transactions", customer_id=me.id, account_number=theirs.number)
    fails(db, "get_transaction", customer_id=other.id, reference=fee["reference"])


def test_every_tool_is_documented_and_reads_are_marked_read_only() -> None:
    reads = {"find_customer", "get_account", "list_transactions", "get_transaction"}
    own = [t for t in ENVIRONMENT.tools if not t.framework]
    assert 10 <= len(own) <= 14
    assert {t.name for t in ENVIRONMENT.tools if t.framework} == {
        "submit_answer",
        "decline_request",
        "message_user",
    }
    for tool in ENVIRONMENT.tools:
        # The answer tools write the answer row, message_user the conversation (read_only False):
        # no reads of the bank.
        assert tool.read_only == (tool.name in reads), tool.name
        assert len(tool.description) > 60, tool.name
        for name, field in tool.args_model.model_fields.items():
            assert field.description, f"{tool.name}.{name}"
