"""Building blocks of the workplace task generator: a seed builder per task story, gold-call
helpers and the self-check that replays every task's gold calls in memory.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from app.sdk.taskgen import PEOPLE, Phrasing, SeedBuilder, name_grid, sentence_starting
from app.sdk.taskgen import Draft as Draft  # re-exported: what the families return
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
# Every pairing of the SDK's first and last names (3,721): a name recurs in few tasks, and
# none is a base employee's (the base draws from other lists, envs/workplace/data.py).
NAMES = name_grid([f for f, _ in PEOPLE], [last for _, last in PEOPLE], shuffle="workplace")
# Customer names: every pairing (none is a base company's: those end in CO_B's words).
CO_HEAD = (
    "Halvorsen", "Quillfeather", "Tidewater", "Brightloom", "Copperleaf", "Northstar",
    "Vantage", "Silverpine", "Marlowe", "Oakhurst", "Bellwether", "Redfern", "Stonebridge",
    "Windrose", "Ashcombe", "Greyhaven", "Larkspur", "Moorfield", "Pemberton", "Rosedale",
    "Thornbury", "Wexford", "Calloway", "Everett", "Kingsley", "Lockhart", "Mayfair", "Nettleton",
)  # fmt: skip
CO_TAIL = (
    "Marine", "Press", "Energy", "Textiles", "Farms", "Clinics", "Freight", "Studios",
    "Brewing", "Optics", "Dental", "Aviation", "Furniture", "Mills", "Labs", "Partners",
)  # fmt: skip
PROJECT_WORDS = (
    "NOVA", "ORBIT", "PULSE", "RIDGE", "SPARK", "TIDE", "VAULT", "WAVE", "CREST", "DELTA",
    "EMBER", "FJORD", "GROVE", "HAVEN", "LUMEN", "MESA", "NIMBUS", "PRISM", "QUARTZ", "SUMMIT",
)  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Names a story may draw (namesakes reuse one): more than any family needs.
STORY_NAMES = 24


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
        # Names are drawn without repetition, so a name means one person in a story unless a
        # family adds a namesake on purpose (`person(name=...)`, told apart by department).
        pool = NAMES if names is None else names
        self.names = self.rng.sample(pool, min(STORY_NAMES, len(pool)))
        self._companies: set[str] = set()
        self._task_numbers: dict[str, int] = {}
        self.shipped_outcome: bool | None = None

    def _add(self, table: str, **row: Any) -> int:
        return int(self.b.add(table, **row)["id"])

    # ---- people ----------------------------------------------------------------------------
    def person(
        self, dept: str = "Sales", active: bool = True, name: tuple[str, str] | None = None
    ) -> Person:
        """A colleague (a new name, or `name`: a namesake), with an address of the world's own."""
        first, last = name or self.names.pop()
        email = f"{first}.{last}{self.b.code(5)}@{INTERNAL_DOMAIN}".lower()
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
        """The employee the assistant acts for (the profile row points at them). A distractor's
        story (another index, inside a world: app/taskgen/draw.py) acts for nobody: its "user"
        is one more colleague with look-alike deals, events and mail, and it leaves the base
        profile alone, so the framework can merge it into the task's seed."""
        p = self.person(dept)
        if self.index == 1 or self.b.world is None:
            self.b.update("assistant_profile", 1, employee_id=p.id)
        return p

    # ---- CRM -------------------------------------------------------------------------------
    def company(self, n: int = 0) -> tuple[int, str, list[Person]]:
        """A customer (a name drawn from the grid, new in this story) with two contacts; returns
        (id, name, contacts). `n` is kept for the callers' readability only."""
        while True:
            name = f"{self.rng.choice(CO_HEAD)} {self.rng.choice(CO_TAIL)}"
            if name not in self._companies:
                break
        self._companies.add(name)
        domain = name.replace(" ", "").lower() + ".com"
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
        close_days: int = 30,
    ) -> str:
        code = f"D-{self.b.code(5)}"
        self._add(
            "deals",
            code=code,
            name=name,
            company_id=company_id,
            owner_id=owner.id,
            stage=stage,
            amount=amount,
            close_date=(NOW + timedelta(days=close_days)).date().isoformat(),
        )
        return code

    # ---- projects --------------------------------------------------------------------------
    def project(self, owner: Person, status: str = "active") -> str:
        """A project whose key is a word and a number drawn by the story."""
        taken = {p["key"] for p in self.rows["projects"]}
        while True:
            key = f"{self.rng.choice(PROJECT_WORDS)}{self.rng.randrange(10, 100)}"
            if key not in taken:
                break
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
        # Numbers continue from a drawn start (a project's earlier tasks are not seeded).
        number = self._task_numbers.get(key) or self.rng.randrange(3, 80)
        self._task_numbers[key] = number + 1 + self.rng.randrange(3)
        code = f"{key}-{number}"
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
        code = f"EV-{self.b.code(6)}"
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
        in_reply_to: str | None = None,
    ) -> str:
        """A message from `sender` (an address) delivered to each of `to`'s inboxes (a reply
        when `in_reply_to` names an earlier message_id)."""
        mid = f"<{self.b.code(9)}.mail@{INTERNAL_DOMAIN}>"
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
            in_reply_to=in_reply_to,
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

    # ---- drawn values ----------------------------------------------------------------------
    def amount(self, low: int = 5_000, high: int = 150_000) -> float:
        """A deal amount in dollars: whole fifties, a quarter of them with cents."""
        value = self.rng.randrange(low // 50, high // 50) * 50
        return float(value) + (
            self.rng.choice((0.25, 0.5, 0.75)) if self.rng.random() < 0.25 else 0
        )

    def day(self, first: int = 1, last: int = 4) -> tuple[int, str]:
        """A working day in the next three weeks (its weekday first..last, 1 = Tuesday), as an
        offset from today (Monday) and how a request names it."""
        offset = 7 * self.rng.randrange(3) + self.rng.randint(first, last)
        when = NOW.date() + timedelta(days=offset)
        if offset == 1:
            return offset, "tomorrow"
        if offset < 7:
            return offset, f"on {WEEKDAYS[offset]}"
        return offset, f"on {WEEKDAYS[offset % 7]} {when:%B} {when.day}"

    def choose(self, *options: Any) -> Any:
        return self.rng.choice(options)

    def coin(self) -> bool:
        """A twin's draw: True, the data permits the request; False, a rule forbids it.

        A shipped story (built outside a world) keeps its family's outcome on the first draw
        (`shipped_outcome`: refuse_* and conflict refuse, the others act), so the fixed evaluation
        set covers every tool; generated draws are a fair coin."""
        if self.b.world is None and self.shipped_outcome is not None:
            outcome, self.shipped_outcome = self.shipped_outcome, None
            return outcome
        return self.rng.random() < 0.5


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


def first_free(
    busy: list[tuple[datetime, int]], day_offset: int, minutes: int, earliest: int = 9
) -> datetime:
    """The slot find_free_slot answers: the first half hour from 09:00 (never before now) whose
    `minutes` overlap none of the `busy` (start, minutes) spans, ending by 17:00."""
    start, stop = at(day_offset, earliest), at(day_offset, 17)
    length = timedelta(minutes=minutes)
    while start + length <= stop:
        end = start + length
        clash = any(s < end and s + timedelta(minutes=m) > start for s, m in busy)
        if start >= NOW and not clash:
            return start
        start += timedelta(minutes=30)
    raise ValueError("no free slot")
