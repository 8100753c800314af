"""The workplace schema: employees, email, calendar, CRM and project tasks of one company.

Datetimes are naive UTC; money is `Numeric(12, 2)` read back as float. Rows created by tools carry
deterministic codes (messages, events) derived from their content, so a replayed gold solution and
an agent that makes the same calls in another order reach identical states.
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
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.sdk.models import DeclarativeBase, Money, make_metadata, one_of

INTERNAL_DOMAIN = "northwindlabs.com"

DEPARTMENTS = ("Sales", "Engineering", "Marketing", "Finance", "Support", "Operations", "People")
FOLDERS = ("inbox", "sent", "archive")
EVENT_STATUSES = ("confirmed", "cancelled")
RESPONSES = ("accepted", "tentative", "declined", "needs_action")
# The pipeline order; "lost" may be reached from any open stage.
DEAL_STAGES = ("lead", "qualified", "proposal", "won", "lost")
ACTIVITY_KINDS = ("call", "meeting", "email", "note")
PROJECT_STATUSES = ("active", "on_hold", "closed")
TASK_STATUSES = ("todo", "in_progress", "done")
PRIORITIES = ("low", "medium", "high", "urgent")


def _website(context: Any) -> str:
    return "https://www." + context.get_current_parameters()["domain"]


class Base(DeclarativeBase):
    metadata = make_metadata()


class Employee(Base):
    __tablename__ = "employees"
    __table_args__ = (
        CheckConstraint(one_of("department", DEPARTMENTS), name="department"),
        Index("ix_employees_last_first", "last_name", "first_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(120), unique=True, index=True)
    first_name: Mapped[str] = mapped_column(String(60))
    last_name: Mapped[str] = mapped_column(String(60))
    department: Mapped[str] = mapped_column(String(20))
    title: Mapped[str] = mapped_column(String(60))
    manager_id: Mapped[int | None] = mapped_column(ForeignKey("employees.id"))
    # Former employees stay for history but get no new work, mail or invitations.
    active: Mapped[bool] = mapped_column(Boolean, default=True)


class AssistantProfile(Base):
    """The one employee this assistant works for (one row, id 1); a task's seed sets it."""

    __tablename__ = "assistant_profile"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"))


class Message(Base):
    """One email as sent; each mailbox holding it has a `mailbox_items` row."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # "<hex@northwindlabs.com>", derived from sender, recipients, subject and time.
    message_id: Mapped[str] = mapped_column(String(80), unique=True, index=True)
    sender: Mapped[str] = mapped_column(String(120), index=True)
    # Lower-cased addresses, sorted, comma-separated.
    to_addresses: Mapped[str] = mapped_column(Text)
    cc_addresses: Mapped[str] = mapped_column(Text, default="")
    subject: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)
    sent_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    in_reply_to: Mapped[str | None] = mapped_column(ForeignKey("messages.message_id"))


class MailboxItem(Base):
    __tablename__ = "mailbox_items"
    __table_args__ = (
        CheckConstraint(one_of("folder", FOLDERS), name="folder"),
        UniqueConstraint("employee_id", "message_id", name="one_copy"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id"), index=True)
    folder: Mapped[str] = mapped_column(String(10))
    is_read: Mapped[bool] = mapped_column(Boolean, default=False)
    # Lower-case label names, sorted, comma-separated ("" for none).
    labels: Mapped[str] = mapped_column(String(200), default="")


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (
        CheckConstraint(one_of("status", EVENT_STATUSES), name="status"),
        CheckConstraint("end_at > start_at", name="ends_after_start"),
        Index("ix_events_start_end", "start_at", "end_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # "EV-<hex>", derived from organizer, title and the originally booked start.
    code: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    title: Mapped[str] = mapped_column(String(120))
    organizer_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    start_at: Mapped[datetime] = mapped_column(DateTime)
    end_at: Mapped[datetime] = mapped_column(DateTime)
    location: Mapped[str] = mapped_column(String(80), default="")
    status: Mapped[str] = mapped_column(String(10), default="confirmed")


class EventAttendee(Base):
    __tablename__ = "event_attendees"
    __table_args__ = (
        CheckConstraint(one_of("response", RESPONSES), name="response"),
        UniqueConstraint("event_id", "employee_id", name="one_invite"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id"), index=True)
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    response: Mapped[str] = mapped_column(String(12), default="needs_action")


class Company(Base):
    __tablename__ = "companies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(80), unique=True, index=True)
    industry: Mapped[str] = mapped_column(String(40))
    domain: Mapped[str] = mapped_column(String(80), unique=True)
    # Added by the workplace branch's second migration, backfilled from the domain (same rule).
    website: Mapped[str] = mapped_column(String(100), default=_website)


class Contact(Base):
    __tablename__ = "contacts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    first_name: Mapped[str] = mapped_column(String(60))
    last_name: Mapped[str] = mapped_column(String(60))
    email: Mapped[str] = mapped_column(String(120), unique=True, index=True)
    phone: Mapped[str | None] = mapped_column(String(30))
    title: Mapped[str] = mapped_column(String(60))


class Deal(Base):
    __tablename__ = "deals"
    __table_args__ = (
        CheckConstraint(one_of("stage", DEAL_STAGES), name="stage"),
        CheckConstraint("amount IS NULL OR amount >= 0", name="amount_nonnegative"),
        CheckConstraint("stage != 'won' OR amount > 0", name="won_has_amount"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    name: Mapped[str] = mapped_column(String(120))
    company_id: Mapped[int] = mapped_column(ForeignKey("companies.id"), index=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    stage: Mapped[str] = mapped_column(String(10), index=True)
    amount: Mapped[float | None] = mapped_column(Money)
    close_date: Mapped[date | None] = mapped_column(Date)


class DealStageChange(Base):
    __tablename__ = "deal_stage_history"
    __table_args__ = (
        CheckConstraint(one_of("from_stage", DEAL_STAGES), name="from_stage"),
        CheckConstraint(one_of("to_stage", DEAL_STAGES), name="to_stage"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deal_id: Mapped[int] = mapped_column(ForeignKey("deals.id"), index=True)
    from_stage: Mapped[str] = mapped_column(String(10))
    to_stage: Mapped[str] = mapped_column(String(10))
    changed_by: Mapped[int] = mapped_column(ForeignKey("employees.id"))
    changed_at: Mapped[datetime] = mapped_column(DateTime)


class Activity(Base):
    """A logged interaction on a deal (call, meeting, email, note)."""

    __tablename__ = "activities"
    __table_args__ = (CheckConstraint(one_of("kind", ACTIVITY_KINDS), name="kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deal_id: Mapped[int] = mapped_column(ForeignKey("deals.id"), index=True)
    contact_id: Mapped[int | None] = mapped_column(ForeignKey("contacts.id"))
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"))
    kind: Mapped[str] = mapped_column(String(10))
    summary: Mapped[str] = mapped_column(Text)
    occurred_at: Mapped[datetime] = mapped_column(DateTime)


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (CheckConstraint(one_of("status", PROJECT_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Short upper-case key, the prefix of its task codes ("ATLAS" -> "ATLAS-12").
    key: Mapped[str] = mapped_column(String(12), unique=True, index=True)
    name: Mapped[str] = mapped_column(String(80))
    owner_id: Mapped[int] = mapped_column(ForeignKey("employees.id"))
    status: Mapped[str] = mapped_column(String(10), default="active")


class WorkTask(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        CheckConstraint(one_of("status", TASK_STATUSES), name="status"),
        CheckConstraint(one_of("priority", PRIORITIES), name="priority"),
        Index("ix_tasks_assignee_status", "assignee_id", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    title: Mapped[str] = mapped_column(String(160))
    assignee_id: Mapped[int | None] = mapped_column(ForeignKey("employees.id"))
    status: Mapped[str] = mapped_column(String(12), default="todo")
    priority: Mapped[str] = mapped_column(String(8), default="medium")
    due_date: Mapped[date | None] = mapped_column(Date)
    created_by: Mapped[int] = mapped_column(ForeignKey("employees.id"))
