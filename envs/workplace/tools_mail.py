"""Email tools: search and read the user's mailbox, send, reply, forward, archive and label."""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal, cast

from pydantic import Field
from sqlalchemy import BindParameter, Select, Table, bindparam, func, or_, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.workplace.models import Contact, Employee, MailboxItem, Message
from envs.workplace.ops import (
    addresses,
    employee_by_email,
    is_internal,
    me,
    me_row,
    my_item,
    new_message_id,
    require_active,
)

LABEL = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,29}$")
MAILBOX = cast(Table, MailboxItem.__table__)
MESSAGES = cast(Table, Message.__table__)


def _summary(item: MailboxItem | AnyRow, msg: Message | AnyRow) -> dict[str, Any]:
    return {
        "message_id": msg.message_id,
        "from": msg.sender,
        "to": msg.to_addresses.split(",") if msg.to_addresses else [],
        "cc": msg.cc_addresses.split(",") if msg.cc_addresses else [],
        "subject": msg.subject,
        "sent_at": msg.sent_at.isoformat(),
        "folder": item.folder,
        "is_read": item.is_read,
        "labels": item.labels.split(",") if item.labels else [],
    }


class SearchEmailsArgs(ToolArgs):
    query: str | None = Field(
        None, description="Words to look for in the subject or body (case-insensitive)."
    )
    from_address: str | None = Field(None, description="Only emails sent by this address.")
    folder: Literal["inbox", "sent", "archive"] | None = Field(
        None, description="Only emails in this folder of your mailbox."
    )
    label: str | None = Field(None, description="Only emails carrying this label.")
    unread_only: bool | None = Field(None, description="True: only unread emails.")
    limit: int | None = Field(None, ge=1, le=50, description="At most this many (default 20).")


@cache
def _mailbox_search(by_text: bool, by_sender: bool, by_folder: bool, unread: bool) -> Select[Any]:
    """Core, not ORM: a hot read; see docs/performance.md. Built once per filter combination.

    A row holds the mailbox item's and the message's columns `_summary` reads."""
    m, i = MESSAGES.c, MAILBOX.c
    q = (
        select(
            i.folder,
            i.is_read,
            i.labels,
            m.message_id,
            m.sender,
            m.to_addresses,
            m.cc_addresses,
            m.subject,
            m.sent_at,
        )
        .join(MESSAGES, m.id == i.message_id)
        .where(i.employee_id == bindparam("employee_id"))
    )
    if by_text:
        like: BindParameter[str] = bindparam("like")
        q = q.where(or_(func.lower(m.subject).like(like), func.lower(m.body).like(like)))
    if by_sender:
        q = q.where(func.lower(m.sender) == bindparam("sender"))
    if by_folder:
        q = q.where(i.folder == bindparam("folder"))
    if unread:
        q = q.where(i.is_read.is_(False))
    return q.order_by(m.sent_at.desc(), m.id.desc())


@tool(read_only=True)
def search_emails(db: Session, args: SearchEmailsArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the user's own mailbox, newest first; returns each email's message_id and headers.

    Use read_email with a message_id to see the body. Only the user's mailbox is searchable.
    """
    params: dict[str, Any] = {"employee_id": me_row(db).id}
    if args.query:
        params["like"] = f"%{args.query.lower()}%"
    if args.from_address:
        params["sender"] = args.from_address.lower()
    if args.folder:
        params["folder"] = args.folder
    q = _mailbox_search(
        bool(args.query), bool(args.from_address), bool(args.folder), bool(args.unread_only)
    )
    rows = db.execute(q, params).all()
    if args.label:
        wanted = args.label.lower()
        rows = [r for r in rows if wanted in r.labels.split(",")]
    limit = args.limit or 20
    return {"total": len(rows), "emails": [_summary(r, r) for r in rows[:limit]]}


class MessageRef(ToolArgs):
    message_id: str = Field(description="The email's message_id, as search_emails returns it.")


@tool(read_only=True)
def read_email(db: Session, args: MessageRef, ctx: ToolContext) -> dict[str, Any]:
    """Read one email of the user's mailbox in full (headers and body)."""
    item = my_item(db, me(db), args.message_id)
    msg = db.get(Message, item.message_id)
    assert msg is not None
    return {**_summary(item, msg), "body": msg.body, "in_reply_to": msg.in_reply_to}


def _check_recipients(db: Session, to: list[str], cc: list[str]) -> list[Employee]:
    """Internal addresses must be active employees; external ones must be CRM contacts."""
    if not to:
        raise ToolError("Name at least one recipient in `to`.", code="invalid_arguments")
    internal = []
    for address in [*to, *cc]:
        if is_internal(address):
            employee = employee_by_email(db, address)
            require_active(employee, "email them")
            internal.append(employee)
        elif db.scalar(select(Contact.id).where(func.lower(Contact.email) == address)) is None:
            raise ToolError(
                f"{address} is an external address that is not a CRM contact; company policy "
                "allows external email only to CRM contacts.",
                hint="Check the address with search_customers; do not email unknown outsiders.",
                code="external_recipient",
            )
    return internal


def _deliver(
    db: Session,
    ctx: ToolContext,
    to: list[str],
    cc: list[str],
    subject: str,
    body: str,
    in_reply_to: str | None = None,
) -> dict[str, Any]:
    user = me(db)
    to, cc = addresses(to), [a for a in addresses(cc) if a not in to]
    recipients = _check_recipients(db, to, cc)
    mid = new_message_id(user.email, to, cc, subject, ctx.now)
    if db.scalar(select(Message.id).where(Message.message_id == mid)) is not None:
        raise ToolError(
            "An identical email (same recipients and subject) was just sent; not sending twice.",
            code="duplicate",
        )
    msg = Message(
        message_id=mid,
        sender=user.email,
        to_addresses=",".join(to),
        cc_addresses=",".join(cc),
        subject=subject,
        body=body,
        sent_at=ctx.now,
        in_reply_to=in_reply_to,
    )
    db.add(msg)
    db.flush()
    db.add(MailboxItem(employee_id=user.id, message_id=msg.id, folder="sent", is_read=True))
    for employee in {e.id: e for e in recipients if e.id != user.id}.values():
        db.add(MailboxItem(employee_id=employee.id, message_id=msg.id, folder="inbox"))
    db.flush()
    return {
        "message_id": mid,
        "to": to,
        "cc": cc,
        "subject": subject,
        "sent_at": ctx.now.isoformat(),
    }


class SendEmailArgs(ToolArgs):
    to: list[str] = Field(description="Recipient email addresses.")
    cc: list[str] | None = Field(None, description="Addresses to copy, if any.")
    subject: str = Field(min_length=1, max_length=200, description="The subject line.")
    body: str = Field(min_length=1, description="The message text.")


@tool
def send_email(db: Session, args: SendEmailArgs, ctx: ToolContext) -> dict[str, Any]:
    """Send a new email from the user's address.

    Rules: internal recipients (@northwindlabs.com) must be active employees; external recipients
    must be contacts in the CRM (company policy: no email to unknown outsiders).
    """
    return _deliver(db, ctx, args.to, args.cc or [], args.subject, args.body)


def _prefixed(prefix: str, subject: str) -> str:
    return subject if subject.lower().startswith(prefix.lower()) else f"{prefix} {subject}"


class ReplyArgs(MessageRef):
    body: str = Field(min_length=1, description="The reply text.")
    reply_all: bool | None = Field(
        None, description="True: also reply to every other recipient of the original email."
    )


@tool
def reply_email(db: Session, args: ReplyArgs, ctx: ToolContext) -> dict[str, Any]:
    """Reply to an email in the user's mailbox (to its sender; with reply_all, to everyone on it).

    The subject becomes "Re: <subject>". The same recipient rules as send_email apply.
    """
    user = me(db)
    original = db.get(Message, my_item(db, user, args.message_id).message_id)
    assert original is not None
    to = [original.sender]
    cc: list[str] = []
    if args.reply_all:
        others = original.to_addresses.split(",") + original.cc_addresses.split(",")
        cc = [a for a in others if a and a != user.email]
    if to == [user.email]:  # replying to one's own sent mail goes to its recipients
        to = original.to_addresses.split(",")
    return _deliver(
        db, ctx, to, cc, _prefixed("Re:", original.subject), args.body, original.message_id
    )


class ForwardArgs(MessageRef):
    to: list[str] = Field(description="Addresses to forward the email to.")
    note: str | None = Field(None, description="A short note placed above the forwarded email.")


@tool
def forward_email(db: Session, args: ForwardArgs, ctx: ToolContext) -> dict[str, Any]:
    """Forward an email of the user's mailbox to other people; the subject becomes "Fwd: ...".

    The same recipient rules as send_email apply (external addresses only to CRM contacts).
    """
    original = db.get(Message, my_item(db, me(db), args.message_id).message_id)
    assert original is not None
    body = (
        f"{args.note or ''}\n\n---------- Forwarded message ----------\nFrom: {original.sender}\n"
        f"Subject: {original.subject}\n\n{original.body}"
    )
    return _deliver(db, ctx, args.to, [], _prefixed("Fwd:", original.subject), body)


@tool
def archive_email(db: Session, args: MessageRef, ctx: ToolContext) -> dict[str, Any]:
    """Move an email from the user's inbox to the archive folder (only inbox emails)."""
    item = my_item(db, me(db), args.message_id)
    if item.folder != "inbox":
        raise ToolError(
            f"Email {args.message_id} is in {item.folder}, not in the inbox; only inbox emails "
            "can be archived.",
            code="wrong_folder",
        )
    item.folder, item.is_read = "archive", True
    return {"message_id": args.message_id, "folder": "archive"}


class LabelArgs(MessageRef):
    add: list[str] | None = Field(None, description="Labels to add, e.g. ['finance'].")
    remove: list[str] | None = Field(None, description="Labels to remove.")


@tool
def label_email(db: Session, args: LabelArgs, ctx: ToolContext) -> dict[str, Any]:
    """Add and/or remove labels on an email of the user's mailbox.

    Labels are lower-case words (letters, digits, space, '-' or '_', at most 30 characters).
    """
    item = my_item(db, me(db), args.message_id)
    add = [a.strip().lower() for a in args.add or []]
    remove = {r.strip().lower() for r in args.remove or []}
    if not add and not remove:
        raise ToolError("Name at least one label to add or remove.", code="invalid_arguments")
    bad = [a for a in add if not LABEL.match(a)]
    if bad:
        raise ToolError(
            f"Invalid label(s) {bad}.", hint="Use short lower-case words.", code="invalid_arguments"
        )
    current = set(item.labels.split(",")) - {""}
    missing = sorted(remove - current)
    if missing:
        raise ToolError(f"Email {args.message_id} has no label(s) {missing}.", code="not_found")
    labels = sorted((current | set(add)) - remove)
    item.labels = ",".join(labels)
    return {"message_id": args.message_id, "labels": labels}
