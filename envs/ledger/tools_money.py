"""Write tools that move money: transfer, deposit, withdraw, charge a fee, reverse a posting.

Each posting is one balanced journal transaction (entries summing to zero) and moves the stored
balances by exactly its entries.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.ledger.models import Beneficiary
from envs.ledger.ops import (
    CASH,
    FEE_INCOME,
    FEES,
    REVERSAL_WINDOW,
    cents,
    check_credit,
    check_daily_limit,
    check_debit,
    checked_amount,
    floor_of,
    get_account,
    get_customer,
    held,
    internal_account,
    money,
    owned_account,
    post,
    require_kyc,
    require_open,
    tx_view,
)
from envs.ledger.tools_read import customer_transaction

MEMO = Field(default=None, description="Optional note shown on the statement (<= 200 chars).")


class TransferArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id (the sender).")
    from_account: str = Field(description="The customer's account the money leaves.")
    to_account: str = Field(
        description="The receiving account: one of the customer's own, or a saved beneficiary's."
    )
    amount: float = Field(description="Amount in the accounts' currency.")
    memo: str | None = MEMO


@tool
def transfer(db: Session, args: TransferArgs, ctx: ToolContext) -> dict[str, Any]:
    """Move money between two accounts (debit one, credit the other, in one transaction).

    Rules: the sender's KYC must be verified; both accounts open (not frozen or closed) and in the
    same currency; the receiving account is the customer's own or a saved beneficiary (add one
    with add_beneficiary first); the available balance may go below zero only within an allowed
    overdraft; outgoing transfers plus withdrawals per day stay within the account's daily limit;
    loans can be repaid (credited) up to what is owed, never debited.
    """
    amount = checked_amount(args.amount)
    customer = get_customer(db, args.customer_id)
    source = owned_account(db, args.from_account, customer.id)
    target = get_account(db, args.to_account)
    require_kyc(customer, "sending a transfer")
    if target.id == source.id:
        raise ToolError("The two accounts are the same.", code="invalid_arguments")
    if target.type == "internal":
        raise ToolError(
            f"Account {target.number} is an internal bank account.",
            hint="Use deposit, withdraw or charge_fee for cash and fees.",
            code="forbidden",
        )
    if target.customer_id != customer.id:
        saved = db.scalar(
            select(Beneficiary.id).where(
                Beneficiary.customer_id == customer.id, Beneficiary.account_id == target.id
            )
        )
        if saved is None:
            raise ToolError(
                f"Account {target.number} belongs to another customer and is not one of "
                f"customer {customer.id}'s saved beneficiaries.",
                hint="Save it with add_beneficiary (on the customer's request), then transfer.",
                code="not_a_beneficiary",
            )
    require_open(source)
    require_open(target)
    if source.currency != target.currency:
        raise ToolError(
            f"Account {source.number} is in {source.currency} but {target.number} is in "
            f"{target.currency}; transfers are only possible within one currency.",
            hint="There is no currency exchange; pick an account in the same currency.",
            code="currency_mismatch",
        )
    check_debit(db, source, amount)
    check_credit(target, amount)
    check_daily_limit(db, source, amount, ctx.now)
    tx = post(db, ctx, "transfer", [(source, -amount), (target, amount)], args.memo)
    return {"transaction": tx_view(tx), "from_balance": source.balance}


class CashArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id.")
    account_number: str = Field(description="The customer's account.")
    amount: float = Field(description="Amount in the account's currency.")
    memo: str | None = MEMO


@tool
def deposit(db: Session, args: CashArgs, ctx: ToolContext) -> dict[str, Any]:
    """Deposit cash into one of the customer's accounts (credited against the bank's cash account).

    The account must be open; a loan account accepts at most its outstanding amount (repayment).
    """
    amount = checked_amount(args.amount)
    account = owned_account(db, args.account_number, args.customer_id)
    require_open(account)
    check_credit(account, amount)
    cash = internal_account(db, account.currency, CASH)
    tx = post(db, ctx, "deposit", [(cash, -amount), (account, amount)], args.memo)
    return {"transaction": tx_view(tx), "balance": account.balance}


@tool
def withdraw(db: Session, args: CashArgs, ctx: ToolContext) -> dict[str, Any]:
    """Withdraw cash from one of the customer's accounts.

    Rules: KYC verified; account open; not a loan; the available balance (balance minus active
    holds) may go below zero only within an allowed overdraft; counts towards the daily limit.
    """
    amount = checked_amount(args.amount)
    customer = get_customer(db, args.customer_id)
    account = owned_account(db, args.account_number, customer.id)
    require_kyc(customer, "withdrawing cash")
    require_open(account)
    check_debit(db, account, amount)
    check_daily_limit(db, account, amount, ctx.now)
    cash = internal_account(db, account.currency, CASH)
    tx = post(db, ctx, "withdrawal", [(account, -amount), (cash, amount)], args.memo)
    return {"transaction": tx_view(tx), "balance": account.balance}


class FeeArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id.")
    account_number: str = Field(description="The customer's checking or savings account to charge.")
    fee_type: Literal[
        "card_replacement", "paper_statement", "wire_transfer", "monthly_maintenance"
    ] = Field(description="Which fee of the schedule (the amount is fixed by the schedule).")


@tool
def charge_fee(db: Session, args: FeeArgs, ctx: ToolContext) -> dict[str, Any]:
    """Charge a fee from the bank's schedule: card_replacement 10.00, paper_statement 3.00,
    wire_transfer 25.00, monthly_maintenance 12.00 (in the account's currency).

    The account must be open and not a loan; the fee may overdraw only within an allowed overdraft.
    """
    amount = FEES[args.fee_type]
    account = owned_account(db, args.account_number, args.customer_id)
    require_open(account)
    check_debit(db, account, amount)
    income = internal_account(db, account.currency, FEE_INCOME)
    memo = f"Fee: {args.fee_type.replace('_', ' ')}"
    tx = post(db, ctx, "fee", [(account, -amount), (income, amount)], memo)
    return {"transaction": tx_view(tx), "balance": account.balance}


class ReverseArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id.")
    reference: str = Field(description="Reference of the transaction to reverse.")
    reason: Literal["duplicate", "posted_in_error", "fee_refund"] = Field(
        description="Why: 'duplicate', 'posted_in_error' or 'fee_refund'."
    )


@tool
def reverse_transaction(db: Session, args: ReverseArgs, ctx: ToolContext) -> dict[str, Any]:
    """Reverse a posted transaction: a new 'reversal' transaction with the mirror entries (every
    amount negated), and the original marked 'reversed'.

    Rules: only deposits, withdrawals, fees and transfers between the customer's own accounts
    (a transfer to someone else cannot be pulled back); at most 30 days old; never a transaction
    already reversed, nor a reversal itself; every customer account involved must be open and end
    above its floor (zero, or minus its overdraft limit).
    """
    tx = customer_transaction(db, args.customer_id, args.reference)
    if tx.kind == "reversal":
        raise ToolError(
            f"{tx.reference} is itself a reversal; reversals are final.",
            hint="Post a new transaction instead if money must move again.",
            code="already_reversed",
        )
    if tx.status == "reversed":
        raise ToolError(f"{tx.reference} has already been reversed.", code="already_reversed")
    if ctx.now - tx.created_at > REVERSAL_WINDOW:
        raise ToolError(
            f"{tx.reference} was posted on {tx.created_at:%Y-%m-%d}, more than 30 days ago; "
            "it can no longer be reversed.",
            code="reversal_window",
        )
    legs = [(e.account, -e.amount) for e in tx.entries]
    for account, amount in legs:
        if account.type == "internal":
            continue
        if account.customer_id != args.customer_id:
            raise ToolError(
                f"{tx.reference} moved money to account {account.number} of another customer; "
                "it cannot be reversed.",
                hint="The recipient has to send the money back with a transfer of their own.",
                code="reversal_not_allowed",
            )
        require_open(account)
        if amount > 0:
            check_credit(account, amount)
        elif account.type != "loan" and cents(account.balance - held(db, account) + amount) < (
            floor_of(account)
        ):
            raise ToolError(
                f"Reversing {tx.reference} would take {money(-amount)} from {account.number}, "
                "more than its available balance allows.",
                code="insufficient_funds",
            )
    tx.status = "reversed"
    memo = f"Reversal of {tx.reference} ({args.reason})"
    reversal = post(db, ctx, "reversal", legs, memo, reference=f"RV{tx.reference[2:]}", reverses=tx)
    return {"reversal": tx_view(reversal), "original": tx_view(tx)}
