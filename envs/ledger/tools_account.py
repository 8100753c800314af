"""Write tools on accounts themselves: freeze, unfreeze, close, release a hold, save a payee."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.ledger.models import Beneficiary, Hold
from envs.ledger.ops import (
    account_view,
    get_account,
    get_customer,
    held,
    money,
    owned_account,
    require_kyc,
)
from envs.ledger.tools_read import AccountArgs

# Freezes the customer may ask to lift; fraud and legal freezes are for other teams.
LIFTABLE = ("lost_card", "customer_request")


class FreezeArgs(AccountArgs):
    reason: Literal["lost_card", "customer_request", "suspected_fraud"] = Field(
        description="Why: 'lost_card', 'customer_request' or 'suspected_fraud'."
    )


@tool
def freeze_account(db: Session, args: FreezeArgs, ctx: ToolContext) -> dict[str, Any]:
    """Freeze an open account of the customer: no money can go in or out until it is unfrozen.

    Only open accounts can be frozen.
    """
    account = owned_account(db, args.account_number, args.customer_id)
    if account.status != "open":
        raise ToolError(
            f"Account {account.number} is {account.status}; only open accounts can be frozen.",
            code="account_" + account.status,
        )
    account.status, account.freeze_reason = "frozen", args.reason
    db.flush()
    return account_view(db, account)


@tool
def unfreeze_account(db: Session, args: AccountArgs, ctx: ToolContext) -> dict[str, Any]:
    """Lift the freeze of a frozen account of the customer, making it open again.

    Only freezes for 'lost_card' or 'customer_request' can be lifted here; 'suspected_fraud' and
    'legal_order' freezes are lifted only by the fraud or legal team.
    """
    account = owned_account(db, args.account_number, args.customer_id)
    if account.status != "frozen":
        raise ToolError(f"Account {account.number} is {account.status}, not frozen.")
    if account.freeze_reason not in LIFTABLE:
        raise ToolError(
            f"Account {account.number} is frozen for {account.freeze_reason}; only the "
            f"{'fraud' if account.freeze_reason == 'suspected_fraud' else 'legal'} team can "
            "lift that freeze.",
            hint="Tell the customer the freeze stays and who handles it.",
            code="freeze_not_liftable",
        )
    account.status, account.freeze_reason = "open", None
    db.flush()
    return account_view(db, account)


@tool
def close_account(db: Session, args: AccountArgs, ctx: ToolContext) -> dict[str, Any]:
    """Close an open account of the customer for good.

    Rules: no hold may be active (refused first: held money cannot be moved out) and the balance
    must be exactly 0.00 (move the money out first, or repay the loan); a frozen account must be
    unfrozen first. Closing cannot be undone.
    """
    account = owned_account(db, args.account_number, args.customer_id)
    if account.status != "open":
        raise ToolError(
            f"Account {account.number} is {account.status}; only open accounts can be closed.",
            code="account_" + account.status,
        )
    # An active hold is the reason given first: the money it holds cannot be moved out.
    if held(db, account):
        raise ToolError(
            f"Account {account.number} has active holds of {money(held(db, account))}.",
            hint="Expired holds can be released with release_hold; others must run out first.",
            code="active_holds",
        )
    if account.balance != 0:
        raise ToolError(
            f"Account {account.number} holds {money(account.balance)} {account.currency}; "
            "only an account with a zero balance can be closed.",
            hint="Transfer the balance to another account of the customer (or repay the loan).",
            code="balance_not_zero",
        )
    account.status, account.closed_at = "closed", ctx.now
    db.flush()
    return account_view(db, account)


class HoldArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id.")
    hold_code: str = Field(description="The hold's code as get_account lists it, e.g. 'HD000123'.")


@tool
def release_hold(db: Session, args: HoldArgs, ctx: ToolContext) -> dict[str, Any]:
    """Release an active hold on one of the customer's accounts, freeing that amount.

    Only holds past their expiry time can be released (before that the merchant may still
    collect the money).
    """
    customer = get_customer(db, args.customer_id)
    hold = db.scalar(select(Hold).where(Hold.code == args.hold_code.strip().upper()))
    if hold is None or hold.account.customer_id != customer.id:
        raise ToolError(
            f"Customer {customer.id} has no hold {args.hold_code!r}.",
            hint="get_account lists an account's active holds.",
            code="not_found",
        )
    if hold.status != "active":
        raise ToolError(f"Hold {hold.code} was already released.")
    if hold.expires_at > ctx.now:
        raise ToolError(
            f"Hold {hold.code} ({money(hold.amount)}, {hold.merchant}) expires at "
            f"{hold.expires_at:%Y-%m-%d %H:%M}; it cannot be released before then.",
            code="hold_not_expired",
        )
    hold.status, hold.released_at = "released", ctx.now
    db.flush()
    # The hold's own status (the account's is under "account"): the answer is about the hold.
    return {
        "hold": hold.code,
        "status": hold.status,
        "amount": hold.amount,
        "merchant": hold.merchant,
        "released_at": hold.released_at.isoformat(),
        "account": account_view(db, hold.account),
    }


class BeneficiaryArgs(ToolArgs):
    customer_id: int = Field(description="The identified customer's id.")
    account_number: str = Field(description="The payee's account number (at this bank).")
    nickname: str = Field(description="A name for the payee (1 to 60 characters).")


@tool
def add_beneficiary(db: Session, args: BeneficiaryArgs, ctx: ToolContext) -> dict[str, Any]:
    """Save another customer's account as a payee, so the customer can transfer money to it.

    Rules: KYC verified; the account must exist, belong to someone else, not be an internal or a
    closed account, and not be saved already.
    """
    customer = get_customer(db, args.customer_id)
    if not 0 < len(args.nickname) <= 60:
        raise ToolError("The nickname must have 1 to 60 characters.", code="invalid_arguments")
    require_kyc(customer, "adding a beneficiary")
    account = get_account(db, args.account_number)
    if account.customer_id == customer.id:
        raise ToolError(
            f"Account {account.number} is the customer's own; no beneficiary is needed.",
            hint="Transfer to it directly.",
            code="invalid_arguments",
        )
    if account.type == "internal" or account.status == "closed":
        raise ToolError(
            f"Account {account.number} cannot receive transfers "
            f"({'internal' if account.type == 'internal' else 'closed'})."
        )
    exists = db.scalar(
        select(Beneficiary).where(
            Beneficiary.customer_id == customer.id, Beneficiary.account_id == account.id
        )
    )
    if exists is not None:
        raise ToolError(
            f"Account {account.number} is already saved as {exists.nickname!r}.",
            code="already_exists",
        )
    db.add(
        Beneficiary(
            customer_id=customer.id,
            account_id=account.id,
            nickname=args.nickname,
            created_at=ctx.now,
        )
    )
    db.flush()
    return {"beneficiary": args.nickname, "account": account.number, "currency": account.currency}
