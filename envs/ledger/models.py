"""The ledger's schema: customers, accounts, double-entry journal transactions, holds, payees.

Money is `Numeric(12, 2)` read back as float (tools round to cents before writing); entry amounts
are signed (credit > 0, debit < 0) and every transaction's entries sum to zero. `accounts.balance`
is stored for fast reads and must always equal the sum of the account's entries (an invariant the
verifier checks). Datetimes are naive UTC. Every constraint is named (Alembic batch migrations).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.sdk.models import DeclarativeBase, Money, make_metadata, one_of

KYC_STATUSES = ("verified", "pending", "rejected")
ACCOUNT_TYPES = ("checking", "savings", "loan", "internal")
CURRENCIES = ("USD", "EUR", "GBP")
ACCOUNT_STATUSES = ("open", "frozen", "closed")
FREEZE_REASONS = ("lost_card", "customer_request", "suspected_fraud", "legal_order")
TX_KINDS = ("transfer", "deposit", "withdrawal", "fee", "reversal")
TX_STATUSES = ("posted", "reversed")
HOLD_STATUSES = ("active", "released")


def _display_name(context: Any) -> str:
    row = context.get_current_parameters()
    return f"{row['first_name']} {row['last_name']}"


class Base(DeclarativeBase):
    metadata = make_metadata()


class Customer(Base):
    __tablename__ = "customers"
    __table_args__ = (
        CheckConstraint(one_of("kyc_status", KYC_STATUSES), name="kyc_status"),
        Index("ix_customers_last_first", "last_name", "first_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(120), unique=True, index=True)
    first_name: Mapped[str] = mapped_column(String(60))
    last_name: Mapped[str] = mapped_column(String(60))
    # Added by the ledger branch's second migration, backfilled from the names (same rule).
    display_name: Mapped[str] = mapped_column(String(130), default=_display_name)
    phone: Mapped[str | None] = mapped_column(String(30))
    date_of_birth: Mapped[date] = mapped_column(Date)
    kyc_status: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(DateTime)

    accounts: Mapped[list[Account]] = relationship(back_populates="customer", order_by="Account.id")


class Account(Base):
    __tablename__ = "accounts"
    __table_args__ = (
        CheckConstraint(one_of("type", ACCOUNT_TYPES), name="type"),
        CheckConstraint(one_of("currency", CURRENCIES), name="currency"),
        CheckConstraint(one_of("status", ACCOUNT_STATUSES), name="status"),
        CheckConstraint("overdraft_limit >= 0", name="overdraft_limit_nonnegative"),
        CheckConstraint("overdraft_allowed OR overdraft_limit = 0", name="overdraft_flag"),
        CheckConstraint("daily_limit > 0", name="daily_limit_positive"),
        # Internal (bank-side) accounts have no customer; every customer account has one.
        CheckConstraint("(type = 'internal') = (customer_id IS NULL)", name="internal_owner"),
        CheckConstraint("(status = 'closed') = (closed_at IS NOT NULL)", name="closed_at"),
        CheckConstraint("(status = 'frozen') = (freeze_reason IS NOT NULL)", name="freeze_reason"),
        CheckConstraint(
            f"freeze_reason IS NULL OR {one_of('freeze_reason', FREEZE_REASONS)}",
            name="freeze_reason_values",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The number customers and staff use, e.g. "11000042" (first two digits: the account type).
    number: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    customer_id: Mapped[int | None] = mapped_column(ForeignKey("customers.id"), index=True)
    type: Mapped[str] = mapped_column(String(10))
    currency: Mapped[str] = mapped_column(String(3))
    status: Mapped[str] = mapped_column(String(10), default="open")
    freeze_reason: Mapped[str | None] = mapped_column(String(20))
    overdraft_allowed: Mapped[bool] = mapped_column(Boolean, default=False)
    overdraft_limit: Mapped[float] = mapped_column(Money, default=0.0)
    # Outgoing transfers + withdrawals allowed per calendar day.
    daily_limit: Mapped[float] = mapped_column(Money)
    balance: Mapped[float] = mapped_column(Money, default=0.0)
    opened_at: Mapped[datetime] = mapped_column(DateTime)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime)

    customer: Mapped[Customer | None] = relationship(back_populates="accounts")
    holds: Mapped[list[Hold]] = relationship(back_populates="account", order_by="Hold.id")


class Transaction(Base):
    """One journal transaction; its entries move money between accounts and sum to zero."""

    __tablename__ = "transactions"
    __table_args__ = (
        CheckConstraint(one_of("kind", TX_KINDS), name="kind"),
        CheckConstraint(one_of("status", TX_STATUSES), name="status"),
        # Only reversals point at the transaction they undo, and a reversal is never reversed.
        CheckConstraint("(kind = 'reversal') = (reverses_id IS NOT NULL)", name="reverses"),
        CheckConstraint("kind != 'reversal' OR status = 'posted'", name="reversal_final"),
        Index("ix_transactions_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Deterministic code, e.g. "TX4F0A19C2D1" (reversals: "RV" + the original's code).
    reference: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    kind: Mapped[str] = mapped_column(String(12))
    status: Mapped[str] = mapped_column(String(10), default="posted")
    created_at: Mapped[datetime] = mapped_column(DateTime)
    memo: Mapped[str | None] = mapped_column(String(200))
    reverses_id: Mapped[int | None] = mapped_column(
        ForeignKey("transactions.id"), unique=True, index=True
    )

    entries: Mapped[list[Entry]] = relationship(back_populates="transaction", order_by="Entry.id")
    reverses: Mapped[Transaction | None] = relationship(remote_side=[id])


class Entry(Base):
    """One side of a transaction: a signed amount on one account (credit > 0, debit < 0)."""

    __tablename__ = "entries"
    __table_args__ = (
        CheckConstraint("amount != 0", name="amount_nonzero"),
        Index("ix_entries_account_tx", "account_id", "transaction_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    transaction_id: Mapped[int] = mapped_column(ForeignKey("transactions.id"), index=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"))
    amount: Mapped[float] = mapped_column(Money)

    transaction: Mapped[Transaction] = relationship(back_populates="entries")
    account: Mapped[Account] = relationship()


class Hold(Base):
    """Money reserved on an account (e.g. a card authorisation): lowers the available balance."""

    __tablename__ = "holds"
    __table_args__ = (
        CheckConstraint("amount > 0", name="amount_positive"),
        CheckConstraint(one_of("status", HOLD_STATUSES), name="status"),
        CheckConstraint("(status = 'released') = (released_at IS NOT NULL)", name="released_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"), index=True)
    amount: Mapped[float] = mapped_column(Money)
    merchant: Mapped[str] = mapped_column(String(80))
    status: Mapped[str] = mapped_column(String(10), default="active")
    created_at: Mapped[datetime] = mapped_column(DateTime)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    released_at: Mapped[datetime | None] = mapped_column(DateTime)

    account: Mapped[Account] = relationship(back_populates="holds")


class Beneficiary(Base):
    """A saved payee: another customer's account this customer may send transfers to."""

    __tablename__ = "beneficiaries"
    __table_args__ = (UniqueConstraint("customer_id", "account_id", name="customer_account"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"), index=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"))
    nickname: Mapped[str] = mapped_column(String(60))
    created_at: Mapped[datetime] = mapped_column(DateTime)
