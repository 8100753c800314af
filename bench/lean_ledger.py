"""Ledger's tools over the lean baseline's dicts (bench/lean_db.py): the 14 tools the ledger tasks'
gold solutions call, each reading and writing the rows StateGym's tool does (envs/ledger/:
accounts' stored balances, transactions with their content-derived references, entries, holds,
beneficiaries), with the main checks: ownership, account status, KYC, the beneficiary rule,
currency, available balance and overdraft floor, loan repayment cap, the daily limit, the
reversal rules (kind, 30-day window, never twice, another customer's account) and close's zero
balance / no active hold.

Left out: argument schemas (a missing or mistyped argument is a KeyError/TypeError, reported as a
tool error), hints and error codes, the memo length check, the per-row CHECK constraints and the
ledger invariants (balance = sum of entries) StateGym's database and verifier enforce. The lean
verify compares rows by id (bench/lean_db.py `same_state`), not by StateGym's natural keys, so an
agent that posts the same transactions in another order gets other ids and scores 0 here while
StateGym scores it 1; the gold rollout, replayed in the gold's order, is scored alike.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from bench.lean_db import Db, Row, ToolFailed, cents

TABLES = "customers accounts transactions entries holds beneficiaries".split()
COMPARED = tuple(TABLES)
FEES = {
    "card_replacement": 10.00,
    "paper_statement": 3.00,
    "wire_transfer": 25.00,
    "monthly_maintenance": 12.00,
}
REVERSAL_WINDOW = timedelta(days=30)
LIFTABLE = ("lost_card", "customer_request")


def _dt(value: Any) -> datetime:
    """A stored datetime: the template's '2026-04-15 09:30:00.000000' or a seed's ISO text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def _amount(value: Any) -> float:
    value = float(value)
    if not 0 < value <= 1_000_000 or round(value, 2) != value:
        raise ToolFailed(f"Amount {value} is out of range or has more than two decimals.")
    return cents(value)


def _customer(db: Db, customer_id: Any) -> Row:
    c = db.get("customers", int(customer_id))
    if c is None:
        raise ToolFailed(f"No customer has id {customer_id}.")
    return c


def _account(db: Db, number: str) -> Row:
    a = db.first("accounts", "number", str(number).strip().upper())
    if a is None:
        raise ToolFailed(f"No account has number {number!r}.")
    return a


def _owned(db: Db, customer_id: Any, number: str) -> Row:
    c = _customer(db, customer_id)
    a = _account(db, number)
    if a["customer_id"] != c["id"]:
        raise ToolFailed(f"Account {a['number']} does not belong to customer {c['id']}.")
    return a


def _kyc(c: Row, action: str) -> None:
    if c["kyc_status"] != "verified":
        raise ToolFailed(f"Customer {c['id']}'s KYC is {c['kyc_status']}; {action} needs it.")


def _open(a: Row) -> None:
    if a["status"] != "open":
        raise ToolFailed(f"Account {a['number']} is {a['status']}; it accepts no postings.")


def _held(db: Db, a: Row) -> float:
    return cents(
        sum(
            h["amount"] for h in db.where("holds", "account_id", a["id"]) if h["status"] == "active"
        )
    )


def _floor(a: Row) -> float:
    return -a["overdraft_limit"] if a["overdraft_allowed"] else 0.0


def _check_debit(db: Db, a: Row, amount: float) -> None:
    if a["type"] == "loan":
        raise ToolFailed(f"Account {a['number']} is a loan; money cannot be taken out of it.")
    if cents(a["balance"] - _held(db, a) - amount) < _floor(a):
        raise ToolFailed(f"Insufficient funds on {a['number']}.")


def _check_credit(a: Row, amount: float) -> None:
    if a["type"] == "loan" and cents(a["balance"] + amount) > 0:
        raise ToolFailed(f"{amount:.2f} would overpay loan {a['number']}.")


def _check_daily_limit(db: Db, a: Row, amount: float, now: str) -> None:
    day = _dt(now).replace(hour=0, minute=0, second=0, microsecond=0)
    used = 0.0
    for e in db.where("entries", "account_id", a["id"]):
        if e["amount"] >= 0:
            continue
        tx = db.get("transactions", e["transaction_id"])
        if (
            tx is not None
            and tx["kind"] in ("transfer", "withdrawal")
            and tx["status"] == "posted"
            and day <= _dt(tx["created_at"]) < day + timedelta(days=1)
        ):
            used -= e["amount"]
    if cents(cents(used) + amount) > a["daily_limit"]:
        raise ToolFailed(f"Daily limit reached on {a['number']}.")


def _internal(db: Db, currency: str, purpose: str) -> Row:
    return _account(db, f"INT-{currency}-{purpose}")


def _post(
    db: Db,
    now: str,
    kind: str,
    legs: list[tuple[Row, float]],
    memo: str | None,
    reference: str | None = None,
    reverses: Row | None = None,
) -> Row:
    """One balanced transaction, its entries, and the stored balances moved by them (the same
    content-derived reference StateGym's ledger writes)."""
    if reference is None:
        content = "|".join(
            [kind, _dt(now).isoformat(), *(f"{a['number']}:{amt:.2f}" for a, amt in legs)]
        )
        for n in range(1000):
            reference = "TX" + hashlib.sha256(f"{content}|{n}".encode()).hexdigest()[:10].upper()
            if db.first("transactions", "reference", reference) is None:
                break
    tx = db.insert(
        "transactions",
        {
            "reference": reference,
            "kind": kind,
            "status": "posted",
            "created_at": now,
            "memo": memo or None,
            "reverses_id": reverses["id"] if reverses else None,
        },
    )
    for a, amount in legs:
        db.insert(
            "entries", {"transaction_id": tx["id"], "account_id": a["id"], "amount": cents(amount)}
        )
        mine = db.mut("accounts", a["id"])
        mine["balance"] = cents(mine["balance"] + amount)
    return tx


def _tx_view(db: Db, tx: Row) -> dict[str, Any]:
    reverses = db.get("transactions", tx["reverses_id"]) if tx["reverses_id"] else None
    return {
        **{k: tx[k] for k in ("reference", "kind", "status", "created_at", "memo")},
        "reverses": reverses["reference"] if reverses else None,
        "entries": [
            {"account": db.get("accounts", e["account_id"])["number"], "amount": e["amount"]}  # type: ignore[index]
            for e in db.where("entries", "transaction_id", tx["id"])
        ],
    }


def _account_view(db: Db, a: Row) -> dict[str, Any]:
    on_hold = _held(db, a)
    return {
        **{k: a[k] for k in ("number", "type", "currency", "status", "freeze_reason", "balance")},
        "on_hold": on_hold,
        "available_balance": cents(a["balance"] - on_hold),
        **{k: a[k] for k in ("overdraft_allowed", "overdraft_limit", "daily_limit")},
    }


def _lines(db: Db, a: Row, kind: str | None, limit: int) -> list[dict[str, Any]]:
    lines = []
    for e in db.where("entries", "account_id", a["id"]):
        tx = db.get("transactions", e["transaction_id"])
        if tx is not None and (kind is None or tx["kind"] == kind):
            lines.append((_dt(tx["created_at"]), tx["id"], tx, e["amount"]))
    lines.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [
        {**{k: tx[k] for k in ("reference", "kind", "status", "created_at", "memo")}, "amount": amt}
        for _at, _id, tx, amt in lines[:limit]
    ]


# --- read tools ----------------------------------------------------------------------------------
def find_customer(db: Db, a: dict[str, Any], now: str) -> Any:
    c = db.first("customers", "email", str(a["email"]).lower())
    if c is None or str(c["date_of_birth"])[:10] != a["date_of_birth"]:
        raise ToolFailed("No customer matches that email and date of birth.")
    payees = []
    for b in db.where("beneficiaries", "customer_id", c["id"]):
        account = db.get("accounts", b["account_id"])
        payees.append({"nickname": b["nickname"], "account": account and account["number"]})
    return {
        "customer_id": c["id"],
        "name": f"{c['first_name']} {c['last_name']}",
        "kyc_status": c["kyc_status"],
        "accounts": [
            {k: x[k] for k in ("number", "type", "currency", "status", "balance")}
            for x in db.where("accounts", "customer_id", c["id"])
        ],
        "beneficiaries": payees,
    }


def get_account(db: Db, a: dict[str, Any], now: str) -> Any:
    acc = _owned(db, a["customer_id"], a["account_number"])
    return {
        **_account_view(db, acc),
        "opened_at": acc["opened_at"],
        "active_holds": [
            {k: h[k] for k in ("code", "amount", "merchant", "expires_at")}
            for h in db.where("holds", "account_id", acc["id"])
            if h["status"] == "active"
        ],
        "recent_entries": _lines(db, acc, None, 10),
    }


def list_transactions(db: Db, a: dict[str, Any], now: str) -> Any:
    limit = a.get("limit") or 20
    if not 1 <= limit <= 100:
        raise ToolFailed("limit must be between 1 and 100.")
    acc = _owned(db, a["customer_id"], a["account_number"])
    return {"account": acc["number"], "transactions": _lines(db, acc, a.get("kind"), limit)}


def _customer_tx(db: Db, customer_id: Any, reference: str) -> Row:
    c = _customer(db, customer_id)
    tx = db.first("transactions", "reference", str(reference).strip().upper())
    if tx is None or all(
        (db.get("accounts", e["account_id"]) or {}).get("customer_id") != c["id"]
        for e in db.where("entries", "transaction_id", tx["id"])
    ):
        raise ToolFailed(f"Customer {c['id']} has no transaction with reference {reference!r}.")
    return tx


def get_transaction(db: Db, a: dict[str, Any], now: str) -> Any:
    return _tx_view(db, _customer_tx(db, a["customer_id"], a["reference"]))


# --- write tools ---------------------------------------------------------------------------------
def transfer(db: Db, a: dict[str, Any], now: str) -> Any:
    amount = _amount(a["amount"])
    c = _customer(db, a["customer_id"])
    source = _owned(db, c["id"], a["from_account"])
    target = _account(db, a["to_account"])
    _kyc(c, "sending a transfer")
    if target["id"] == source["id"] or target["type"] == "internal":
        raise ToolFailed(f"Cannot transfer to {target['number']}.")
    if target["customer_id"] != c["id"] and not any(
        b["account_id"] == target["id"] for b in db.where("beneficiaries", "customer_id", c["id"])
    ):
        raise ToolFailed(f"Account {target['number']} is not a saved beneficiary.")
    _open(source)
    _open(target)
    if source["currency"] != target["currency"]:
        raise ToolFailed("Transfers are only possible within one currency.")
    _check_debit(db, source, amount)
    _check_credit(target, amount)
    _check_daily_limit(db, source, amount, now)
    tx = _post(db, now, "transfer", [(source, -amount), (target, amount)], a.get("memo"))
    balance = db.get("accounts", source["id"])["balance"]  # type: ignore[index]
    return {"transaction": _tx_view(db, tx), "from_balance": balance}


def deposit(db: Db, a: dict[str, Any], now: str) -> Any:
    amount = _amount(a["amount"])
    acc = _owned(db, a["customer_id"], a["account_number"])
    _open(acc)
    _check_credit(acc, amount)
    cash = _internal(db, acc["currency"], "CASH")
    tx = _post(db, now, "deposit", [(cash, -amount), (acc, amount)], a.get("memo"))
    return {"transaction": _tx_view(db, tx), "balance": db.get("accounts", acc["id"])["balance"]}  # type: ignore[index]


def withdraw(db: Db, a: dict[str, Any], now: str) -> Any:
    amount = _amount(a["amount"])
    c = _customer(db, a["customer_id"])
    acc = _owned(db, c["id"], a["account_number"])
    _kyc(c, "withdrawing cash")
    _open(acc)
    _check_debit(db, acc, amount)
    _check_daily_limit(db, acc, amount, now)
    cash = _internal(db, acc["currency"], "CASH")
    tx = _post(db, now, "withdrawal", [(acc, -amount), (cash, amount)], a.get("memo"))
    return {"transaction": _tx_view(db, tx), "balance": db.get("accounts", acc["id"])["balance"]}  # type: ignore[index]


def charge_fee(db: Db, a: dict[str, Any], now: str) -> Any:
    amount = FEES[a["fee_type"]]
    acc = _owned(db, a["customer_id"], a["account_number"])
    _open(acc)
    _check_debit(db, acc, amount)
    income = _internal(db, acc["currency"], "FEES")
    memo = f"Fee: {a['fee_type'].replace('_', ' ')}"
    tx = _post(db, now, "fee", [(acc, -amount), (income, amount)], memo)
    return {"transaction": _tx_view(db, tx), "balance": db.get("accounts", acc["id"])["balance"]}  # type: ignore[index]


def reverse_transaction(db: Db, a: dict[str, Any], now: str) -> Any:
    if a["reason"] not in ("duplicate", "posted_in_error", "fee_refund"):
        raise ToolFailed(f"Unknown reason {a['reason']!r}.")
    tx = _customer_tx(db, a["customer_id"], a["reference"])
    if tx["kind"] == "reversal" or tx["status"] == "reversed":
        raise ToolFailed(f"{tx['reference']} cannot be reversed (a reversal, or reversed).")
    if _dt(now) - _dt(tx["created_at"]) > REVERSAL_WINDOW:
        raise ToolFailed(f"{tx['reference']} is more than 30 days old.")
    legs = []
    for e in db.where("entries", "transaction_id", tx["id"]):
        acc = db.get("accounts", e["account_id"])
        assert acc is not None
        amount = -e["amount"]
        legs.append((acc, amount))
        if acc["type"] == "internal":
            continue
        if acc["customer_id"] != int(a["customer_id"]):
            raise ToolFailed(f"{tx['reference']} moved money to another customer's account.")
        _open(acc)
        if amount > 0:
            _check_credit(acc, amount)
        elif acc["type"] != "loan" and cents(acc["balance"] - _held(db, acc) + amount) < _floor(
            acc
        ):
            raise ToolFailed(f"Reversing {tx['reference']} would overdraw {acc['number']}.")
    original = db.mut("transactions", tx["id"])
    original["status"] = "reversed"
    memo = f"Reversal of {tx['reference']} ({a['reason']})"
    reference = f"RV{tx['reference'][2:]}"
    reversal = _post(db, now, "reversal", legs, memo, reference=reference, reverses=original)
    return {"reversal": _tx_view(db, reversal), "original": _tx_view(db, original)}


def freeze_account(db: Db, a: dict[str, Any], now: str) -> Any:
    if a["reason"] not in ("lost_card", "customer_request", "suspected_fraud"):
        raise ToolFailed(f"Unknown reason {a['reason']!r}.")
    acc = _owned(db, a["customer_id"], a["account_number"])
    if acc["status"] != "open":
        raise ToolFailed(f"Account {acc['number']} is {acc['status']}.")
    acc = db.mut("accounts", acc["id"])
    acc["status"], acc["freeze_reason"] = "frozen", a["reason"]
    return _account_view(db, acc)


def unfreeze_account(db: Db, a: dict[str, Any], now: str) -> Any:
    acc = _owned(db, a["customer_id"], a["account_number"])
    if acc["status"] != "frozen" or acc["freeze_reason"] not in LIFTABLE:
        raise ToolFailed(f"Account {acc['number']}'s freeze cannot be lifted here.")
    acc = db.mut("accounts", acc["id"])
    acc["status"], acc["freeze_reason"] = "open", None
    return _account_view(db, acc)


def close_account(db: Db, a: dict[str, Any], now: str) -> Any:
    acc = _owned(db, a["customer_id"], a["account_number"])
    if acc["status"] != "open" or acc["balance"] != 0 or _held(db, acc):
        raise ToolFailed(f"Account {acc['number']} is not open, empty and free of holds.")
    acc = db.mut("accounts", acc["id"])
    acc["status"], acc["closed_at"] = "closed", now
    return _account_view(db, acc)


def release_hold(db: Db, a: dict[str, Any], now: str) -> Any:
    c = _customer(db, a["customer_id"])
    hold = db.first("holds", "code", str(a["hold_code"]).strip().upper())
    acc = db.get("accounts", hold["account_id"]) if hold else None
    if hold is None or acc is None or acc["customer_id"] != c["id"]:
        raise ToolFailed(f"Customer {c['id']} has no hold {a['hold_code']!r}.")
    if hold["status"] != "active" or _dt(hold["expires_at"]) > _dt(now):
        raise ToolFailed(f"Hold {hold['code']} is released already or not expired.")
    hold = db.mut("holds", hold["id"])
    hold["status"], hold["released_at"] = "released", now
    return {"hold": hold["code"], "status": "released", **_account_view(db, acc)}


def add_beneficiary(db: Db, a: dict[str, Any], now: str) -> Any:
    c = _customer(db, a["customer_id"])
    if not 0 < len(a["nickname"]) <= 60:
        raise ToolFailed("The nickname must have 1 to 60 characters.")
    _kyc(c, "adding a beneficiary")
    acc = _account(db, a["account_number"])
    if acc["customer_id"] == c["id"] or acc["type"] == "internal" or acc["status"] == "closed":
        raise ToolFailed(f"Account {acc['number']} cannot be saved as a beneficiary.")
    if any(b["account_id"] == acc["id"] for b in db.where("beneficiaries", "customer_id", c["id"])):
        raise ToolFailed(f"Account {acc['number']} is already saved.")
    db.insert(
        "beneficiaries",
        {
            "customer_id": c["id"],
            "account_id": acc["id"],
            "nickname": a["nickname"],
            "created_at": now,
        },
    )
    return {"beneficiary": a["nickname"], "account": acc["number"], "currency": acc["currency"]}


TOOLS = {
    f.__name__: f
    for f in (
        find_customer,
        get_account,
        list_transactions,
        get_transaction,
        transfer,
        deposit,
        withdraw,
        charge_fee,
        reverse_transaction,
        freeze_account,
        unfreeze_account,
        close_account,
        release_hold,
        add_beneficiary,
    )
}
