"""Shared helpers of the ledger tools: lookups that fail helpfully, the posting rules, views.

Every rule is checked before the first write, so a refused call changes nothing even before the
framework rolls its transaction back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Integer, Table, bindparam, func, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolContext, ToolError
from app.sdk.money import cents
from app.sdk.money import grouped_money as money
from app.sdk.rows import AnyRow
from envs.ledger.models import Account, Customer, Entry, Hold, Transaction

# The bank's fee schedule: a fee type always costs the same, whatever the account's currency.
FEES: dict[str, float] = {
    "card_replacement": 10.00,
    "paper_statement": 3.00,
    "wire_transfer": 25.00,
    "monthly_maintenance": 12.00,
}
REVERSAL_WINDOW = timedelta(days=30)
# Internal (bank-side) counterparties, one per currency: "INT-USD-CASH", "INT-EUR-FEES"
CASH, FEE_INCOME = "CASH", "FEES"
CUSTOMERS = cast(Table, Customer.__table__)
ACCOUNTS = cast(Table, Account.__table__)


MAX_AMOUNT = 1_000_000.0


def checked_amount(value: float) -> float:
    """Range and cents are checked here, not in the JSON schema (strict tool schemas stay plain)."""
    if not 0 < value <= MAX_AMOUNT:
        raise ToolError(
            f"Amount {value} is out of range.",
            hint=f"Give a positive amount of at most {money(MAX_AMOUNT)}.",
            code="invalid_arguments",
        )
    if round(value, 2) != value:
        raise ToolError(
            f"Amount {value} has more than two decimals.",
            hint="Give amounts in currency units with at most two decimals, e.g. 125.50.",
            code="invalid_arguments",
        )
    return cents(value)


def no_such_customer(customer_id: int) -> ToolError:
    return ToolError(
        f"No customer has id {customer_id}.",
        hint="Identify the customer with find_customer and use the customer_id it returns.",
        code="not_found",
    )


def no_such_account(number: str) -> ToolError:
    return ToolError(
        f"No account has number {number!r}.",
        hint="Account numbers are 8 digits, e.g. '11000042'; find_customer lists a customer's.",
        code="not_found",
    )


def not_customers_account(number: str, customer_id: int) -> ToolError:
    return ToolError(
        f"Account {number} does not belong to customer {customer_id}.",
        hint="Act only on the identified customer's own accounts.",
        code="other_customer",
    )


def get_customer(db: Session, customer_id: int) -> Customer:
    customer = db.get(Customer, customer_id)
    if customer is None:
        raise no_such_customer(customer_id)
    return customer


def internal_account(db: Session, currency: str, purpose: str) -> Account:
    return db.scalars(select(Account).where(Account.number == f"INT-{currency}-{purpose}")).one()


def get_account(db: Session, number: str) -> Account:
    account = db.scalar(select(Account).where(Account.number == number.strip().upper()))
    if account is None:
        raise no_such_account(number)
    return account


# Core, not ORM lazy loads: a hot read; see docs/performance.md. The customer's row outer-joined
# to the account with that number: no row = no such customer, no account id = no such account.
def owned_account_statement(*columns: Any) -> Any:
    """The statement `owned_account_row` runs, selecting these account columns too."""
    return (
        select(
            CUSTOMERS.c.id.label("owner"),
            ACCOUNTS.c.id,
            ACCOUNTS.c.number,
            ACCOUNTS.c.customer_id,
            *columns,
        )
        .select_from(CUSTOMERS)
        .outerjoin(ACCOUNTS, ACCOUNTS.c.number == bindparam("number"))
        .where(CUSTOMERS.c.id == bindparam("customer_id", type_=Integer))
    )


_OWNED_ACCOUNT = owned_account_statement()


def owned_account_row(
    db: Session, customer_id: int, number: str, statement: Any = _OWNED_ACCOUNT
) -> AnyRow:
    """The account's row, provided the customer exists and owns it (`statement`, from
    `owned_account_statement`, chooses the columns)."""
    row = db.execute(
        statement, {"customer_id": customer_id, "number": number.strip().upper()}
    ).first()
    if row is None:
        raise no_such_customer(customer_id)
    if row.id is None:
        raise no_such_account(number)
    if row.customer_id != row.owner:
        raise not_customers_account(row.number, customer_id)
    return row


def owned_account(db: Session, number: str, customer_id: int) -> Account:
    """`owned_account_row`'s account as an ORM entity, for the write tools."""
    return db.get_one(Account, owned_account_row(db, customer_id, number).id)


def require_kyc(customer: Customer, action: str) -> None:
    if customer.kyc_status != "verified":
        raise ToolError(
            f"Customer {customer.id}'s identity verification (KYC) is {customer.kyc_status}; "
            f"{action} needs a verified customer.",
            hint="Deposits and reads are still possible; KYC is completed in a branch.",
            code="kyc_incomplete",
        )


def require_open(account: Account) -> None:
    if account.status != "open":
        why = f" ({account.freeze_reason})" if account.freeze_reason else ""
        raise ToolError(
            f"Account {account.number} is {account.status}{why}; it accepts no postings.",
            hint="A frozen account must be unfrozen first (where policy allows); a closed "
            "account stays closed.",
            code="account_frozen",  # the policy's one rule for frozen and closed accounts
        )


def held(db: Session, account: Account) -> float:
    total = db.scalar(
        select(func.coalesce(func.sum(Hold.amount), 0.0)).where(
            Hold.account_id == account.id, Hold.status == "active"
        )
    )
    return cents(float(total or 0.0))


def floor_of(account: Account) -> float:
    """The lowest balance the account may reach: minus its overdraft limit, else zero."""
    return -account.overdraft_limit if account.overdraft_allowed else 0.0


def check_debit(db: Session, account: Account, amount: float) -> None:
    """A debit must keep the available balance (balance - active holds) above the floor."""
    if account.type == "loan":
        raise ToolError(
            f"Account {account.number} is a loan; money cannot be taken out of it.",
            hint="Loans are only repaid: transfer or deposit into the loan account.",
            code="loan_rules",
        )
    available = cents(account.balance - held(db, account))
    if cents(available - amount) < floor_of(account):
        limit = (
            f" plus an overdraft of {money(account.overdraft_limit)}"
            if account.overdraft_allowed
            else " (no overdraft on this account)"
        )
        raise ToolError(
            f"Insufficient funds on {account.number}: available balance is "
            f"{money(available)} {account.currency}{limit}; {money(amount)} was requested.",
            hint="Offer a smaller amount, or another account of the customer.",
            code="insufficient_funds",
        )


def check_credit(account: Account, amount: float) -> None:
    """A loan can be repaid up to what is owed, never overpaid."""
    if account.type == "loan" and cents(account.balance + amount) > 0:
        raise ToolError(
            f"Loan {account.number} has {money(-account.balance)} {account.currency} "
            f"outstanding; {money(amount)} would overpay it.",
            hint="Repay at most the outstanding amount.",
            code="loan_rules",
        )


def outgoing_today(db: Session, account: Account, now: datetime) -> float:
    """Posted transfers and withdrawals out of the account on the clock's calendar day."""
    day = datetime(now.year, now.month, now.day)
    total = db.scalar(
        select(func.coalesce(func.sum(Entry.amount), 0.0))
        .join(Transaction, Entry.transaction_id == Transaction.id)
        .where(
            Entry.account_id == account.id,
            Entry.amount < 0,
            Transaction.kind.in_(("transfer", "withdrawal")),
            Transaction.status == "posted",
            Transaction.created_at >= day,
            Transaction.created_at < day + timedelta(days=1),
        )
    )
    return cents(-float(total or 0.0))


def check_daily_limit(db: Session, account: Account, amount: float, now: datetime) -> None:
    used = outgoing_today(db, account, now)
    if cents(used + amount) > account.daily_limit:
        raise ToolError(
            f"Daily limit reached on {account.number}: {money(used)} of "
            f"{money(account.daily_limit)} {account.currency} already sent or withdrawn today; "
            f"{money(amount)} more is not allowed.",
            hint=f"At most {money(max(0.0, account.daily_limit - used))} can go out today.",
            code="daily_limit",
        )


def reference_for(
    db: Session, kind: str, legs: Sequence[tuple[Account, float]], now: datetime
) -> str:
    """A code from the posting's content, not from call order: the same postings made in another
    order get the same codes, so an agent's state matches the gold state."""
    content = "|".join([kind, now.isoformat(), *(f"{a.number}:{amt:.2f}" for a, amt in legs)])
    for n in range(1000):
        digest = hashlib.sha256(f"{content}|{n}".encode()).hexdigest()[:10].upper()
        code = f"TX{digest}"
        if db.scalar(select(Transaction.id).where(Transaction.reference == code)) is None:
            return code
    raise ToolError("Too many identical postings.", code="limit")


def post(
    db: Session,
    ctx: ToolContext,
    kind: str,
    legs: Sequence[tuple[Account, float]],
    memo: str | None,
    *,
    reference: str | None = None,
    reverses: Transaction | None = None,
) -> Transaction:
    """Write one balanced transaction and move the stored balances with its entries."""
    assert abs(sum(amount for _, amount in legs)) < 0.005, "unbalanced posting"
    if memo is not None and len(memo) > 200:
        raise ToolError("The memo is longer than 200 characters.", code="invalid_arguments")
    tx = Transaction(
        reference=reference or reference_for(db, kind, legs, ctx.now),
        kind=kind,
        status="posted",
        created_at=ctx.now,
        memo=memo or None,
        reverses=reverses,
    )
    db.add(tx)
    for account, amount in legs:
        tx.entries.append(Entry(account_id=account.id, amount=cents(amount)))
        account.balance = cents(account.balance + amount)
    db.flush()
    return tx


def account_view(db: Session, account: Account) -> dict[str, Any]:
    on_hold = held(db, account)
    return {
        "number": account.number,
        "type": account.type,
        "currency": account.currency,
        "status": account.status,
        "freeze_reason": account.freeze_reason,
        "balance": account.balance,
        "on_hold": on_hold,
        "available_balance": cents(account.balance - on_hold),
        "overdraft_allowed": account.overdraft_allowed,
        "overdraft_limit": account.overdraft_limit,
        "daily_limit": account.daily_limit,
    }


def tx_view(tx: Transaction) -> dict[str, Any]:
    return {
        "reference": tx.reference,
        "kind": tx.kind,
        "status": tx.status,
        "created_at": tx.created_at.isoformat(),
        "memo": tx.memo,
        "reverses": tx.reverses.reference if tx.reverses is not None else None,
        "entries": [{"account": e.account.number, "amount": e.amount} for e in tx.entries],
    }
