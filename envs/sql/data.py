"""The deterministic base dataset of Acme Consulting: ~4,000 rows over every table.

Built with Core bulk inserts with explicit ids 1..N (stable across builds; task seeds use ids >=
100000). Everything random comes from the `rng` passed in, nothing from the wall clock.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import date, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from envs.sql.models import (
    Customer,
    Department,
    Employee,
    Invoice,
    Project,
    Salary,
    Timesheet,
)

# The data describes the company as of this Monday (the environment's default clock).
AS_OF = date(2026, 3, 16)
FIRST_WEEK = date(2025, 9, 1)  # timesheets cover the weeks from here to AS_OF
N_EMPLOYEES = 240

# code, name, location, budget, share of employees, base salary, titles (junior -> senior)
DEPARTMENTS = (
    ("ENG", "Engineering", "Berlin", 4_200_000, 30, 78_000,
     ("Software Engineer", "Senior Software Engineer", "Staff Engineer")),
    ("DATA", "Data Science", "Berlin", 2_100_000, 14, 82_000,
     ("Data Analyst", "Data Scientist", "Lead Data Scientist")),
    ("DES", "Design", "Lisbon", 900_000, 8, 64_000,
     ("Product Designer", "Senior Product Designer", "Design Lead")),
    ("DEL", "Delivery", "Amsterdam", 1_500_000, 12, 70_000,
     ("Project Coordinator", "Project Manager", "Delivery Director")),
    ("SALES", "Sales", "London", 1_300_000, 10, 60_000,
     ("Account Executive", "Senior Account Executive", "Sales Director")),
    ("FIN", "Finance", "Amsterdam", 700_000, 6, 66_000,
     ("Accountant", "Senior Accountant", "Finance Manager")),
    ("HR", "People", "Lisbon", 500_000, 5, 58_000,
     ("People Partner", "Senior People Partner", "Head of People")),
    ("OPS", "Operations", "Berlin", 600_000, 5, 55_000,
     ("IT Support Specialist", "Systems Administrator", "Head of Operations")),
)  # fmt: skip
EMP_STATUS = ("active", "on_leave", "terminated")
BILLING_DEPARTMENTS = (1, 2, 3, 4)  # ENG, DATA, DES, DEL run customer projects

FIRST_NAMES = (
    "Anna Ben Carla David Elif Farid Greta Hassan Ida Jonas Kemal Lara Milan Nadia Oskar Petra "
    "Rami Selin Tobias Ula Vera Willem Xenia Yusuf Zoe Aron Bea Cyril Dana Emil Fenna Goran Hilde "
    "Ivo Jana Kasper Lotte Mads Nora Otto Pia Ruben Sanne Timo Ute Viktor Wanda"
).split()
LAST_NAMES = (
    "Adler Bauer Claes Dekker Engel Falk Graf Hoffmann Iversen Jansen Kraus Lang Maas Nowak "
    "Olsen Peters Quast Richter Schulz Tamm Urban Vogt Weber Yilmaz Ziegler Berger Brandt Fuchs "
    "Hahn Kaiser Koch Lorenz Meyer Neumann Pohl Roth Sauer Simon Stein Winter"
).split()
COMPANIES = (
    ("Northwind Logistics", "Netherlands", "Logistics"),
    ("Bluefin Insurance", "Germany", "Insurance"),
    ("Kestrel Energy", "Norway", "Energy"), ("Larkspur Health", "Germany", "Healthcare"),
    ("Meridian Bank", "United Kingdom", "Banking"), ("Orchid Retail", "France", "Retail"),
    ("Pinecrest Foods", "Belgium", "Food"), ("Quarry Stone Media", "Ireland", "Media"),
    ("Redwood Telecom", "Spain", "Telecom"), ("Saffron Travel", "Portugal", "Travel"),
    ("Tidewater Shipping", "Denmark", "Logistics"), ("Umber Pharma", "Switzerland", "Healthcare"),
    ("Vantage Motors", "Germany", "Automotive"),
    ("Willow Education", "United Kingdom", "Education"),
    ("Yarrow Agritech", "Netherlands", "Agriculture"), ("Zephyr Airlines", "Austria", "Travel"),
    ("Alder Utilities", "Sweden", "Energy"), ("Birch Legal", "United Kingdom", "Legal"),
    ("Cobalt Mining", "Finland", "Mining"), ("Dune Hospitality", "Spain", "Hospitality"),
    ("Ember Games", "Poland", "Media"), ("Fjord Seafood", "Norway", "Food"),
    ("Granite Construction", "Germany", "Construction"),
    ("Harbor Freight Co", "Belgium", "Logistics"),
    ("Indigo Fashion", "Italy", "Retail"), ("Juniper Labs", "Switzerland", "Healthcare"),
    ("Kite Robotics", "Germany", "Manufacturing"), ("Lumen Solar", "Portugal", "Energy"),
    ("Maple Publishing", "Ireland", "Media"), ("Nimbus Cloud", "Netherlands", "Technology"),
)  # fmt: skip
PROJECT_KINDS = (
    "Data Platform", "Mobile App", "Customer Portal", "Analytics Dashboard", "Cloud Migration",
    "Pricing Engine", "Design System", "Forecasting Model", "API Modernisation", "Checkout Revamp",
)  # fmt: skip
INTERNAL_PROJECTS = (
    "Internal Tooling", "Hiring Pipeline", "Knowledge Base", "Security Audit", "Onboarding Academy",
)  # fmt: skip


def mondays(start: date, end: date) -> list[date]:
    """Every Monday from `start` (a Monday) up to but excluding `end`."""
    return [start + timedelta(weeks=n) for n in range((end - start).days // 7)]


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: dict[type, list[dict[str, Any]]] = defaultdict(list)

    def add(self, model: type, **row: Any) -> int:
        row = {"id": len(self.rows[model]) + 1, **row}
        self.rows[model].append(row)
        return int(row["id"])

    def departments(self) -> None:
        for code, name, location, budget, *_ in DEPARTMENTS:
            self.add(Department, code=code, name=name, location=location, budget=float(budget))

    def employees(self) -> None:
        rng = self.rng
        names = rng.sample([(f, ln) for f in FIRST_NAMES for ln in LAST_NAMES], N_EMPLOYEES)
        weights = [d[4] for d in DEPARTMENTS]
        heads: dict[int, int] = {}
        for n, (first, last) in enumerate(names):
            # The first employee of each department is its head; the rest are drawn by size.
            dept = n + 1 if n < len(DEPARTMENTS) else rng.choices(range(1, 9), weights)[0]
            level = 2 if n < len(DEPARTMENTS) else rng.choices((0, 1, 2), (6, 4, 1))[0]
            hire = AS_OF - timedelta(days=rng.randint(60, 3600))
            status = "active" if n < len(DEPARTMENTS) else rng.choices(EMP_STATUS, (85, 5, 10))[0]
            term = None
            if status == "terminated":
                term = hire + timedelta(days=rng.randint(30, (AS_OF - hire).days - 1))
            eid = self.add(
                Employee,
                employee_no=f"E{1001 + n}",
                first_name=first,
                last_name=last,
                email=f"{first}.{last}@acme-consulting.eu".lower(),
                department_id=dept,
                manager_id=heads.get(dept),
                title=DEPARTMENTS[dept - 1][6][level],
                hire_date=hire,
                termination_date=term,
                status=status,
            )
            heads.setdefault(dept, eid)
            self.salary_history(eid, dept, level, hire, term)

    def salary_history(self, eid: int, dept: int, level: int, hire: date, end: date | None) -> None:
        amount = DEPARTMENTS[dept - 1][5] * (1 + 0.3 * level) * self.rng.uniform(0.9, 1.1)
        self.add(
            Salary, employee_id=eid, effective_date=hire, amount=round(amount, -2), reason="hire"
        )
        when = date(hire.year + 1, self.rng.choice((1, 4, 7)), 1)
        last = min(end or AS_OF, AS_OF)
        while when <= last:
            reason = self.rng.choices(("merit", "promotion", "adjustment"), (7, 2, 1))[0]
            amount *= {"merit": 1.03, "promotion": 1.12, "adjustment": 1.015}[reason]
            self.add(
                Salary,
                employee_id=eid,
                effective_date=when,
                amount=round(amount, -2),
                reason=reason,
            )
            when = date(when.year + 1, when.month, 1)

    def customers(self) -> None:
        for n, (name, country, industry) in enumerate(COMPANIES):
            status = "inactive" if n % 9 == 8 else "active"
            self.add(
                Customer,
                code=f"C-{101 + n}",
                name=name,
                country=country,
                industry=industry,
                status=status,
            )

    def projects(self) -> None:
        rng = self.rng
        for n in range(48):
            customer = n % len(COMPANIES) + 1
            kind = PROJECT_KINDS[(n * 7) % len(PROJECT_KINDS)]
            start = FIRST_WEEK - timedelta(weeks=rng.randint(0, 30))
            status = rng.choices(("active", "completed", "on_hold", "planned"), (6, 2, 1, 1))[0]
            end = None
            if status == "completed":
                end = date(2026, 1, 30) - timedelta(weeks=rng.randint(0, 12))
            if status == "planned":
                start = date(2026, 4, 6) + timedelta(weeks=rng.randint(0, 8))
            rate = rng.choice((95, 110, 120, 135, 150, 165, 180))
            self.add(
                Project,
                code=f"PRJ-{201 + n}",
                name=f"{COMPANIES[customer - 1][0]} {kind}",
                customer_id=customer,
                department_id=BILLING_DEPARTMENTS[n % 4],
                status=status,
                start_date=start,
                end_date=end,
                budget=float(rng.randint(8, 60) * 10_000),
                hourly_rate=float(rate),
            )
        for n, name in enumerate(INTERNAL_PROJECTS):
            self.add(
                Project,
                code=f"INT-{11 + n}",
                name=name,
                customer_id=None,
                department_id=(1, 6, 7, 1, 7)[n],
                status="active",
                start_date=date(2025, 1, 6),
                end_date=None,
                budget=float(50_000),
                hourly_rate=0.0,
            )

    def timesheets(self) -> None:
        rng = self.rng
        people = defaultdict(list)
        for e in self.rows[Employee]:
            if e["status"] != "terminated" and e["hire_date"] < FIRST_WEEK:
                people[e["department_id"]].append(e["id"])
        weeks = mondays(FIRST_WEEK, AS_OF)
        for p in self.rows[Project]:
            if p["status"] == "planned":
                continue
            team = rng.sample(people[p["department_id"]], rng.randint(2, 4))
            last = p["end_date"] or AS_OF
            for eid in team:
                for week in weeks:
                    if week < p["start_date"] or week >= last or rng.random() < 0.35:
                        continue
                    hours = float(rng.choice((4, 8, 12, 16, 20, 24, 32, 40)))
                    status = "approved"
                    if week >= AS_OF - timedelta(weeks=2):
                        status = rng.choices(("submitted", "approved"), (3, 1))[0]
                    elif rng.random() < 0.03:
                        status = "rejected"
                    self.add(
                        Timesheet,
                        employee_id=eid,
                        project_id=p["id"],
                        week_start=week,
                        hours=hours,
                        billable=p["customer_id"] is not None,
                        status=status,
                        invoice_id=None,
                    )

    def invoices(self) -> None:
        """One invoice per customer project and month before March, for its approved hours."""
        by_key: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
        for t in self.rows[Timesheet]:
            started = (t["week_start"].year, t["week_start"].month)
            if t["billable"] and t["status"] == "approved" and started < (2026, 3):
                by_key[(t["project_id"], *started)].append(t)
        projects = {p["id"]: p for p in self.rows[Project]}
        for (pid, year, month), sheets in sorted(by_key.items(), key=lambda kv: kv[0][1:]):
            project = projects[pid]
            issued = date(year + month // 12, month % 12 + 1, 5)
            status = "paid" if (year, month) < (2026, 1) else ("sent", "draft")[month == 2]
            if status == "paid" and self.rng.random() < 0.1:
                status = "sent"  # a few overdue ones
            paid = issued + timedelta(days=self.rng.randint(10, 40)) if status == "paid" else None
            amount = round(sum(t["hours"] for t in sheets) * project["hourly_rate"], 2)
            n = len(self.rows[Invoice]) + 1
            iid = self.add(
                Invoice,
                number=f"INV-{issued.year}-{n:04d}",
                customer_id=project["customer_id"],
                project_id=pid,
                issue_date=issued,
                due_date=issued + timedelta(days=30),
                amount=amount,
                status=status,
                paid_date=paid,
            )
            for t in sheets:
                t["status"], t["invoice_id"] = "invoiced", iid


ORDER = (Department, Employee, Salary, Customer, Project, Invoice, Timesheet)


def build_base(db: Session, rng: random.Random) -> None:
    b = _Builder(rng)
    b.departments()
    b.employees()
    b.customers()
    b.projects()
    b.timesheets()
    b.invoices()
    for model in ORDER:
        if b.rows[model]:
            db.execute(insert(model), b.rows[model])
