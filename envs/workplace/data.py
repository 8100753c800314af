"""The deterministic base dataset: 150 employees, 60 customers, 300 deals, 12 projects, ~700
events and ~900 emails of Northwind Labs, as of the environment's default clock.

Built with Core bulk inserts and explicit ids 1..N (task seeds use ids >= 100000). Everything
random comes from the `rng` passed in, nothing from the wall clock.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from envs.workplace.models import (
    DEPARTMENTS,
    INTERNAL_DOMAIN,
    Activity,
    AssistantProfile,
    Company,
    Contact,
    Deal,
    DealStageChange,
    Employee,
    Event,
    EventAttendee,
    MailboxItem,
    Message,
    Project,
    WorkTask,
)

AS_OF = datetime(2026, 3, 16, 9, 0)
N_EMPLOYEES, N_DEALS, N_EVENTS, N_MESSAGES = 150, 300, 700, 900

FIRST = (
    "Olivia Liam Emma Noah Ava Elijah Sophia James Isabella Lucas Mia Mason Amelia Ethan Harper "
    "Logan Evelyn Aiden Abigail Caleb Ella Owen Scarlett Daniel Grace Henry Chloe Jack Zoe Levi"
).split()
LAST = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris"
).split()
TITLES = {
    "Sales": ("Account Executive", "Sales Manager", "Sales Development Rep"),
    "Engineering": ("Software Engineer", "Senior Engineer", "Engineering Manager"),
    "Marketing": ("Marketing Manager", "Content Strategist"),
    "Finance": ("Financial Analyst", "Controller"),
    "Support": ("Support Specialist", "Support Lead"),
    "Operations": ("Operations Analyst", "Office Manager"),
    "People": ("Recruiter", "HR Business Partner"),
}
CO_A = "Apex Blue Cedar Delta Ember Falcon Granite Harbor Iris Juniper Keystone Lumen".split()
CO_B = "Analytics Logistics Foods Health Robotics".split()
INDUSTRY = {"Analytics": "Software", "Logistics": "Transport", "Foods": "Retail",
            "Health": "Healthcare", "Robotics": "Manufacturing"}  # fmt: skip
PROJECTS = ("ATLAS BEACON COMET DYNAMO ECHO FORGE GLACIER HALO ION JADE KESTREL LYNX").split()
TASK_VERBS = ("Draft", "Review", "Update", "Test", "Document", "Plan", "Migrate", "Fix")
TASK_NOUNS = ("onboarding flow", "pricing page", "API limits", "release notes", "data export",
              "billing report", "search index", "audit checklist", "status dashboard")  # fmt: skip
EVENT_TITLES = ("Weekly sync", "1:1", "Design review", "Pipeline review", "Sprint planning",
                "Customer call", "Retro", "Budget check-in", "Interview")  # fmt: skip
ROOMS = ("Room Aurora", "Room Borealis", "Room Cirrus", "Video call")
SUBJECTS = ("Quarterly numbers", "Meeting notes", "Contract draft", "Invoice question",
            "Roadmap update", "Hiring plan", "Renewal terms", "Travel booking")  # fmt: skip


class _Rows:
    def __init__(self) -> None:
        self.by_model: dict[type, list[dict[str, Any]]] = {}

    def add(self, model: type, **row: Any) -> int:
        rows = self.by_model.setdefault(model, [])
        row.setdefault("id", len(rows) + 1)
        rows.append(row)
        return int(row["id"])


def _people(r: _Rows, rng: random.Random) -> dict[str, list[int]]:
    by_dept: dict[str, list[int]] = {d: [] for d in DEPARTMENTS}
    seen: set[str] = set()
    for n in range(N_EMPLOYEES):
        dept = DEPARTMENTS[0] if n % 4 == 0 else DEPARTMENTS[n % len(DEPARTMENTS)]
        first, last = rng.choice(FIRST), rng.choice(LAST)
        local = f"{first}.{last}".lower()
        suffix = 2
        while local in seen:
            local, suffix = f"{first}.{last}{suffix}".lower(), suffix + 1
        seen.add(local)
        head = by_dept[dept][0] if by_dept[dept] else None
        eid = r.add(
            Employee,
            email=f"{local}@{INTERNAL_DOMAIN}",
            first_name=first,
            last_name=last,
            department=dept,
            title=rng.choice(TITLES[dept]),
            manager_id=head,
            active=not (head and rng.random() < 0.06),
        )
        by_dept[dept].append(eid)
    r.add(AssistantProfile, employee_id=1)
    return by_dept


def _crm(r: _Rows, rng: random.Random, sales: list[int]) -> None:
    contacts_of: dict[int, list[int]] = {}
    for a in CO_A:
        for b in CO_B:
            cid = r.add(
                Company, name=f"{a} {b}", industry=INDUSTRY[b], domain=f"{a}{b}.com".lower()
            )
            contacts_of[cid] = []
            for k in range(3):
                first, last = rng.choice(FIRST), rng.choice(LAST)
                contacts_of[cid].append(
                    r.add(
                        Contact,
                        company_id=cid,
                        first_name=first,
                        last_name=last,
                        email=f"{first[0]}{last}{k}@{a}{b}.com".lower(),
                        phone=f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                        title=rng.choice(("CTO", "Head of Procurement", "Operations Lead", "CFO")),
                    )
                )
    stages = ("lead", "qualified", "proposal", "won", "lost")
    for n in range(N_DEALS):
        company = rng.randint(1, len(contacts_of))
        stage = rng.choices(stages, (25, 25, 20, 18, 12))[0]
        amount = (
            round(rng.randint(40, 2000) * 250.0, 2)
            if stage in ("proposal", "won") or (stage != "lead" and rng.random() < 0.5)
            else None
        )
        owner = rng.choice(sales)
        did = r.add(
            Deal,
            code=f"D-{1001 + n}",
            name=f"{rng.choice(CO_B)} rollout {n + 1}",
            company_id=company,
            owner_id=owner,
            stage=stage,
            amount=amount,
            close_date=(AS_OF + timedelta(days=rng.randint(-90, 120))).date(),
        )
        path = ["lead", "qualified", "proposal", "won"]
        reached = path[: path.index(stage) + 1] if stage != "lost" else path[: rng.randint(1, 3)]
        if stage == "lost":
            reached.append("lost")
        at = AS_OF - timedelta(days=rng.randint(40, 120))
        for a, b in zip(reached, reached[1:], strict=False):
            at += timedelta(days=rng.randint(1, 12), hours=rng.randint(0, 8))
            r.add(
                DealStageChange,
                deal_id=did,
                from_stage=a,
                to_stage=b,
                changed_by=owner,
                changed_at=at,
            )
        for _ in range(rng.randint(0, 3)):
            kind = rng.choice(("call", "meeting", "email", "note"))
            r.add(
                Activity,
                deal_id=did,
                contact_id=rng.choice(contacts_of[company]),
                employee_id=owner,
                kind=kind,
                summary=f"{kind.title()} about next steps",
                occurred_at=AS_OF - timedelta(days=rng.randint(1, 40)),
            )


def _projects(r: _Rows, rng: random.Random, everyone: list[int]) -> None:
    for n, key in enumerate(PROJECTS):
        status = "on_hold" if n == 10 else "closed" if n == 11 else "active"
        pid = r.add(
            Project,
            key=key,
            name=f"{key.title()} initiative",
            owner_id=rng.choice(everyone),
            status=status,
        )
        for k in range(1, 41):
            r.add(
                WorkTask,
                code=f"{key}-{k}",
                project_id=pid,
                title=f"{rng.choice(TASK_VERBS)} {rng.choice(TASK_NOUNS)}",
                assignee_id=rng.choice(everyone) if rng.random() < 0.9 else None,
                status=rng.choices(("todo", "in_progress", "done"), (4, 3, 3))[0],
                priority=rng.choice(("low", "medium", "medium", "high", "urgent")),
                due_date=(AS_OF + timedelta(days=rng.randint(-20, 60))).date(),
                created_by=rng.choice(everyone),
            )


def _calendar(r: _Rows, rng: random.Random, active: list[int]) -> None:
    for n in range(N_EVENTS):
        day = AS_OF.date() + timedelta(days=rng.randint(-14, 14))
        start = datetime.combine(day, datetime.min.time()) + timedelta(
            hours=rng.randint(9, 16), minutes=rng.choice((0, 30))
        )
        people = rng.sample(active, rng.randint(2, 5))
        eid = r.add(
            Event,
            code=f"EV-{n + 1:05d}",
            title=rng.choice(EVENT_TITLES),
            organizer_id=people[0],
            start_at=start,
            end_at=start + timedelta(minutes=rng.choice((30, 60))),
            location=rng.choice(ROOMS),
            status="cancelled" if rng.random() < 0.05 else "confirmed",
        )
        for k, p in enumerate(people):
            response = (
                "accepted"
                if k == 0
                else rng.choice(("accepted", "tentative", "declined", "needs_action"))
            )
            r.add(EventAttendee, event_id=eid, employee_id=p, response=response)


def _mail(r: _Rows, rng: random.Random, active: list[int]) -> None:
    emails = {row["id"]: row["email"] for row in r.by_model[Employee]}
    for n in range(N_MESSAGES):
        sender, *to = rng.sample(active, rng.randint(2, 4))
        sent = AS_OF - timedelta(minutes=rng.randint(30, 60 * 24 * 30))
        mid = r.add(
            Message,
            message_id=f"<base{n + 1:05d}@{INTERNAL_DOMAIN}>",
            sender=emails[sender],
            to_addresses=",".join(sorted(emails[t] for t in to)),
            cc_addresses="",
            subject=rng.choice(SUBJECTS),
            body="Hi,\n\nPlease see the latest on this.\n\nThanks",
            sent_at=sent,
            in_reply_to=None,
        )
        r.add(
            MailboxItem, employee_id=sender, message_id=mid, folder="sent", is_read=True, labels=""
        )
        for t in to:
            r.add(
                MailboxItem,
                employee_id=t,
                message_id=mid,
                folder="archive" if rng.random() < 0.3 else "inbox",
                is_read=rng.random() < 0.7,
                labels="",
            )


def build_base(db: Session, rng: random.Random) -> None:
    r = _Rows()
    by_dept = _people(r, rng)
    inactive = {row["id"] for row in r.by_model[Employee] if not row["active"]}
    everyone = [row["id"] for row in r.by_model[Employee]]
    active = [e for e in everyone if e not in inactive]
    _crm(r, rng, [e for e in by_dept["Sales"] if e not in inactive])
    _projects(r, rng, active)
    _calendar(r, rng, active)
    _mail(r, rng, active)
    for model, rows in r.by_model.items():  # insertion order: parents first
        db.execute(insert(model), rows)
    db.flush()
