"""Read-only tools: identify a customer, look at accounts, their journal and one transaction.

They read with Core column selects built once at import, not ORM entities and their lazy loads
(see docs/performance.md); lists keep the order of the ORM relationships they replace.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal, cast

from pydantic import Field
from sqlalchemy import Integer, Table, bindparam, func, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.ledger.models import Beneficiary, Entry, Hold, Transaction
from envs.ledger.ops import (
    ACCOUNTS,
    CUSTOMERS,
    cents,
    no_such_customer,
    owned_account_row,
    owned_account_statement,
)

TRANSACTIONS = cast(Table, Transaction.__table__)
ENTRIES = cast(Table, Entry.__table__)
HOLDS = cast(Table, Hold.__table__)
BENEFICIARIES = cast(Table, Beneficiary.__table__)

_CUSTOMER_ID = bindparam("customer_id", type_=Integer)
_ACCOUNT_ID = bindparam("account_id", type_=Integer)


class FindCustomerArgs(ToolArgs):
    email: str = Field(description="The customer's email address, e.g. 'jane.doe@example.com'.")
    date_of_birth: str = Field(description="The customer's date of birth, YYYY-MM-DD.")


@tool(read_only=True)
def find_customer(db: Session, args: FindCustomerArgs, ctx: ToolContext) -> dict[str, Any]:
    """Identify a customer by email and date of birth; both must match.

    Returns the customer_id (pass it to every other tool), the KYC status, every account (number,
    type, currency, status, balance) and the saved beneficiaries (payees).
    """
    try:
        born = date.fromisoformat(args.date_of_birth)
    except ValueError:
        raise ToolError(
            f"date_of_birth {args.date_of_birth!r} is not a date.",
            hint="Give it as YYYY-MM-DD, e.g. 1984-07-23.",
            code="invalid_arguments",
        ) from None
    email = args.email.lower()
    customer = db.execute(_CUSTOMER_BY_EMAIL, {"email": email}).first()
    if customer is None or customer.date_of_birth != born:
        raise ToolError(
            "No customer matches that email and date of birth.",
            hint="Ask the customer to check both; without a match nothing can be done for them.",
            code="not_found",
        )
    key = {"customer_id": customer.id}
    return {
        "customer_id": customer.id,
        "name": f"{customer.first_name} {customer.last_name}",
        "kyc_status": customer.kyc_status,
        "accounts": [a._asdict() for a in db.execute(_CUSTOMER_ACCOUNTS, key)],
        "beneficiaries": [b._asdict() for b in db.execute(_CUSTOMER_PAYEES, key)],
    }


# Core, not ORM lazy loads: a hot read; see docs/performance.md. Same WHERE as the ORM query it
# replaces (first match, no ORDER BY); accounts in `Customer.accounts` order (by id).
_CUSTOMER_BY_EMAIL = select(
    CUSTOMERS.c.id,
    CUSTOMERS.c.first_name,
    CUSTOMERS.c.last_name,
    CUSTOMERS.c.kyc_status,
    CUSTOMERS.c.date_of_birth,
).where(func.lower(CUSTOMERS.c.email) == bindparam("email"))
_CUSTOMER_ACCOUNTS = (
    select(
        ACCOUNTS.c.number,
        ACCOUNTS.c.type,
        ACCOUNTS.c.currency,
        ACCOUNTS.c.status,
        ACCOUNTS.c.balance,
    )
    .where(ACCOUNTS.c.customer_id == _CUSTOMER_ID)
    .order_by(ACCOUNTS.c.id)
)
_CUSTOMER_PAYEES = (
    select(BENEFICIARIES.c.nickname, ACCOUNTS.c.number.label("account"))
    .join(ACCOUNTS, ACCOUNTS.c.id == BENEFICIARIES.c.account_id)
    .where(BENEFICIARIES.c.customer_id == _CUSTOMER_ID)
    .order_by(BENEFICIARIES.c.id)
)


class AccountArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id (from find_customer).")
    account_number: str = Field(
        description="One of the customer's account numbers, e.g. '11000042'."
    )


@tool(read_only=True)
def get_account(db: Session, args: AccountArgs, ctx: ToolContext) -> dict[str, Any]:
    """One account of the customer: balance, active holds, available balance (balance minus
    holds), overdraft and daily limits, and its 10 most recent entries (newest first).
    """
    a = owned_account_row(db, args.customer_id, args.account_number, _OWNED_ACCOUNT_DETAILS)
    on_hold = cents(float(a.on_hold or 0.0))
    key = {"account_id": a.id}
    return {
        "number": a.number,
        "type": a.type,
        "currency": a.currency,
        "status": a.status,
        "freeze_reason": a.freeze_reason,
        "balance": a.balance,
        "on_hold": on_hold,
        "available_balance": cents(a.balance - on_hold),
        "overdraft_allowed": a.overdraft_allowed,
        "overdraft_limit": a.overdraft_limit,
        "daily_limit": a.daily_limit,
        "opened_at": a.opened_at.isoformat(),
        "active_holds": [
            {
                "code": h.code,
                "amount": h.amount,
                "merchant": h.merchant,
                "expires_at": h.expires_at.isoformat(),
            }
            for h in db.execute(_ACTIVE_HOLDS, key)
        ],
        "recent_entries": [_line(row) for row in db.execute(_RECENT_LINES, key)],
    }


def _line(row: AnyRow) -> dict[str, Any]:
    return {
        "reference": row.reference,
        "kind": row.kind,
        "status": row.status,
        "created_at": row.created_at.isoformat(),
        "amount": row.amount,
        "memo": row.memo,
    }


# Active holds summed in SQL, as ops.held does.
_ON_HOLD = (
    select(func.coalesce(func.sum(HOLDS.c.amount), 0.0))
    .where(HOLDS.c.account_id == ACCOUNTS.c.id, HOLDS.c.status == "active")
    .scalar_subquery()
)
_OWNED_ACCOUNT_DETAILS = owned_account_statement(
    ACCOUNTS.c.type,
    ACCOUNTS.c.currency,
    ACCOUNTS.c.status,
    ACCOUNTS.c.freeze_reason,
    ACCOUNTS.c.balance,
    ACCOUNTS.c.overdraft_allowed,
    ACCOUNTS.c.overdraft_limit,
    ACCOUNTS.c.daily_limit,
    ACCOUNTS.c.opened_at,
    _ON_HOLD.label("on_hold"),
)
_ACTIVE_HOLDS = (
    select(HOLDS.c.code, HOLDS.c.amount, HOLDS.c.merchant, HOLDS.c.expires_at)
    .where(HOLDS.c.account_id == _ACCOUNT_ID, HOLDS.c.status == "active")
    .order_by(HOLDS.c.id)
)
# An account's journal lines, newest first (the same join and order as the ORM queries had).
_LINES = (
    select(
        TRANSACTIONS.c.reference,
        TRANSACTIONS.c.kind,
        TRANSACTIONS.c.status,
        TRANSACTIONS.c.created_at,
        ENTRIES.c.amount,
        TRANSACTIONS.c.memo,
    )
    .select_from(TRANSACTIONS)
    .join(ENTRIES, ENTRIES.c.transaction_id == TRANSACTIONS.c.id)
    .where(ENTRIES.c.account_id == _ACCOUNT_ID)
)
_NEWEST_FIRST = (TRANSACTIONS.c.created_at.desc(), TRANSACTIONS.c.id.desc())
_LIMIT = bindparam("limit", type_=Integer)
_RECENT_LINES = _LINES.order_by(*_NEWEST_FIRST).limit(10)
_ALL_LINES = _LINES.order_by(*_NEWEST_FIRST).limit(_LIMIT)
_KIND_LINES = (
    _LINES.where(TRANSACTIONS.c.kind == bindparam("kind")).order_by(*_NEWEST_FIRST).limit(_LIMIT)
)


class ListTransactionsArgs(AccountArgs):
    kind: Literal["transfer", "deposit", "withdrawal", "fee", "reversal"] | None = Field(
        default=None, description="Only transactions of this kind; null for every kind."
    )
    limit: int | None = Field(
        default=None, description="How many to return, newest first (1 to 100, default 20)."
    )


@tool(read_only=True)
def list_transactions(db: Session, args: ListTransactionsArgs, ctx: ToolContext) -> dict[str, Any]:
    """The account's transactions, newest first, each with the signed amount on this account
    (negative = money out), its status (posted or reversed) and its reference.
    """
    if args.limit is not None and not 1 <= args.limit <= 100:
        raise ToolError("limit must be between 1 and 100.", code="invalid_arguments")
    account = owned_account_row(db, args.customer_id, args.account_number)
    key = {"account_id": account.id, "limit": args.limit or 20}
    if args.kind is None:
        rows = db.execute(_ALL_LINES, key)
    else:
        rows = db.execute(_KIND_LINES, {**key, "kind": args.kind})
    return {"account": account.number, "transactions": [_line(row) for row in rows]}


class TransactionArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id (from find_customer).")
    reference: str = Field(description="The transaction reference, e.g. 'TX4F0A19C2D1'.")


def no_such_transaction(customer_id: int, reference: str) -> ToolError:
    return ToolError(
        f"Customer {customer_id} has no transaction with reference {reference!r}.",
        hint="list_transactions shows an account's transactions and their references.",
        code="not_found",
    )


def customer_transaction_rows(
    db: Session, customer_id: int, reference: str
) -> tuple[AnyRow, list[AnyRow]]:
    """The transaction's row and its entries' rows, provided it touches one of the customer's
    accounts."""
    if db.execute(_CUSTOMER_EXISTS, {"customer_id": customer_id}).first() is None:
        raise no_such_customer(customer_id)
    tx = db.execute(_TRANSACTION, {"reference": reference.strip().upper()}).first()
    entries = [] if tx is None else db.execute(_TRANSACTION_ENTRIES, {"tx_id": tx.id}).all()
    if tx is None or all(e.customer_id != customer_id for e in entries):
        raise no_such_transaction(customer_id, reference)
    return tx, list(entries)


def customer_transaction(db: Session, customer_id: int, reference: str) -> Transaction:
    """`customer_transaction_rows`' transaction as an ORM entity, for the write tools."""
    return db.get_one(Transaction, customer_transaction_rows(db, customer_id, reference)[0].id)


@tool(read_only=True)
def get_transaction(db: Session, args: TransactionArgs, ctx: ToolContext) -> dict[str, Any]:
    """One transaction touching the customer's accounts: kind, status, date, memo, every entry
    (account and signed amount), and the reference it reverses (for reversals).
    """
    tx, entries = customer_transaction_rows(db, args.customer_id, args.reference)
    # The view of ops.tx_view, from rows.
    return {
        "reference": tx.reference,
        "kind": tx.kind,
        "status": tx.status,
        "created_at": tx.created_at.isoformat(),
        "memo": tx.memo,
        "reverses": tx.reverses,
        "entries": [{"account": e.account, "amount": e.amount} for e in entries],
    }


# Core, not ORM lazy loads: a hot read; see docs/performance.md. Entries in `Transaction.entries`
# order (by id).
_CUSTOMER_EXISTS = select(CUSTOMERS.c.id).where(CUSTOMERS.c.id == _CUSTOMER_ID)
_REVERSED = TRANSACTIONS.alias("reversed")
_TRANSACTION = (
    select(
        TRANSACTIONS.c.id,
        TRANSACTIONS.c.reference,
        TRANSACTIONS.c.kind,
        TRANSACTIONS.c.status,
        TRANSACTIONS.c.created_at,
        TRANSACTIONS.c.memo,
        _REVERSED.c.reference.label("reverses"),
    )
    .outerjoin(_REVERSED, _REVERSED.c.id == TRANSACTIONS.c.reverses_id)
    .where(TRANSACTIONS.c.reference == bindparam("reference"))
)
_TRANSACTION_ENTRIES = (
    select(ACCOUNTS.c.number.label("account"), ENTRIES.c.amount, ACCOUNTS.c.customer_id)
    .select_from(ENTRIES)
    .join(ACCOUNTS, ACCOUNTS.c.id == ENTRIES.c.account_id)
    .where(ENTRIES.c.transaction_id == bindparam("tx_id", type_=Integer))
    .order_by(ENTRIES.c.id)
)
