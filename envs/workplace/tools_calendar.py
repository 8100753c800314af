"""Calendar tools: list events, find a free slot, create, reschedule, cancel and answer invites."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal

from pydantic import Field, field_validator
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.workplace.models import Employee, Event, EventAttendee
from envs.workplace.ops import (
    ATTENDEES,
    EMPLOYEES,
    EVENT_COLUMNS,
    EVENTS,
    busy,
    busy_spans,
    employee_row_by_email,
    event_view,
    event_views,
    full_name,
    get_event,
    me,
    me_row,
    new_event_code,
    require_active,
)

MAX_LENGTH = timedelta(hours=8)
SLOT_STEP = timedelta(minutes=30)


def _naive_utc(value: datetime) -> datetime:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.replace(second=0, microsecond=0)


class ListEventsArgs(ToolArgs):
    start_date: date = Field(description="First day to list (YYYY-MM-DD).")
    end_date: date | None = Field(
        None, description="Last day to list, inclusive (default: 7 days after start_date)."
    )
    employee_email: str | None = Field(
        None, description="Whose calendar to list (default: the user's own)."
    )
    include_cancelled: bool | None = Field(None, description="True: also list cancelled events.")


# Core, not ORM lazy loads: a hot read; see docs/performance.md.
_EVENTS_ATTENDED = (
    select(*EVENT_COLUMNS)
    .join(ATTENDEES, ATTENDEES.c.event_id == EVENTS.c.id)
    .outerjoin(EMPLOYEES, EMPLOYEES.c.id == EVENTS.c.organizer_id)
    .where(
        ATTENDEES.c.employee_id == bindparam("employee_id"),
        EVENTS.c.start_at < bindparam("before"),
        EVENTS.c.end_at > bindparam("after"),
    )
    .order_by(EVENTS.c.start_at, EVENTS.c.id)
)
_CONFIRMED_EVENTS_ATTENDED = _EVENTS_ATTENDED.where(EVENTS.c.status == "confirmed")


@tool(read_only=True)
def list_events(db: Session, args: ListEventsArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the events someone attends (or organizes) between two dates, earliest first.

    Each event has a code (for reschedule_event / cancel_event), times in UTC and attendees.
    """
    who = employee_row_by_email(db, args.employee_email) if args.employee_email else me_row(db)
    first = datetime.combine(args.start_date, time())
    last = datetime.combine(args.end_date or args.start_date + timedelta(days=7), time())
    q = _EVENTS_ATTENDED if args.include_cancelled else _CONFIRMED_EVENTS_ATTENDED
    params = {"employee_id": who.id, "before": last + timedelta(days=1), "after": first}
    events = db.execute(q, params).all()
    return {"calendar_of": who.email, "events": event_views(db, list(events))}


def _people(db: Session, emails: list[str]) -> list[AnyRow]:
    """The user plus the named colleagues (employee rows), each once, all active."""
    user = me_row(db)
    people = {user.id: user}
    for address in emails:
        employee = employee_row_by_email(db, address)
        require_active(employee, "invite them")
        people[employee.id] = employee
    return list(people.values())


def _check_times(start: datetime, end: datetime, ctx: ToolContext) -> None:
    if end <= start:
        raise ToolError("The event must end after it starts.", code="invalid_arguments")
    if end - start > MAX_LENGTH:
        raise ToolError("Events can last at most 8 hours.", code="event_too_long")
    if start < ctx.now:
        raise ToolError(
            f"{start.isoformat()} is in the past (now is {ctx.now.isoformat()}).",
            code="in_the_past",
        )


def _refuse_conflicts(
    db: Session,
    people: list[Employee] | list[AnyRow],
    start: datetime,
    end: datetime,
    skip: int = 0,
) -> None:
    clashes = busy(db, [p.id for p in people], start, end, skip)
    if clashes:
        listed = "; ".join(
            f"{full_name(e)} has '{ev.title}' ({ev.start_at:%Y-%m-%d %H:%M}-{ev.end_at:%H:%M})"
            for e, ev in clashes
        )
        raise ToolError(
            f"Scheduling conflict: {listed}.",
            hint="Pick another time (find_free_slot helps), or pass allow_conflicts=true only if "
            "the user explicitly said to book over existing events.",
            code="conflict",
        )


class FreeSlotArgs(ToolArgs):
    attendee_emails: list[str] = Field(description="Colleagues who must be free (the user always).")
    day: date = Field(description="The day to search (YYYY-MM-DD).")
    duration_minutes: int = Field(ge=15, le=480, description="Length of the meeting in minutes.")
    earliest: time | None = Field(None, description="Earliest start, HH:MM UTC (default 09:00).")
    latest_end: time | None = Field(None, description="Latest end, HH:MM UTC (default 17:00).")


@tool(read_only=True)
def find_free_slot(db: Session, args: FreeSlotArgs, ctx: ToolContext) -> dict[str, Any]:
    """Find the earliest slot on a day when the user and every named colleague are free.

    Slots start on the hour or half hour, not before now; declined and cancelled events do not
    block a slot.
    """
    people = _people(db, args.attendee_emails)
    length = timedelta(minutes=args.duration_minutes)
    start = datetime.combine(args.day, args.earliest or time(9, 0))
    stop = datetime.combine(args.day, args.latest_end or time(17, 0))
    # One read of the day's busy times instead of a `busy` query per slot tried.
    spans = busy_spans(db, [p.id for p in people], start, stop)
    while start + length <= stop:
        end = start + length
        if start >= ctx.now and not any(s < end and e > start for s, e in spans):
            return {
                "start": start.isoformat(),
                "end": (start + length).isoformat(),
                "attendees": [p.email for p in people],
            }
        start += SLOT_STEP
    raise ToolError(
        f"No free {args.duration_minutes}-minute slot for everyone on {args.day.isoformat()}.",
        hint="Try another day or a shorter meeting.",
        code="no_slot",
    )


class CreateEventArgs(ToolArgs):
    title: str = Field(min_length=1, max_length=120, description="The event's title.")
    start: datetime = Field(description="Start, ISO 8601 UTC, e.g. 2026-03-17T14:00:00.")
    end: datetime = Field(description="End, ISO 8601 UTC.")
    attendee_emails: list[str] = Field(description="Colleagues to invite (the user is added).")
    location: str | None = Field(None, description="Room or video link.")
    allow_conflicts: bool | None = Field(
        None, description="True only if the user explicitly asked to book over existing events."
    )

    _utc = field_validator("start", "end")(_naive_utc)


@tool
def create_event(db: Session, args: CreateEventArgs, ctx: ToolContext) -> dict[str, Any]:
    """Create an event organized by the user and invite colleagues.

    Rules: it may not overlap an existing event of the user or of any attendee unless the user
    explicitly allowed it (allow_conflicts); attendees must be active employees; not in the past;
    at most 8 hours.
    """
    _check_times(args.start, args.end, ctx)
    people = _people(db, args.attendee_emails)
    if not args.allow_conflicts:
        _refuse_conflicts(db, people, args.start, args.end)
    user = people[0]
    code = new_event_code(user.email, args.title, args.start)
    if db.scalar(select(Event.id).where(Event.code == code)) is not None:
        raise ToolError("This event already exists (same title and start).", code="duplicate")
    event = Event(
        code=code,
        title=args.title,
        organizer_id=user.id,
        start_at=args.start,
        end_at=args.end,
        location=args.location or "",
        status="confirmed",
    )
    db.add(event)
    db.flush()
    for p in people:
        response = "accepted" if p.id == user.id else "needs_action"
        db.add(EventAttendee(event_id=event.id, employee_id=p.id, response=response))
    db.flush()
    return event_view(db, event)


def _organized(db: Session, code: str, doing: str) -> Event:
    event = get_event(db, code)
    user = me(db)
    if event.organizer_id != user.id:
        raise ToolError(
            f"Only the organizer can {doing} event {event.code}; "
            f"{user.email} is not its organizer.",
            hint="Ask the organizer, or decline the invitation with respond_to_event.",
            code="not_organizer",
        )
    if event.status != "confirmed":
        raise ToolError(f"Event {event.code} is already cancelled.", code="cancelled")
    return event


class RescheduleArgs(ToolArgs):
    code: str = Field(description="The event's code, e.g. EV-1A2B3C4D5E.")
    new_start: datetime = Field(description="New start, ISO 8601 UTC.")
    new_end: datetime = Field(description="New end, ISO 8601 UTC.")
    allow_conflicts: bool | None = Field(
        None, description="True only if the user explicitly asked to book over existing events."
    )

    _utc = field_validator("new_start", "new_end")(_naive_utc)


@tool
def reschedule_event(db: Session, args: RescheduleArgs, ctx: ToolContext) -> dict[str, Any]:
    """Move an event the user organizes to a new time; attendees must answer the invite again.

    Same rules as create_event: no overlap with the attendees' other events unless explicitly
    allowed, not in the past. Only the organizer may reschedule.
    """
    event = _organized(db, args.code, "reschedule")
    _check_times(args.new_start, args.new_end, ctx)
    invites = list(db.scalars(select(EventAttendee).where(EventAttendee.event_id == event.id)))
    if not args.allow_conflicts:
        people = [db.get(Employee, a.employee_id) for a in invites if a.response != "declined"]
        _refuse_conflicts(db, people, args.new_start, args.new_end, skip=event.id)  # type: ignore[arg-type,unused-ignore]
    event.start_at, event.end_at = args.new_start, args.new_end
    for a in invites:
        if a.employee_id != event.organizer_id:
            a.response = "needs_action"
    db.flush()
    return event_view(db, event)


class EventRef(ToolArgs):
    code: str = Field(description="The event's code, e.g. EV-1A2B3C4D5E.")


@tool
def cancel_event(db: Session, args: EventRef, ctx: ToolContext) -> dict[str, Any]:
    """Cancel an event the user organizes (only the organizer can cancel)."""
    event = _organized(db, args.code, "cancel")
    event.status = "cancelled"
    return {"code": event.code, "status": "cancelled"}


class RespondArgs(EventRef):
    response: Literal["accepted", "tentative", "declined"] = Field(
        description="The user's answer to the invitation."
    )


@tool
def respond_to_event(db: Session, args: RespondArgs, ctx: ToolContext) -> dict[str, Any]:
    """Accept, tentatively accept or decline an invitation the user received (not as organizer)."""
    event = get_event(db, args.code)
    user = me(db)
    invite = db.scalar(
        select(EventAttendee).where(
            EventAttendee.event_id == event.id, EventAttendee.employee_id == user.id
        )
    )
    if invite is None or event.organizer_id == user.id:
        raise ToolError(
            f"{user.email} is not an invitee of event {event.code} (organizers do not respond).",
            code="not_invited",
        )
    if event.status != "confirmed":
        raise ToolError(f"Event {event.code} is cancelled.", code="cancelled")
    invite.response = args.response
    return {"code": event.code, "response": args.response}
