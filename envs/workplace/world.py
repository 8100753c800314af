"""A small seeded office for tool tests: the user, colleagues (one former), a customer with a
deal pipeline, a project with tasks, calendar events and a few emails."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from envs.workplace.taskgen.kit import Person, Story, at
from envs.workplace.testing import open_story


@dataclass
class World:
    db: Session
    user: Person
    mate: Person
    boss: Person
    gone: Person
    contact: Person
    company: str
    deals: dict[str, str]  # stage -> code (all owned by the user) + "theirs" (owned by mate)
    project: str
    held: str  # an on-hold project
    tasks: dict[str, str]  # status -> code
    events: dict[str, str]
    mail: dict[str, str]


def build_world() -> World:
    s = Story(99)
    user, mate, boss = s.user(), s.person(), s.person("Finance")
    gone = s.person("Sales", active=False)
    cid, company, contacts = s.company()
    deals = {
        st: s.deal(cid, user, st, None if st == "lead" else 25000.0)
        for st in ("lead", "qualified", "proposal", "won")
    }
    deals["no_amount"] = s.deal(cid, user, "proposal", None)
    deals["theirs"] = s.deal(cid, mate, "qualified", 5000.0)
    key = s.project(user)
    tasks = {st: s.task(key, f"Task {st}", user, st) for st in ("todo", "in_progress", "done")}
    held = "HELD99"
    s._add("projects", key=held, name="Held", owner_id=user.id, status="on_hold")
    tasks["held"] = s.task(held, "Frozen task", user, "todo")
    events = {
        "mine": s.event(user, "Pipeline review", at(1, 14), 60, [mate]),
        "theirs": s.event(mate, "Vendor demo", at(1, 10), 60, [mate, user]),
        "boss_busy": s.event(boss, "Board prep", at(1, 9), 120, [boss]),
    }
    mail = {
        "from_contact": s.email(contacts[0].email, [user], "Renewal terms", "Our terms.", 3),
        "from_mate": s.email(mate.email, [user, boss], "Team offsite", "Can you come?", 2),
        "boss_only": s.email(mate.email, [boss], "Salary review", "Private.", 1),
    }
    return World(
        open_story(s),
        user,
        mate,
        boss,
        gone,
        contacts[0],
        company,
        deals,
        key,
        held,
        tasks,
        events,
        mail,
    )
