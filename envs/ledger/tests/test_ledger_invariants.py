"""The ledger's invariants: each catches a state written directly with SQL, and through HTTP a
rollout whose final state breaks one earns 0 with the violation in the evidence."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.server.api import create_app
from app.settings import Settings
from envs.ledger import ENVIRONMENT
from envs.ledger.invariants import (
    balances_match_entries,
    no_forbidden_negative,
    transactions_balance,
)
from envs.ledger.testing import account, customer, fresh_db, violations
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, gold_answer, response_object

TASKS = {
    t["task_id"]: t
    for t in map(json.loads, ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines())
}


@pytest.fixture
def db() -> Iterator[Session]:
    session = fresh_db()
    yield session
    session.close()


def test_a_lone_entry_unbalances_its_transaction(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=100.0)
    # Money from nowhere: one entry and a matching stored balance, so only double entry breaks.
    db.execute(
        text(
            "INSERT INTO transactions (id, reference, kind, status, created_at) "
            "VALUES (990001, 'TXFORGED0001', 'deposit', 'posted', '2026-04-15 09:00:00')"
        )
    )
    db.execute(
        text("INSERT INTO entries (transaction_id, account_id, amount) VALUES (990001, :a, 50)"),
        {"a": chk.id},
    )
    db.execute(text("UPDATE accounts SET balance = balance + 50 WHERE id = :a"), {"a": chk.id})
    assert transactions_balance(db) == [
        "transaction TXFORGED0001: 1 entries summing to 50.00, not 0.00"
    ]
    assert balances_match_entries(db) == [] and no_forbidden_negative(db) == []


def test_a_stored_balance_off_its_entries_is_caught(db: Session) -> None:
    c = customer(db)
    chk = account(db, c, balance=100.0)
    db.execute(text("UPDATE accounts SET balance = 175.25 WHERE id = :a"), {"a": chk.id})
    assert balances_match_entries(db) == [
        f"account {chk.number}: stored balance 175.25 but its entries sum to 100.00"
    ]
    assert transactions_balance(db) == []


@pytest.mark.parametrize(
    ("kind", "overdraft", "balance", "broken"),
    [
        ("checking", 0.0, -0.01, True),
        ("checking", 300.0, -300.0, False),
        ("checking", 300.0, -300.01, True),
        ("savings", 0.0, 5.0, False),
        ("savings", 0.0, -5.0, True),
        ("loan", 0.0, -10.0, False),
        ("loan", 0.0, 0.01, True),
    ],
)
def test_negative_balances_only_where_allowed(
    db: Session, kind: str, overdraft: float, balance: float, broken: bool
) -> None:
    c = customer(db)
    acct = account(db, c, kind, overdraft=overdraft)
    # A balanced posting against the vault: only the floor rule can break.
    db.execute(
        text(
            "INSERT INTO transactions (id, reference, kind, status, created_at) "
            "VALUES (990002, 'TXFORGED0002', 'withdrawal', 'posted', "
            "'2026-04-15 09:00:00')"
        )
    )
    vault = db.execute(text("SELECT id FROM accounts WHERE number = 'INT-USD-CASH'")).scalar_one()
    for account_id, amount in ((acct.id, balance), (vault, -balance)):
        db.execute(
            text(
                "INSERT INTO entries (transaction_id, account_id, amount) VALUES (990002, :a, :m)"
            ),
            {"a": account_id, "m": amount},
        )
        db.execute(
            text("UPDATE accounts SET balance = balance + :m WHERE id = :a"),
            {"a": account_id, "m": amount},
        )
    found = no_forbidden_negative(db)
    assert bool(found) == broken, found
    assert transactions_balance(db) == [] and balances_match_entries(db) == []
    assert (acct.number in " ".join(found)) == broken
    assert (violations(db) != []) == broken


async def _rollout_then_tamper(tmp_path: Path, task: dict[str, Any], sql: str) -> dict[str, Any]:
    """Seed, make the gold calls over HTTP, then write `sql` straight into the session file."""
    settings = Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET)
    app = create_app(settings, ENVIRONMENT)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as shared:
            async with fresh_client(shared) as client:
                assert (await client.post("/seed_session", json=task)).status_code == 200
                for call in task["ground_truth"]:
                    out = await client.post(f"/{call['name']}", json=call["arguments"])
                    assert "output" in out.json(), out.text
                (path,) = (settings.data_dir / "sessions" / "ledger").glob("*.sqlite")
                conn = sqlite3.connect(path)
                with conn:  # commits
                    conn.execute(sql)
                conn.close()
                body = {**task, "response": response_object([], gold_answer(task))}
                verified = await client.post("/verify", json=body)
                assert verified.status_code == 200, verified.text
                return verified.json()


def _first(family: str) -> dict[str, Any]:
    """The first shipped task of `family` whose gold acts (not a twin the data forbids)."""
    return next(t for t in TASKS.values() if t["family"] == family and "expected_decline" not in t)


async def test_gold_rollout_keeps_invariants(tmp_path: Path) -> None:
    result = await _rollout_then_tamper(tmp_path, _first("multi_month_end"), "SELECT 1")
    assert result["reward"] == 1.0
    assert result["reward_components"]["invariants_ok"] == 1.0
    assert "invariant_violations" not in result["verification"]


async def test_tampered_balance_earns_zero_with_the_violation(tmp_path: Path) -> None:
    task = _first("deposit")  # a deposit into the account the gold names
    number = task["ground_truth"][-1]["arguments"]["account_number"]
    sql = f"UPDATE accounts SET balance = balance + 100 WHERE number = '{number}'"
    result = await _rollout_then_tamper(tmp_path, task, sql)
    assert result["reward"] == 0.0
    assert result["reward_components"]["invariants_ok"] == 0.0
    (violation,) = result["verification"]["invariant_violations"]
    assert number in violation and "stored balance" in violation
    assert "invariants violated" in result["failure_reason"]


async def test_unbalanced_entry_earns_zero(tmp_path: Path) -> None:
    task = _first("deposit")
    number = task["ground_truth"][-1]["arguments"]["account_number"]
    # Inflate the account's opening entry: its transaction no longer sums to zero.
    sql = (
        "UPDATE entries SET amount = amount + 5 WHERE id = (SELECT min(e.id) FROM entries e "
        f"JOIN accounts a ON a.id = e.account_id WHERE a.number = '{number}')"
    )
    result = await _rollout_then_tamper(tmp_path, task, sql)
    assert result["reward"] == 0.0
    found = result["verification"]["invariant_violations"]
    assert any("summing to 5.00" in v for v in found), found
