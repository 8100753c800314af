"""A small consulting company's operational database: people, pay, projects, time and billing.

Money is `Numeric(12, 2)` read back as float; dates are ISO `Date` columns (naive). Every
constraint is named. A few business rules live in the database itself as triggers, so they hold
whatever SQL the agent writes (the SQL console is the only way in).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import (
    DDL,
    Boolean,
    CheckConstraint,
    Date,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    UniqueConstraint,
    event,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.sdk.models import DeclarativeBase, Money, make_metadata, one_of

Hours = Numeric(5, 2, asdecimal=False)

EMPLOYEE_STATUSES = ("active", "on_leave", "terminated")
SALARY_REASONS = ("hire", "merit", "promotion", "adjustment")
PROJECT_STATUSES = ("planned", "active", "on_hold", "completed", "cancelled")
TIMESHEET_STATUSES = ("submitted", "approved", "rejected", "invoiced")
INVOICE_STATUSES = ("draft", "sent", "paid", "void")


class Base(DeclarativeBase):
    metadata = make_metadata()


def _cost_center(context: Any) -> str:
    return "CC-" + context.get_current_parameters()["code"]


class Department(Base):
    __tablename__ = "departments"
    __table_args__ = (CheckConstraint("budget >= 0", name="budget_nonnegative"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(8), unique=True)
    name: Mapped[str] = mapped_column(String(60), unique=True)
    location: Mapped[str] = mapped_column(String(40))
    budget: Mapped[float] = mapped_column(Money)
    # Added by the sql branch's second migration, backfilled from the code (same rule).
    cost_center: Mapped[str] = mapped_column(String(12), default=_cost_center)


class Employee(Base):
    __tablename__ = "employees"
    __table_args__ = (
        CheckConstraint(one_of("status", EMPLOYEE_STATUSES), name="status"),
        # A termination date exactly when terminated, never before the hire date.
        CheckConstraint(
            "(status = 'terminated') = (termination_date IS NOT NULL)", name="termination_date"
        ),
        CheckConstraint(
            "termination_date IS NULL OR termination_date >= hire_date", name="dates_ordered"
        ),
        CheckConstraint("manager_id IS NULL OR manager_id <> id", name="not_own_manager"),
        Index("ix_employees_last_first", "last_name", "first_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employee_no: Mapped[str] = mapped_column(String(8), unique=True)
    first_name: Mapped[str] = mapped_column(String(40))
    last_name: Mapped[str] = mapped_column(String(40))
    email: Mapped[str] = mapped_column(String(120), unique=True)
    department_id: Mapped[int] = mapped_column(ForeignKey("departments.id"), index=True)
    manager_id: Mapped[int | None] = mapped_column(ForeignKey("employees.id"), index=True)
    title: Mapped[str] = mapped_column(String(60))
    hire_date: Mapped[date] = mapped_column(Date)
    termination_date: Mapped[date | None] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(12), default="active")


class Salary(Base):
    """Salary history: the row with the latest effective_date <= today is the current salary."""

    __tablename__ = "salaries"
    __table_args__ = (
        UniqueConstraint("employee_id", "effective_date", name="uq_salaries_employee_date"),
        CheckConstraint("amount > 0", name="amount_positive"),
        CheckConstraint(one_of("reason", SALARY_REASONS), name="reason"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    effective_date: Mapped[date] = mapped_column(Date)
    amount: Mapped[float] = mapped_column(Money)  # annual, USD
    reason: Mapped[str] = mapped_column(String(12))


class Customer(Base):
    __tablename__ = "customers"
    __table_args__ = (CheckConstraint(one_of("status", ("active", "inactive")), name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(10), unique=True)
    name: Mapped[str] = mapped_column(String(80), unique=True)
    country: Mapped[str] = mapped_column(String(40))
    industry: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(10), default="active")


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (
        CheckConstraint(one_of("status", PROJECT_STATUSES), name="status"),
        CheckConstraint("end_date IS NULL OR end_date >= start_date", name="dates_ordered"),
        CheckConstraint("budget >= 0 AND hourly_rate >= 0", name="money_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(12), unique=True)
    name: Mapped[str] = mapped_column(String(80))
    # NULL for internal projects (not billable to anyone).
    customer_id: Mapped[int | None] = mapped_column(ForeignKey("customers.id"), index=True)
    department_id: Mapped[int] = mapped_column(ForeignKey("departments.id"), index=True)
    status: Mapped[str] = mapped_column(String(12))
    start_date: Mapped[date] = mapped_column(Date)
    end_date: Mapped[date | None] = mapped_column(Date)
    budget: Mapped[float] = mapped_column(Money)
    hourly_rate: Mapped[float] = mapped_column(Money)


class Invoice(Base):
    __tablename__ = "invoices"
    __table_args__ = (
        CheckConstraint(one_of("status", INVOICE_STATUSES), name="status"),
        CheckConstraint("(status = 'paid') = (paid_date IS NOT NULL)", name="paid_date"),
        CheckConstraint("due_date >= issue_date", name="dates_ordered"),
        CheckConstraint("amount >= 0", name="amount_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    number: Mapped[str] = mapped_column(String(16), unique=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"), index=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    issue_date: Mapped[date] = mapped_column(Date)
    due_date: Mapped[date] = mapped_column(Date)
    amount: Mapped[float] = mapped_column(Money)
    status: Mapped[str] = mapped_column(String(8))
    paid_date: Mapped[date | None] = mapped_column(Date)


class Timesheet(Base):
    """Hours one employee booked on one project in one week (week_start is a Monday)."""

    __tablename__ = "timesheets"
    __table_args__ = (
        UniqueConstraint("employee_id", "project_id", "week_start", name="uq_timesheets_week"),
        CheckConstraint("hours > 0 AND hours <= 60", name="hours_range"),
        CheckConstraint(one_of("status", TIMESHEET_STATUSES), name="status"),
        CheckConstraint("(status = 'invoiced') = (invoice_id IS NOT NULL)", name="invoice_link"),
        Index("ix_timesheets_project_week", "project_id", "week_start"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    week_start: Mapped[date] = mapped_column(Date)
    hours: Mapped[float] = mapped_column(Hours)
    billable: Mapped[bool] = mapped_column(Boolean, default=True)
    status: Mapped[str] = mapped_column(String(10), default="submitted")
    invoice_id: Mapped[int | None] = mapped_column(ForeignKey("invoices.id"), index=True)


class TimesheetArchive(Base):
    """Timesheets moved out of the live table (a copy of the row plus the archiving date)."""

    __tablename__ = "timesheet_archive"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employee_id: Mapped[int] = mapped_column(ForeignKey("employees.id"), index=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    week_start: Mapped[date] = mapped_column(Date)
    hours: Mapped[float] = mapped_column(Hours)
    billable: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(10))
    archived_on: Mapped[date] = mapped_column(Date)


# Rules enforced by the database itself, whatever statement the agent runs. Each message says
# what to do instead. (RAISE takes a literal message; SQLite reports it as a constraint error.)
# A rule with an exception says so in its WHEN clause; 'now' is the session's frozen clock.
TRIGGERS: dict[str, tuple[str, str]] = {
    "salaries_append_only_update": (
        "BEFORE UPDATE ON salaries WHEN OLD.effective_date <= date('now')",
        "salary history is append-only: add a new salaries row with a later effective_date "
        "instead of changing one in effect (only a row not yet in effect may be corrected)",
    ),
    "salaries_append_only_delete": (
        "BEFORE DELETE ON salaries WHEN OLD.effective_date <= date('now')",
        "salary history is append-only: salary rows in effect are never deleted",
    ),
    "employees_never_deleted": (
        "BEFORE DELETE ON employees WHEN OLD.hire_date <= date('now') "
        "OR EXISTS (SELECT 1 FROM timesheets WHERE employee_id = OLD.id)",
        "employees are never deleted (only a hire who has not started and has no timesheets): "
        "set status = 'terminated' and a termination_date instead",
    ),
    "invoices_never_deleted": (
        "BEFORE DELETE ON invoices WHEN OLD.status <> 'draft' "
        "OR EXISTS (SELECT 1 FROM timesheets WHERE invoice_id = OLD.id)",
        "invoices are never deleted (only a draft that bills no timesheets): set a draft or "
        "sent invoice's status to 'void' instead",
    ),
    "paid_invoices_locked": (
        "BEFORE UPDATE ON invoices WHEN OLD.status = 'paid'",
        "a paid invoice is locked: it cannot be changed",
    ),
    "paid_timesheets_locked_update": (
        "BEFORE UPDATE ON timesheets WHEN OLD.invoice_id IN "
        "(SELECT id FROM invoices WHERE status = 'paid')",
        "timesheets billed on a paid invoice are locked: they cannot be changed",
    ),
    "paid_timesheets_locked_delete": (
        "BEFORE DELETE ON timesheets WHEN OLD.status = 'invoiced'",
        "invoiced timesheets cannot be deleted or archived",
    ),
}
# The company rule (decline_request's reason code, envs/sql/policy.py) each trigger enforces:
# a statement a rule refuses fails with that code, so one rule has one code everywhere.
RULE_CODES: dict[str, str] = {
    "salaries_append_only_update": "salary_rewrite_forbidden",
    "salaries_append_only_delete": "salary_rewrite_forbidden",
    "employees_never_deleted": "cannot_delete_employee",
    "invoices_never_deleted": "cannot_delete_invoice",
    "paid_invoices_locked": "invoice_already_paid",
    "paid_timesheets_locked_update": "invoice_already_paid",
    "paid_timesheets_locked_delete": "cannot_archive_invoiced",
}


def rule_code(error_text: str) -> str | None:
    """The rule code of a trigger's refusal (its message is in the error), else None."""
    for name, (_when, message) in TRIGGERS.items():
        if message in error_text:
            return RULE_CODES[name]
    return None


def _trigger_ddl(name: str, when: str, message: str) -> DDL:
    literal = message.replace("'", "''")
    return DDL(f"CREATE TRIGGER {name} {when} BEGIN SELECT RAISE(ABORT, '{literal}'); END")


for _name, (_when, _message) in TRIGGERS.items():
    _table = Base.metadata.tables[_when.split(" ON ")[1].split()[0]]
    event.listen(_table, "after_create", _trigger_ddl(_name, _when, _message))
