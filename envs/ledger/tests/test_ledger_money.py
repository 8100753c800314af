"""Money-moving tools on a real in-memory ledger: every rule, and the books balance after each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.replay import open_task_db, replay
from app.sdk.environment import ToolContext
from app.verify.state.diff import diff_states
from app.verify.state.dump import dump_state
from envs.ledger import ENVIRONMENT
from envs.ledger.compare import COMPARE
from envs.ledger.models import Beneficiary, Entry, Transaction
from envs.ledger.ops import internal_account, post
from envs.ledger.testing import NOW, account, customer, fails, fresh_db, hold, run, violations

TASKS = [json.loads(line) for line in ENVIRONMENT.tasks_path.read_text().splitlines()]


@pytest.fixture
def db() -> Iterator[Session]:
    session = fresh_db()
    yield session
    assert violations(session) == [], "every test must leave the books balanced"
    session.close()


def entries_of(db: Session, reference: str) -> list[tuple[str, float]]:
    tx = db.scalars(select(Transaction).where(Transaction.reference == reference)).one()
    return sorted((e.account.number, e.amount) for e in tx.entries)


def test_transfer_between_own_accounts_posts_two_balancing_entries(db: Session) -> None:
    c = customer(db)
    chk, sav = account(db, c, balance=500.0), account(db, c, "savings", 100.0)
    out = run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=chk.number,
        to_account=sav.number,
        amount=120.25,
        memo="rainy day",
    )
    ref = out["transaction"]["reference"]
    assert entries_of(db, ref) == sorted([(chk.number, -120.25), (sav.number, 120.25)])
    assert (chk.balance, sav.balance) == (379.75, 220.25)
    assert out["transaction"]["kind"] == "transfer" and out["transaction"]["status"] == "posted"


def test_same_postings_in_another_order_reach_the_same_compared_state() -> None:
    # The consolidate story: two transfers out of savings, whichever comes first.
    task = next(t for t in TASKS if t["family"] == "multi_consolidate")
    calls = task["ground_truth"]
    swapped = [*calls[:3], calls[4], calls[3], *calls[5:]]
    states = []
    for order in (calls, swapped):
        session, now = open_task_db(ENVIRONMENT, task["seed"])
        replay(session, ENVIRONMENT, order, now)
        states.append(dump_state(session.connection(), ENVIRONMENT.metadata.tables, COMPARE))
        session.close()
    assert diff_states(states[0], states[1], COMPARE) == {}


def test_an_identical_second_posting_gets_its_own_reference(db: Session) -> None:
    c = customer(db)
    a, b = account(db, c, balance=500.0), account(db, c, "savings", 500.0)
    args = {"customer_id": c.id, "from_account": a.number, "to_account": b.number, "amount": 10.0}
    first = run(db, "transfer", **args)["transaction"]["reference"]
    again = run(db, "transfer", **args)["transaction"]["reference"]
    assert first.startswith("TX") and len(first) == 12 and again != first


def test_transfer_refuses_other_currency_frozen_closed_and_internal(db: Session) -> None:
    c = customer(db)
    usd, eur = account(db, c, balance=300.0), account(db, c, "savings", 50.0, currency="EUR")
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=usd.number,
        to_account=eur.number,
        amount=10.0,
    )
    assert err.code == "currency_mismatch" and "EUR" in err.message
    frozen = account(db, c, "savings", 10.0)
    frozen.status, frozen.freeze_reason = "frozen", "lost_card"
    db.commit()
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=usd.number,
        to_account=frozen.number,
        amount=10.0,
    )
    assert err.code == "account_frozen"
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=frozen.number,
        to_account=usd.number,
        amount=1.0,
    )
    assert err.code == "account_frozen"
    cash = internal_account(db, "USD", "CASH")
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=usd.number,
        to_account=cash.number,
        amount=1.0,
    )
    assert err.code == "forbidden"
    err = fails(
        db, "transfer", customer_id=c.id, from_account=usd.number, to_account=usd.number, amount=1.0
    )
    assert err.code == "invalid_arguments"


def test_no_negative_balance_unless_overdraft_within_limit(db: Session) -> None:
    c = customer(db)
    plain, od = account(db, c, balance=100.0), account(db, c, balance=100.0, overdraft=200.0)
    sav = account(db, c, "savings")
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=plain.number,
        to_account=sav.number,
        amount=100.01,
    )
    assert err.code == "insufficient_funds" and "100.00" in err.message
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=od.number,
        to_account=sav.number,
        amount=300.0,
    )
    assert od.balance == -200.0
    err = fails(db, "withdraw", customer_id=c.id, account_number=od.number, amount=0.01)
    assert err.code == "insufficient_funds"


def test_active_holds_reduce_what_can_be_spent(db: Session) -> None:
    c = customer(db)
    chk, sav = account(db, c, balance=100.0), account(db, c, "savings")
    hold(db, chk, 60.0, expires_in_hours=24)
    err = fails(db, "withdraw", customer_id=c.id, account_number=chk.number, amount=50.0)
    assert "available balance is 40.00" in err.message
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=chk.number,
        to_account=sav.number,
        amount=40.0,
    )
    assert (
        run(db, "get_account", customer_id=c.id, account_number=chk.number)["available_balance"]
        == 0.0
    )


def test_daily_limit_counts_todays_transfers_and_withdrawals(db: Session) -> None:
    c = customer(db)
    sav, chk = account(db, c, "savings", 3000.0), account(db, c, balance=10.0)
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=sav.number,
        to_account=chk.number,
        amount=2000.0,
    )
    run(db, "withdraw", customer_id=c.id, account_number=sav.number, amount=400.0)
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=sav.number,
        to_account=chk.number,
        amount=100.01,
    )
    assert err.code == "daily_limit" and "100.00" in err.hint  # type: ignore[operator]
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=sav.number,
        to_account=chk.number,
        amount=100.0,
    )


def test_yesterdays_postings_do_not_count_towards_the_limit(db: Session) -> None:
    c = customer(db)
    sav, chk = account(db, c, "savings", 5000.0), account(db, c)
    cash = internal_account(db, "USD", "CASH")
    yesterday = ToolContext(now=NOW - timedelta(days=1), session_id="t")
    post(db, yesterday, "withdrawal", [(sav, -2400.0), (cash, 2400.0)], "yesterday")
    db.commit()
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=sav.number,
        to_account=chk.number,
        amount=2500.0,
    )


def test_kyc_must_be_verified_to_send_or_withdraw_but_not_to_deposit(db: Session) -> None:
    c = customer(db, kyc="pending")
    chk, sav = account(db, c, balance=200.0), account(db, c, "savings")
    for name, extra in (
        ("transfer", {"from_account": chk.number, "to_account": sav.number}),
        ("withdraw", {"account_number": chk.number}),
    ):
        err = fails(db, name, customer_id=c.id, amount=10.0, **extra)
        assert "KYC" in err.message and "pending" in err.message
        assert err.code == "kyc_incomplete"  # the rule's decline code
    run(db, "deposit", customer_id=c.id, account_number=chk.number, amount=10.0)
    assert chk.balance == 210.0


def test_other_customers_account_needs_a_saved_beneficiary(db: Session) -> None:
    me, friend = customer(db), customer(db)
    mine, theirs = account(db, me, balance=300.0), account(db, friend, balance=5.0)
    err = fails(
        db,
        "transfer",
        customer_id=me.id,
        from_account=mine.number,
        to_account=theirs.number,
        amount=50.0,
    )
    assert err.code == "not_a_beneficiary"
    run(db, "add_beneficiary", customer_id=me.id, account_number=theirs.number, nickname="Pal")
    run(
        db,
        "transfer",
        customer_id=me.id,
        from_account=mine.number,
        to_account=theirs.number,
        amount=50.0,
    )
    assert theirs.balance == 55.0
    # Never from someone else's account, beneficiary or not.
    err = fails(
        db,
        "transfer",
        customer_id=me.id,
        from_account=theirs.number,
        to_account=mine.number,
        amount=1.0,
    )
    assert err.code == "other_customer"
    saved = db.scalars(select(Beneficiary).where(Beneficiary.customer_id == me.id)).one()
    assert (saved.nickname, saved.created_at) == ("Pal", NOW)


def test_loans_are_repaid_up_to_what_is_owed_and_never_debited(db: Session) -> None:
    c = customer(db)
    chk, loan = account(db, c, balance=1000.0), account(db, c, "loan", -300.0)
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=chk.number,
        to_account=loan.number,
        amount=300.01,
    )
    assert "300.00" in err.message
    err = fails(
        db,
        "transfer",
        customer_id=c.id,
        from_account=loan.number,
        to_account=chk.number,
        amount=10.0,
    )
    assert "loan" in err.message and err.code == "loan_rules"
    fails(db, "withdraw", customer_id=c.id, account_number=loan.number, amount=10.0)
    run(db, "deposit", customer_id=c.id, account_number=loan.number, amount=100.0)
    run(
        db,
        "transfer",
        customer_id=c.id,
        from_account=chk.number,
        to_account=loan.number,
        amount=200.0,
    )
    assert loan.balance == 0.0


def test_amounts_have_at_most_two_decimals(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=10.0)
    for bad in (1.005, 0.0, -5.0, 1_000_000.01):
        err = fails(db, "deposit", customer_id=c.id, account_number=chk.number, amount=bad)
        assert err.code == "invalid_arguments", bad
    err = fails(
        db, "deposit", customer_id=c.id, account_number=chk.number, amount=1.0, memo="x" * 201
    )
    assert err.code == "invalid_arguments"


def test_deposit_and_withdraw_move_cash_through_the_vault(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=100.0)
    vault = internal_account(db, "USD", "CASH")
    before = vault.balance
    run(db, "deposit", customer_id=c.id, account_number=chk.number, amount=40.0)
    run(db, "withdraw", customer_id=c.id, account_number=chk.number, amount=15.5)
    assert chk.balance == 124.5 and round(vault.balance - before, 2) == -24.5


def test_fees_follow_the_schedule_and_go_to_fee_income(db: Session) -> None:
    c = customer(db)
    chk, loan = account(db, c, balance=20.0), account(db, c, "loan", -100.0)
    income = internal_account(db, "USD", "FEES")
    before = income.balance
    out = run(
        db, "charge_fee", customer_id=c.id, account_number=chk.number, fee_type="card_replacement"
    )
    assert out["balance"] == 10.0 and round(income.balance - before, 2) == 10.0
    err = fails(
        db, "charge_fee", customer_id=c.id, account_number=chk.number, fee_type="wire_transfer"
    )
    assert err.code == "insufficient_funds"
    fails(
        db, "charge_fee", customer_id=c.id, account_number=loan.number, fee_type="paper_statement"
    )


def test_reversal_mirrors_entries_and_marks_the_original(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=50.0)
    fee = run(
        db,
        "charge_fee",
        customer_id=c.id,
        account_number=chk.number,
        fee_type="monthly_maintenance",
    )["transaction"]["reference"]
    out = run(db, "reverse_transaction", customer_id=c.id, reference=fee, reason="fee_refund")
    assert out["original"]["status"] == "reversed"
    assert out["reversal"]["reference"] == "RV" + fee[2:]
    assert out["reversal"]["reverses"] == fee
    assert sorted(e["amount"] for e in out["reversal"]["entries"]) == [-12.0, 12.0]
    assert chk.balance == 50.0
    err = fails(db, "reverse_transaction", customer_id=c.id, reference=fee, reason="duplicate")
    assert err.code == "already_reversed"
    err = fails(
        db, "reverse_transaction", customer_id=c.id, reference="RV" + fee[2:], reason="duplicate"
    )
    assert "final" in err.message


def test_reversal_refused_when_too_old_to_a_payee_or_uncovered(db: Session) -> None:
    me, friend = customer(db), customer(db)
    old = account(db, me, balance=80.0, days_ago=31)
    opening = db.scalars(select(Entry).where(Entry.account_id == old.id)).one().transaction
    err = fails(
        db,
        "reverse_transaction",
        customer_id=me.id,
        reference=opening.reference,
        reason="posted_in_error",
    )
    assert err.code == "reversal_window"
    theirs = account(db, friend)
    run(db, "add_beneficiary", customer_id=me.id, account_number=theirs.number, nickname="F")
    sent = run(
        db,
        "transfer",
        customer_id=me.id,
        from_account=old.number,
        to_account=theirs.number,
        amount=30.0,
    )["transaction"]["reference"]
    err = fails(db, "reverse_transaction", customer_id=me.id, reference=sent, reason="duplicate")
    assert err.code == "reversal_not_allowed"
    # The friend cannot see, let alone reverse, a deposit of mine.
    fresh = account(db, me, balance=40.0, days_ago=1)
    dep = db.scalars(select(Entry).where(Entry.account_id == fresh.id)).one().transaction
    fails(
        db,
        "reverse_transaction",
        customer_id=friend.id,
        reference=dep.reference,
        reason="duplicate",
    )
    run(db, "withdraw", customer_id=me.id, account_number=fresh.number, amount=30.0)
    err = fails(
        db,
        "reverse_transaction",
        customer_id=me.id,
        reference=dep.reference,
        reason="posted_in_error",
    )
    assert err.code == "insufficient_funds"
