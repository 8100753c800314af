"""Building blocks of the workplace task generator: a seed builder per task story, gold-call
helpers and the self-check that replays every task's gold calls in memory.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from app.sdk.taskgen import Draft as Draft  # re-exported: what the families return
from app.sdk.taskgen import Phrasing, SeedBuilder, name_pool, sentence_starting
from app.sdk.taskgen import call as shared_call
from envs.workplace import ENVIRONMENT
from envs.workplace.data import AS_OF
from envs.workplace.models import INTERNAL_DOMAIN

NOW = AS_OF
TUESDAY = NOW.date() + timedelta(days=1)
# The seed's table order (parents first; assistant_profile's row updates the base row).
SEED_TABLES = (
    "employees", "assistant_profile", "companies", "contacts", "deals", "deal_stage_history",
    "projects", "tasks", "events", "event_attendees", "messages", "mailbox_items",
)  # fmt: skip
NAMES = name_pool(33)
COMPANIES = (
    "Halvorsen Marine", "Quillfeather Press", "Tidewater Energy", "Brightloom Textiles",
    "Copperleaf Farms", "Northstar Clinics", "Vantage Freight", "Silverpine Studios",
)  # fmt: skip
PROJECT_WORDS = ("NOVA", "ORBIT", "PULSE", "RIDGE", "SPARK", "TIDE", "VAULT", "WAVE")


@dataclass
class Person:
    id: int
    first: str
    last: str
    email: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


class Story:
    """The rows one task seeds on top of the base data (its `SeedBuilder`, id block `index`)."""

    def __init__(
        self,
        index: int,
        rng: random.Random | None = None,
        names: list[tuple[str, str]] | None = None,
    ) -> None:
        self.index = index
        self.rng = rng or random.Random(f"workplace-{index}")
        self.b = SeedBuilder(index, SEED_TABLES, NOW)
        self.rows = self.b.rows
        # Names are drawn without repetition, so a name always means one person in a story.
        pool = NAMES if names is None else names
        self.names = self.rng.sample(pool, len(pool))

    def _add(self, table: str, **row: Any) -> int:
        return int(self.b.add(table, **row)["id"])

    # ---- people ----------------------------------------------------------------------------
    def person(self, dept: str = "Sales", active: bool = True) -> Person:
        first, last = self.names.pop()
        email = f"{first}.{last}{self.index}@{INTERNAL_DOMAIN}".lower()
        pid = self._add(
            "employees",
            email=email,
            first_name=first,
            last_name=last,
            department=dept,
            title="Account Executive" if dept == "Sales" else "Specialist",
            manager_id=None,
            active=active,
        )
        return Person(pid, first, last, email)

    def user(self, dept: str = "Sales") -> Person:
        p = self.person(dept)
        self.b.update("assistant_profile", 1, employee_id=p.id)
        return p

    # ---- CRM -------------------------------------------------------------------------------
    def company(self, n: int = 0) -> tuple[int, str, list[Person]]:
        """A customer with two contacts; returns (id, name, contacts)."""
        name = COMPANIES[(self.index + n) % len(COMPANIES)]
        domain = name.split()[0].lower() + ".com"
        cid = self._add("companies", name=name, industry="Services", domain=domain)
        contacts = []
        for title in ("Head of Procurement", "CFO"):
            first, last = self.names.pop()
            email = f"{first}.{last}@{domain}".lower()
            ct = self._add(
                "contacts",
                company_id=cid,
                first_name=first,
                last_name=last,
                email=email,
                phone=None,
                title=title,
            )
            contacts.append(Person(ct, first, last, email))
        return cid, name, contacts

    def deal(
        self,
        company_id: int,
        owner: Person,
        stage: str,
        amount: float | None,
        name: str = "Annual subscription",
    ) -> str:
        code = f"D-{7000 + 10 * self.index + self.b.count('deals')}"
        self._add(
            "deals",
            code=code,
            name=name,
            company_id=company_id,
            owner_id=owner.id,
            stage=stage,
            amount=amount,
            close_date=(NOW + timedelta(days=30)).date().isoformat(),
        )
        return code

    # ---- projects --------------------------------------------------------------------------
    def project(self, owner: Person, status: str = "active") -> str:
        key = f"{PROJECT_WORDS[self.index % len(PROJECT_WORDS)]}{self.index}"
        self._add(
            "projects", key=key, name=f"{key.title()} launch", owner_id=owner.id, status=status
        )
        return key

    def task(
        self,
        key: str,
        title: str,
        assignee: Person | None,
        status: str = "todo",
        priority: str = "medium",
        due_days: int = 7,
    ) -> str:
        pid = next(p["id"] for p in self.rows["projects"] if p["key"] == key)
        code = f"{key}-{sum(t['project_id'] == pid for t in self.rows['tasks']) + 1}"
        self._add(
            "tasks",
            code=code,
            project_id=pid,
            title=title,
            assignee_id=assignee.id if assignee else None,
            status=status,
            priority=priority,
            due_date=(NOW + timedelta(days=due_days)).date().isoformat(),
            created_by=self.rows["employees"][0]["id"],
        )
        return code

    # ---- calendar --------------------------------------------------------------------------
    def event(
        self,
        organizer: Person,
        title: str,
        start: datetime,
        minutes: int,
        attendees: list[Person],
        status: str = "confirmed",
    ) -> str:
        code = f"EV-S{self.index:03d}{self.b.count('events'):02d}"
        eid = self._add(
            "events",
            code=code,
            title=title,
            organizer_id=organizer.id,
            start_at=start.isoformat(),
            end_at=(start + timedelta(minutes=minutes)).isoformat(),
            location="Room Aurora",
            status=status,
        )
        for p in [organizer, *[a for a in attendees if a.id != organizer.id]]:
            response = "accepted" if p.id == organizer.id else "needs_action"
            self._add("event_attendees", event_id=eid, employee_id=p.id, response=response)
        return code

    # ---- mail ------------------------------------------------------------------------------
    def email(
        self,
        sender: str,
        to: list[Person],
        subject: str,
        body: str,
        hours_ago: float,
        *,
        read: bool = False,
        folder: str = "inbox",
    ) -> str:
        """A message from `sender` (an address) delivered to each of `to`'s inboxes."""
        mid = f"<s{self.index:03d}{self.b.count('messages'):02d}@{INTERNAL_DOMAIN}>"
        sent = NOW - timedelta(hours=hours_ago)
        msg = self._add(
            "messages",
            message_id=mid,
            sender=sender,
            to_addresses=",".join(sorted(p.email for p in to)),
            cc_addresses="",
            subject=subject,
            body=body,
            sent_at=sent.isoformat(),
            in_reply_to=None,
        )
        for p in to:
            self._add(
                "mailbox_items",
                employee_id=p.id,
                message_id=msg,
                folder=folder,
                is_read=read,
                labels="",
            )
        return mid

    def seed(self) -> dict[str, Any]:
        return self.b.seed()


# What a draw may reword (app/sdk/phrasing.py): the "Please ..." request; the requests carry
# no greeting and no consent sentence.
PHRASING = Phrasing(request=sentence_starting("Please"), keep_request=("go ahead", "confirm"))


# The shared gold-call builder, bound to this environment.
C = call = partial(shared_call, ENVIRONMENT)


def at(day_offset: int, hour: int, minute: int = 0) -> datetime:
    """A time on a day relative to today (0 = Monday 2026-03-16)."""
    return datetime.combine(NOW.date() + timedelta(days=day_offset), datetime.min.time()).replace(
        hour=hour, minute=minute
    )


def iso(value: datetime) -> str:
    return value.isoformat()
