"""Shared helpers of the workplace tools: the acting user, lookups that fail helpfully, codes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolError
from app.sdk.rows import AnyRow
from envs.workplace.models import (
    INTERNAL_DOMAIN,
    AssistantProfile,
    Contact,
    Deal,
    Employee,
    Event,
    EventAttendee,
    MailboxItem,
    Message,
    WorkTask,
)

# The mapped tables, for the hot read paths that use Core instead of ORM entities.
EMPLOYEES = cast(Table, Employee.__table__)
PROFILE = cast(Table, AssistantProfile.__table__)
EVENTS = cast(Table, Event.__table__)
ATTENDEES = cast(Table, EventAttendee.__table__)


# Core, not ORM lazy loads: read on most calls; see docs/performance.md.
_ME = (
    select(EMPLOYEES)
    .join(PROFILE, PROFILE.c.employee_id == EMPLOYEES.c.id)
    .where(PROFILE.c.id == 1)
)


def me_row(db: Session) -> AnyRow:
    """The employee this assistant works for (every write is made on their behalf), as a row of
    every employee column; write tools load the entity with `me`."""
    user = db.execute(_ME).first()
    if user is None:
        raise ToolError("No user is configured for this assistant.", code="not_configured")
    return user


def me(db: Session) -> Employee:
    """`me_row`'s employee as an ORM entity, for the write tools."""
    return db.get_one(Employee, me_row(db).id)


def full_name(e: Employee | Contact | AnyRow) -> str:
    return f"{e.first_name} {e.last_name}"


def no_such_employee(email: str) -> ToolError:
    return ToolError(
        f"No employee has the email {email!r}.",
        hint="Find colleagues with search_employees (by name or department).",
        code="not_found",
    )


# Core, not ORM: a hot read; see docs/performance.md.
_EMPLOYEE_BY_EMAIL = select(EMPLOYEES).where(func.lower(EMPLOYEES.c.email) == bindparam("email"))


def employee_row_by_email(db: Session, email: str) -> AnyRow:
    """The employee with this email (any case), as a row of every employee column."""
    found = db.execute(_EMPLOYEE_BY_EMAIL, {"email": email.strip().lower()}).first()
    if found is None:
        raise no_such_employee(email)
    return found


def employee_by_email(db: Session, email: str) -> Employee:
    """`employee_row_by_email`'s employee as an ORM entity, for the write tools."""
    return db.get_one(Employee, employee_row_by_email(db, email).id)


def require_active(e: Employee | AnyRow, doing: str) -> None:
    if not e.active:
        raise ToolError(
            f"{full_name(e)} ({e.email}) is no longer an active employee; cannot {doing}.",
            hint="Choose an active colleague (search_employees shows who is active).",
            code="inactive_employee",
        )


def addresses(raw: Iterable[str]) -> list[str]:
    """Lower-cased, de-duplicated, sorted: how recipient lists are stored and compared."""
    return sorted({a.strip().lower() for a in raw if a.strip()})


def is_internal(address: str) -> bool:
    return address.lower().endswith("@" + INTERNAL_DOMAIN)


def digest(*parts: Any) -> str:
    text = "\x1f".join(" ".join(str(p).split()).casefold() for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()


def new_message_id(sender: str, to: list[str], cc: list[str], subject: str, at: datetime) -> str:
    key = digest(sender, ",".join(to), ",".join(cc), subject, at.isoformat())
    return f"<{key[:20]}@{INTERNAL_DOMAIN}>"


def new_event_code(organizer: str, title: str, start: datetime) -> str:
    return "EV-" + digest(organizer, title, start.isoformat())[:10].upper()


def my_item(db: Session, user: Employee, message_id: str) -> MailboxItem:
    """The user's own copy of a message, found by its message_id."""
    item = db.scalar(
        select(MailboxItem)
        .join(Message, Message.id == MailboxItem.message_id)
        .where(MailboxItem.employee_id == user.id, Message.message_id == message_id.strip())
    )
    if item is None:
        raise ToolError(
            f"No message {message_id!r} is in your mailbox.",
            hint="Use search_emails to find the message_id of an email.",
            code="not_found",
        )
    return item


def no_such_deal(code: str) -> ToolError:
    return ToolError(
        f"No deal has code {code!r}.",
        hint="Deal codes look like D-1042; list_deals finds deals by company or owner.",
        code="not_found",
    )


def get_deal(db: Session, code: str) -> Deal:
    deal = db.scalar(select(Deal).where(Deal.code == code.strip().upper()))
    if deal is None:
        raise no_such_deal(code)
    return deal


def get_event(db: Session, code: str) -> Event:
    event = db.scalar(select(Event).where(Event.code == code.strip().upper()))
    if event is None:
        raise ToolError(
            f"No event has code {code!r}.",
            hint="list_events shows events with their codes.",
            code="not_found",
        )
    return event


def get_task(db: Session, code: str) -> WorkTask:
    task = db.scalar(select(WorkTask).where(WorkTask.code == code.strip().upper()))
    if task is None:
        raise ToolError(
            f"No task has code {code!r}.",
            hint="Task codes look like ATLAS-12; list_tasks finds tasks.",
            code="not_found",
        )
    return task


def busy(
    db: Session, employee_ids: list[int], start: datetime, end: datetime, skip_event: int = 0
) -> list[tuple[Employee, Event]]:
    """Confirmed events of these employees (not declined by them) overlapping [start, end)."""
    rows = db.execute(
        select(EventAttendee.employee_id, Event)
        .join(Event, Event.id == EventAttendee.event_id)
        .where(
            EventAttendee.employee_id.in_(employee_ids),
            EventAttendee.response != "declined",
            Event.status == "confirmed",
            Event.id != skip_event,
            Event.start_at < end,
            Event.end_at > start,
        )
        .order_by(Event.start_at, Event.id)
    ).all()
    return [(db.get(Employee, eid), ev) for eid, ev in rows]  # type: ignore[misc]


# Core, not ORM lazy loads: hot reads (find_free_slot, list_events); see docs/performance.md.
_BUSY_SPANS = (
    select(EVENTS.c.start_at, EVENTS.c.end_at)
    .join(ATTENDEES, ATTENDEES.c.event_id == EVENTS.c.id)
    .where(
        ATTENDEES.c.employee_id.in_(bindparam("employee_ids", expanding=True)),
        ATTENDEES.c.response != "declined",
        EVENTS.c.status == "confirmed",
        EVENTS.c.start_at < bindparam("end"),
        EVENTS.c.end_at > bindparam("start"),
    )
)


def busy_spans(
    db: Session, employee_ids: list[int], start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    """(start, end) of every event `busy` would list for these employees in [start, end)."""
    params = {"employee_ids": employee_ids, "start": start, "end": end}
    return [(s, e) for s, e in db.execute(_BUSY_SPANS, params)]


# Every event column plus the organizer's email, as event views need them.
EVENT_COLUMNS = (*EVENTS.c, EMPLOYEES.c.email.label("organizer"))
_EVENT_BY_ID = (
    select(*EVENT_COLUMNS)
    .outerjoin(EMPLOYEES, EMPLOYEES.c.id == EVENTS.c.organizer_id)
    .where(EVENTS.c.id == bindparam("event_id"))
)
_ATTENDEES_OF = (
    select(ATTENDEES.c.event_id, EMPLOYEES.c.email, ATTENDEES.c.response)
    .join(EMPLOYEES, EMPLOYEES.c.id == ATTENDEES.c.employee_id)
    .where(ATTENDEES.c.event_id.in_(bindparam("event_ids", expanding=True)))
    .order_by(ATTENDEES.c.event_id, ATTENDEES.c.id)
)


def event_views(db: Session, events: list[AnyRow]) -> list[dict[str, Any]]:
    """The views of event rows (EVENT_COLUMNS), attendees in invitation order."""
    attendees: dict[int, list[dict[str, Any]]] = {ev.id: [] for ev in events}
    if events:
        for a in db.execute(_ATTENDEES_OF, {"event_ids": list(attendees)}):
            attendees[a.event_id].append({"email": a.email, "response": a.response})
    return [
        {
            "code": ev.code,
            "title": ev.title,
            "organizer": ev.organizer,
            "start": ev.start_at.isoformat(),
            "end": ev.end_at.isoformat(),
            "location": ev.location,
            "status": ev.status,
            "attendees": attendees[ev.id],
        }
        for ev in events
    ]


def event_view(db: Session, ev: Event) -> dict[str, Any]:
    """The view of one event as stored (write tools flush before calling this)."""
    return event_views(db, [db.execute(_EVENT_BY_ID, {"event_id": ev.id}).one()])[0]
