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
SEED_TABLES = ("employees", "salaries", "projects", "invoices", "timesheets")
DEPT_NAMES = {
    "ENG": "Engineering", "DATA": "Data Science", "DES": "Design", "DEL": "Delivery",
    "SALES": "Sales", "FIN": "Finance", "HR": "People", "OPS": "Operations",
}  # fmt: skip
DEPT_IDS = {code: n for n, code in enumerate(DEPT_NAMES, start=1)}
# Names absent from the base data, so a task's people are never confused with base staff.
FIRSTS = (
    "Amelie Bruno Chiara Dario Eva Felipe Gaia Henrik Irene Joaquin Katya Luca Marta Nikolai Olga "
    "Pablo Rosa Stefan Tereza Umberto Valeria Wiktor Yasmin Zeno Alba Bastian Cosima Dimitri"
).split()
LASTS = (
    "Acosta Bianchi Castillo Dumont Esposito Fontaine Gallo Horvat Ivanova Jovanovic Kowalczyk "
    "Lindgren Moreau Novakova Orsini Pereira Rinaldi Sandoval Toivonen Urquhart Varga Wojcik Zamora"
).split()


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
    ) -> Person:
        first, last = self.names.pop()
        n = self.b.count("employees")
        no = f"E{90000 + self.index * 10 + n}"
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
        if salary is not None:
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
        customer_id: int | None = 3,
        dept: str = "ENG",
        rate: float = 120.0,
        kind: str = "Data Platform",
        status: str = "active",
    ) -> Proj:
        n = self.b.count("projects")
        code = f"PRJ-{9000 + self.index * 10 + n}"
        name = f"{kind} {code[-4:]}"
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
        n = self.b.count("invoices")
        number = f"INV-2026-{9000 + self.index * 10 + n}"
        paid = (issued + timedelta(days=20)).isoformat() if status == "paid" else None
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
