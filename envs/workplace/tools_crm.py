"""CRM tools: customers (companies and contacts), deals, their stage pipeline and activities."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal, cast

from pydantic import Field
from sqlalchemy import BindParameter, Select, Table, bindparam, func, or_, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.money import cents
from app.sdk.money import optional_money as money
from app.sdk.rows import AnyRow
from envs.workplace.models import (
    DEAL_STAGES,
    Activity,
    Company,
    Contact,
    Deal,
    DealStageChange,
    Employee,
)
from envs.workplace.ops import (
    EMPLOYEES,
    employee_by_email,
    employee_row_by_email,
    me,
    no_such_deal,
    require_active,
)
from envs.workplace.ops import get_deal as find_deal

OPEN_STAGES = ("lead", "qualified", "proposal")
Stage = Literal["lead", "qualified", "proposal", "won", "lost"]


COMPANIES = cast(Table, Company.__table__)
CONTACTS = cast(Table, Contact.__table__)
DEALS = cast(Table, Deal.__table__)
HISTORY = cast(Table, DealStageChange.__table__)
ACTIVITIES = cast(Table, Activity.__table__)


def _contact(c: Contact | AnyRow) -> dict[str, Any]:
    return {
        "name": f"{c.first_name} {c.last_name}",
        "email": c.email,
        "title": c.title,
        "phone": c.phone,
    }


# Core, not ORM lazy loads: hot reads; see docs/performance.md. A deal row holds the deal's
# columns, its company's name and its owner's email.
_DEAL_ROWS = (
    select(
        DEALS.c.id,
        DEALS.c.code,
        DEALS.c.name,
        COMPANIES.c.name.label("company"),
        EMPLOYEES.c.email.label("owner"),
        DEALS.c.stage,
        DEALS.c.amount,
        DEALS.c.close_date,
    )
    .outerjoin(COMPANIES, COMPANIES.c.id == DEALS.c.company_id)
    .outerjoin(EMPLOYEES, EMPLOYEES.c.id == DEALS.c.owner_id)
)
_DEAL_BY_CODE = _DEAL_ROWS.where(DEALS.c.code == bindparam("code"))
_STAGE_HISTORY = (
    select(HISTORY.c.from_stage, HISTORY.c.to_stage, HISTORY.c.changed_at)
    .where(HISTORY.c.deal_id == bindparam("deal_id"))
    .order_by(HISTORY.c.changed_at, HISTORY.c.id)
)
_ACTIVITIES = (
    select(ACTIVITIES.c.kind, ACTIVITIES.c.summary, ACTIVITIES.c.occurred_at)
    .where(ACTIVITIES.c.deal_id == bindparam("deal_id"))
    .order_by(ACTIVITIES.c.occurred_at.desc())
)


def _deal_summary(d: AnyRow) -> dict[str, Any]:
    return {
        "code": d.code,
        "name": d.name,
        "company": d.company,
        "owner": d.owner,
        "stage": d.stage,
        "amount": money(d.amount),
        "close_date": d.close_date.isoformat() if d.close_date else None,
    }


def _deal_row(db: Session, code: str) -> AnyRow:
    """The deal's row (_DEAL_ROWS), as stored: write tools flush before reading it."""
    d = db.execute(_DEAL_BY_CODE, {"code": code.strip().upper()}).first()
    if d is None:
        raise no_such_deal(code)
    return d


def _deal(db: Session, d: AnyRow, full: bool = False) -> dict[str, Any]:
    view = _deal_summary(d)
    if full:
        history = db.execute(_STAGE_HISTORY, {"deal_id": d.id})
        view["stage_history"] = [
            {"from": h.from_stage, "to": h.to_stage, "at": h.changed_at.isoformat()}
            for h in history
        ]
        acts = db.execute(_ACTIVITIES, {"deal_id": d.id})
        view["activities"] = [
            {"kind": a.kind, "summary": a.summary, "at": a.occurred_at.isoformat()} for a in acts
        ]
    return view


class SearchCustomersArgs(ToolArgs):
    query: str = Field(
        min_length=2,
        description="Part of a company name or domain, or of a contact's name or email.",
    )


# Core, not ORM lazy loads: a hot read; see docs/performance.md.
_LIKE: BindParameter[str] = bindparam("like")
_COMPANY_SEARCH = (
    select(COMPANIES.c.id, COMPANIES.c.name, COMPANIES.c.industry, COMPANIES.c.domain)
    .where(
        or_(
            func.lower(COMPANIES.c.name).like(_LIKE),
            func.lower(COMPANIES.c.domain).like(_LIKE),
            COMPANIES.c.id.in_(
                select(CONTACTS.c.company_id).where(
                    or_(
                        func.lower(CONTACTS.c.first_name + " " + CONTACTS.c.last_name).like(_LIKE),
                        func.lower(CONTACTS.c.email).like(_LIKE),
                    )
                )
            ),
        )
    )
    .order_by(COMPANIES.c.name)
    .limit(10)
)
_CONTACTS_OF = (
    select(
        CONTACTS.c.company_id,
        CONTACTS.c.first_name,
        CONTACTS.c.last_name,
        CONTACTS.c.email,
        CONTACTS.c.title,
        CONTACTS.c.phone,
    )
    .where(CONTACTS.c.company_id.in_(bindparam("company_ids", expanding=True)))
    .order_by(CONTACTS.c.company_id, CONTACTS.c.id)
)


@tool(read_only=True)
def search_customers(db: Session, args: SearchCustomersArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search CRM customers: companies (with their contacts) matching a name, domain or contact.

    External email may only go to addresses listed here as contacts.
    """
    like = f"%{args.query.lower()}%"
    companies = db.execute(_COMPANY_SEARCH, {"like": like}).all()
    contacts: dict[int, list[dict[str, Any]]] = {c.id: [] for c in companies}
    if companies:
        for x in db.execute(_CONTACTS_OF, {"company_ids": list(contacts)}):
            contacts[x.company_id].append(_contact(x))
    out = [
        {"company": c.name, "industry": c.industry, "domain": c.domain, "contacts": contacts[c.id]}
        for c in companies
    ]
    return {"companies": out}


class ListDealsArgs(ToolArgs):
    company: str | None = Field(None, description="Exact company name.")
    owner_email: str | None = Field(None, description="Only deals owned by this employee.")
    stage: Stage | None = Field(None, description="Only deals in this stage.")


@cache
def _deal_search(by_company: bool, by_owner: bool, by_stage: bool) -> Select[Any]:
    """Core, not ORM: a hot read; see docs/performance.md. Built once per filter combination."""
    q = _DEAL_ROWS
    if by_company:
        q = q.where(func.lower(COMPANIES.c.name) == bindparam("company"))
    if by_owner:
        q = q.where(DEALS.c.owner_id == bindparam("owner_id"))
    if by_stage:
        q = q.where(DEALS.c.stage == bindparam("stage"))
    return q.order_by(DEALS.c.code).limit(50)


@tool(read_only=True)
def list_deals(db: Session, args: ListDealsArgs, ctx: ToolContext) -> dict[str, Any]:
    """List deals filtered by company, owner and/or stage (at most 50, by code)."""
    params: dict[str, Any] = {}
    if args.company:
        params["company"] = args.company.lower()
    if args.owner_email:
        params["owner_id"] = employee_row_by_email(db, args.owner_email).id
    if args.stage:
        params["stage"] = args.stage
    q = _deal_search(bool(args.company), bool(args.owner_email), bool(args.stage))
    return {"deals": [_deal_summary(d) for d in db.execute(q, params)]}


class DealRef(ToolArgs):
    code: str = Field(description="The deal's code, e.g. D-1042.")


@tool(read_only=True)
def get_deal(db: Session, args: DealRef, ctx: ToolContext) -> dict[str, Any]:
    """A deal in full: company, owner, stage, amount, close date, stage history and activities."""
    return _deal(db, _deal_row(db, args.code), full=True)


def _open(deal: Deal) -> None:
    if deal.stage not in OPEN_STAGES:
        raise ToolError(
            f"Deal {deal.code} is closed ({deal.stage}); closed deals cannot be changed.",
            code="deal_closed",
        )


class StageArgs(DealRef):
    stage: Stage = Field(description="The new stage.")


@tool
def update_deal_stage(db: Session, args: StageArgs, ctx: ToolContext) -> dict[str, Any]:
    """Move a deal to another stage; the change is recorded in the deal's stage history.

    Rules: the pipeline is lead -> qualified -> proposal -> won, one stage forward at a time (no
    skipping, no going back); any open deal may be marked lost; won and lost deals are closed; a
    deal can only be won once it has an amount.
    """
    deal = find_deal(db, args.code)
    _open(deal)
    if args.stage != "lost" and DEAL_STAGES.index(args.stage) != DEAL_STAGES.index(deal.stage) + 1:
        nxt = DEAL_STAGES[DEAL_STAGES.index(deal.stage) + 1]
        raise ToolError(
            f"Deal {deal.code} is in {deal.stage}; it can only move to {nxt} (or lost), "
            f"not to {args.stage}.",
            hint="Deals move forward one stage at a time.",
            code="stage_order",
        )
    if args.stage == "won" and not deal.amount:
        raise ToolError(
            f"Deal {deal.code} has no amount; a deal can only be won with an amount.",
            hint="Set the amount with update_deal_amount first (ask the user if it is unknown).",
            code="amount_required",
        )
    db.add(
        DealStageChange(
            deal_id=deal.id,
            from_stage=deal.stage,
            to_stage=args.stage,
            changed_by=me(db).id,
            changed_at=ctx.now,
        )
    )
    deal.stage = args.stage
    db.flush()
    return _deal(db, _deal_row(db, deal.code))


class AmountArgs(DealRef):
    amount: float = Field(gt=0, le=100_000_000, description="The deal's value in dollars.")


@tool
def update_deal_amount(db: Session, args: AmountArgs, ctx: ToolContext) -> dict[str, Any]:
    """Set an open deal's amount (dollars, rounded to cents). Closed deals cannot be changed."""
    deal = find_deal(db, args.code)
    _open(deal)
    deal.amount = cents(args.amount)
    db.flush()
    return _deal(db, _deal_row(db, deal.code))


class ReassignDealArgs(DealRef):
    new_owner_email: str = Field(description="Email of the colleague who will own the deal.")


@tool
def reassign_deal(db: Session, args: ReassignDealArgs, ctx: ToolContext) -> dict[str, Any]:
    """Hand a deal over to another colleague.

    Rules: only the deal's current owner can reassign it (the user must own it); the new owner
    must be an active employee; closed deals stay with their owner.
    """
    deal = find_deal(db, args.code)
    user = me(db)
    if deal.owner_id != user.id:
        owner = db.get(Employee, deal.owner_id)
        raise ToolError(
            f"Only the owner of deal {deal.code} ({owner.email if owner else '?'}) can reassign "
            "it; the user does not own it.",
            hint="Ask the owner to hand it over.",
            code="not_owner",
        )
    _open(deal)
    new_owner = employee_by_email(db, args.new_owner_email)
    require_active(new_owner, "own deals")
    deal.owner_id = new_owner.id
    db.flush()
    return _deal(db, _deal_row(db, deal.code))


class LogActivityArgs(DealRef):
    kind: Literal["call", "meeting", "email", "note"] = Field(description="What happened.")
    summary: str = Field(min_length=1, max_length=2000, description="A short summary.")
    contact_email: str | None = Field(
        None, description="The customer contact involved, if any (must work at the deal's company)."
    )


@tool
def log_activity(db: Session, args: LogActivityArgs, ctx: ToolContext) -> dict[str, Any]:
    """Log a call, meeting, email or note on a deal, by the user, at the current time.

    Rule: the contact, if given, must be a contact of the deal's company.
    """
    deal = find_deal(db, args.code)
    contact_id = None
    if args.contact_email:
        contact = db.scalar(
            select(Contact).where(func.lower(Contact.email) == args.contact_email.lower())
        )
        if contact is None or contact.company_id != deal.company_id:
            raise ToolError(
                f"{args.contact_email} is not a contact of the company of deal {deal.code}.",
                hint="search_customers lists each company's contacts.",
                code="wrong_contact",
            )
        contact_id = contact.id
    db.add(
        Activity(
            deal_id=deal.id,
            contact_id=contact_id,
            employee_id=me(db).id,
            kind=args.kind,
            summary=args.summary,
            occurred_at=ctx.now,
        )
    )
    db.flush()
    return {"deal": deal.code, "kind": args.kind, "logged_at": ctx.now.isoformat()}
