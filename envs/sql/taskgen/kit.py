"""Building blocks of the sql task generator: a seed builder per task story, a view of the base
data, gold-call helpers and the self-check that replays every task's gold calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from app.sdk.taskgen import Draft as Draft  # re-exported: what the families return
from app.sdk.taskgen import Phrasing, SeedBuilder, name_grid, sentence_starting
from envs.sql import ENVIRONMENT

NOW = datetime(2026, 3, 16, 9, 0)
TODAY = NOW.date()
# The seed's table order (parents first).
SEED_TABLES = ("customers", "employees", "salaries", "projects", "invoices", "timesheets")
DEPT_NAMES = {
    "ENG": "Engineering", "DATA": "Data Science", "DES": "Design", "DEL": "Delivery",
    "SALES": "Sales", "FIN": "Finance", "HR": "People", "OPS": "Operations",
}  # fmt: skip
DEPT_IDS = {code: n for n, code in enumerate(DEPT_NAMES, start=1)}
# Names absent from the base data, so a task's people are never confused with base staff.
# Enough of both that no full name recurs in more than a few tasks of a thousand (a policy must
# look people up, not remember them).
FIRSTS = (
    "Amelie Bruno Chiara Dario Eva Felipe Gaia Henrik Irene Joaquin Katya Luca Marta Nikolai Olga "
    "Pablo Rosa Stefan Tereza Umberto Valeria Wiktor Yasmin Zeno Alba Bastian Cosima Dimitri "
    "Agnes Bruna Clemens Delia Edgar Flavia Gianni Helga Igor Jolanda Karim Leonie Matteo Noemi "
    "Orlando Paulina Quentin Rebeka Sergio Teodora Ulrich Vesna Walter Ximena Yannick Zora Anouk "
    "Blaz Corinna Dusan Esther Fabio"
).split()
LASTS = (
    "Acosta Bianchi Castillo Dumont Esposito Fontaine Gallo Horvat Ivanova Jovanovic Kowalczyk "
    "Lindgren Moreau Novakova Orsini Pereira Rinaldi Sandoval Toivonen Urquhart Varga Wojcik "
    "Zamora Abreu Barbieri Cerny Delgado Ekman Ferrante Guerra Halloran Illes Jaramillo Kovac "
    "Lombardi Marek Nilsen Oliveira Pavlova Quiroga Rossetti Salazar Tomasi Ulloa Vidal Wendt "
    "Zeller"
).split()
# Customers a story adds (never a base customer's name): "<Last> <kind>".
CUSTOMER_KINDS = (
    "Logistics", "Analytics", "Foods", "Pharma", "Mobility", "Textiles", "Robotics", "Media",
    "Freight", "Optics", "Ceramics", "Outdoor", "Telecom", "Insurance", "Retail", "Solar",
)  # fmt: skip


BASE_CUSTOMERS = 30  # customers 1..30 of the base data (envs/sql/data.py COMPANIES)
# Months a billing story may be about: (first day, first day of the next month).
MONTHS = tuple(
    (date(2025 + (m > 12), (m - 1) % 12 + 1, 1), date(2025 + (m >= 12), m % 12 + 1, 1))
    for m in range(4, 15)
)  # April 2025 ... February 2026
MONTH_NAMES = dict(
    enumerate(
        "January February March April May June July August September October November "
        "December".split(),
        start=1,
    )
)


# Job titles a story gives (a level and a role of the department): many, so that a title in a
# gold statement is no recurring identifier.
ROLES = {
    "ENG": ("Backend Engineer", "Frontend Engineer", "Platform Engineer", "Test Engineer"),
    "DATA": ("Data Scientist", "Data Engineer", "Machine Learning Engineer", "Data Analyst"),
    "DES": ("Product Designer", "Interaction Designer", "Visual Designer", "Design Researcher"),
    "DEL": ("Project Manager", "Delivery Manager", "Scrum Master", "Engagement Manager"),
    "SALES": ("Account Manager", "Account Executive", "Sales Engineer", "Partner Manager"),
    "FIN": (
        "Financial Accountant",
        "Financial Controller",
        "Payroll Specialist",
        "Billing Analyst",
    ),
    "HR": ("People Partner", "Talent Recruiter", "Learning Specialist", "Benefits Advisor"),
    "OPS": (
        "Office Manager",
        "Support Specialist",
        "Facilities Coordinator",
        "Procurement Officer",
    ),
}
LEVELS = ("Junior", "Senior", "Lead", "Principal", "Associate", "Staff")


def job_title(story: Story, dept: str) -> str:
    """A title for someone joining `dept`: a level and one of the department's roles."""
    return f"{story.rng.choice(LEVELS)} {story.rng.choice(ROLES[dept])}"


def effective_day(story: Story) -> str:
    """A date a change takes effect: a day after today, within the next four months."""
    return story.day(date(2026, 3, 17), date(2026, 7, 31)).isoformat()


def month_label(first: date) -> str:
    return f"{MONTH_NAMES[first.month]} {first.year}"


def mondays_of(first: date, end: date) -> list[date]:
    """The Mondays d with first <= d < end (weeks that start in the period)."""
    d = first + timedelta(days=(7 - first.weekday()) % 7)
    out = []
    while d < end:
        out.append(d)
        d += timedelta(days=7)
    return out


def money(x: float) -> str:
    """An amount as a colleague writes it: 84,500.00."""
    return f"{x:,.2f}"


def monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


@dataclass
class Person:
    id: int
    no: str
    first: str
    last: str
    salary: float | None = None

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


@dataclass
class Proj:
    id: int
    code: str
    name: str
    rate: float
    customer_id: int | None


class Story:
    """The rows one task seeds on top of the base data (its `SeedBuilder`, id block `index`)."""

    def __init__(self, index: int, rng: random.Random, names: list[tuple[str, str]]) -> None:
        self.index, self.rng, self.names = index, rng, names
        self.b = SeedBuilder(index, SEED_TABLES, NOW)
        self.rows = self.b.rows

    def _add(self, table: str, **row: Any) -> int:
        return int(self.b.add(table, **row)["id"])

    def employee_no(self) -> str:
        """A new employee number from the story's world (base staff have 4 digits: E1001...)."""
        return f"E{self.b.code(6)}"

    def invoice_no(self) -> str:
        """A new invoice number from the story's world (base invoices: INV-2026-0001...)."""
        return f"INV-2026-{self.b.code(5)}"

    def day(self, first: date, last: date) -> date:
        """A day drawn from the story between `first` and `last` (inclusive)."""
        return first + timedelta(days=self.rng.randint(0, (last - first).days))

    def customer(self) -> tuple[int, str]:
        """A new customer (id, name) with a name no base customer has."""
        taken = {r["name"] for r in self.rows["customers"]}
        while True:
            name = f"{self.rng.choice(LASTS)} {self.rng.choice(CUSTOMER_KINDS)}"
            if name not in taken:
                break
        cid = self._add(
            "customers",
            code=f"C-{self.b.code(6)}",
            name=name,
            country=self.rng.choice(("Germany", "Italy", "Spain", "Poland", "Sweden")),
            industry="Services",
            status="active",
        )
        return cid, name

    def person(
        self,
        dept: str = "ENG",
        *,
        manager_id: int | None = None,
        status: str = "active",
        title: str = "Software Engineer",
        salary: float | None = 70_000.0,
        email: str | None = None,
        hired: date = date(2022, 5, 2),
        name: tuple[str, str] | None = None,
        merit: bool = True,
    ) -> Person:
        """A new employee (and, with a salary, a hire row and a current merit row); `name`
        gives a namesake of someone else (another employee number and email)."""
        first, last = name or self.names.pop()
        no = self.employee_no()
        if name is not None and email is None:
            email = f"{first}.{last}.{no[1:]}@acme-consulting.eu".lower()
        pid = self._add(
            "employees",
            employee_no=no,
            first_name=first,
            last_name=last,
            email=email or f"{first}.{last}@acme-consulting.eu".lower(),
            department_id=DEPT_IDS[dept],
            manager_id=manager_id if manager_id else DEPT_IDS[dept],
            title=title,
            hire_date=hired.isoformat(),
            termination_date=None,
            status=status,
        )
        p = Person(pid, no, first, last, salary)
        if salary is not None and (not merit or hired >= date(2025, 7, 1)):
            self._add(
                "salaries",
                employee_id=pid,
                effective_date=hired.isoformat(),
                amount=salary,
                reason="hire",
            )
        elif salary is not None:
            first_pay = round(salary / 1.04, -2)
            self._add(
                "salaries",
                employee_id=pid,
                effective_date=hired.isoformat(),
                amount=first_pay,
                reason="hire",
            )
            self._add(
                "salaries",
                employee_id=pid,
                effective_date="2025-07-01",
                amount=salary,
                reason="merit",
            )
        return p

    def project(
        self,
        *,
        customer_id: int | None = None,
        dept: str = "ENG",
        rate: float = 120.0,
        kind: str = "Data Platform",
        status: str = "active",
    ) -> Proj:
        if customer_id is None:  # a base customer drawn by the story
            customer_id = self.rng.randint(1, BASE_CUSTOMERS)
        code = f"PRJ-{self.b.code(5)}"
        name = f"{kind} {code[-5:]}"
        pid = self._add(
            "projects",
            code=code,
            name=name,
            customer_id=customer_id,
            department_id=DEPT_IDS[dept],
            status=status,
            start_date="2025-09-01",
            end_date=None,
            budget=150_000.0,
            hourly_rate=rate,
        )
        return Proj(pid, code, name, rate, customer_id)

    def sheet(
        self,
        p: Person,
        proj: Proj,
        week: date,
        hours: float,
        status: str = "approved",
        *,
        billable: bool = True,
        invoice_id: int | None = None,
    ) -> int:
        assert week.weekday() == 0
        return self._add(
            "timesheets",
            employee_id=p.id,
            project_id=proj.id,
            week_start=week.isoformat(),
            hours=hours,
            billable=billable,
            status=status,
            invoice_id=invoice_id,
        )

    def invoice(
        self, proj: Proj, amount: float, status: str = "sent", issued: date = date(2026, 2, 5)
    ) -> tuple[int, str]:
        number = self.invoice_no()
        paid_on = min(issued + timedelta(days=20), TODAY - timedelta(days=3))
        paid = paid_on.isoformat() if status == "paid" else None
        iid = self._add(
            "invoices",
            number=number,
            customer_id=proj.customer_id,
            project_id=proj.id,
            issue_date=issued.isoformat(),
            due_date=(issued + timedelta(days=30)).isoformat(),
            amount=amount,
            status=status,
            paid_date=paid,
        )
        return iid, number

    def seed(self) -> dict[str, Any]:
        return self.b.seed()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A gold call with every argument the strict schema lists."""
    tool = ENVIRONMENT.tool_named(name)
    assert tool is not None, name
    tool.args_model.model_validate(arguments)
    return {"name": name, "arguments": arguments}


def sql(statement: str) -> dict[str, Any]:
    return call("run_sql", sql=" ".join(statement.split()))


def describe(table: str) -> dict[str, Any]:
    return call("describe_table", table=table)


LIST = {"name": "list_tables", "arguments": {}}

Results = list[dict[str, Any]]  # the gold calls' outputs, in order


@dataclass
class Ctx:
    """What a family function gets: its story (seed builder) and its variant k."""

    s: Story
    k: int


def rows_of(output: dict[str, Any]) -> list[list[Any]]:
    """The rows of a run_sql call's output."""
    return output["rows"]


def names_pool() -> list[tuple[str, str]]:
    return name_grid(FIRSTS, LASTS, shuffle="sql-names")


# What a draw may reword (app/sdk/phrasing.py): the "Please ..." request; the requests carry
# no greeting and no consent sentence.
PHRASING = Phrasing(request=sentence_starting("Please"), keep_request=("go ahead", "confirm"))


@dataclass
class SqlDraft(Draft):
    """A Draft whose refusal names its records itself: run_sql's one argument is a statement,
    in which the framework finds no record key, so a family lists the keys of the records it
    refuses (employee_no, invoice number), first the `forbidden` call's."""

    refused: tuple[str, ...] = ()


def name_refused(task: dict[str, Any], refused: tuple[str, ...]) -> None:
    """Make the gold's decline name `refused` (one record: its subject; several: each, as a
    list) and the row expect exactly that (`expected_decline_subject` / `_records`)."""
    if not refused or "expected_decline" not in task:
        return
    decline = task["ground_truth"][-1]
    assert decline["name"] == "decline_request", task["task_id"]
    decline["arguments"]["subject"] = list(refused) if len(refused) > 1 else refused[0]
    task.pop("expected_decline_subject", None)
    task.pop("expected_decline_records", None)
    if len(refused) > 1:
        task["expected_decline_records"] = list(refused)
    else:
        task["expected_decline_subject"] = [refused[0]]
