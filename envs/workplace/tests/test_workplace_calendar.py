"""Calendar tools on a real in-memory SQLite: conflicts, organizer rights, free slots."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from app.authoring.replay import dump
from envs.workplace import ENVIRONMENT
from envs.workplace.taskgen.kit import at, iso
from envs.workplace.testing import fails, run
from envs.workplace.world import World, build_world


@pytest.fixture
def w() -> Iterator[World]:
    world = build_world()
    yield world
    world.db.close()


def _book(w: World, start: int, minutes: int = 60, **extra: object) -> dict:
    begin = at(1, start)
    end = begin + timedelta(minutes=minutes)
    people = [w.boss.email]
    return {
        "title": "Sync",
        "start": iso(begin),
        "end": iso(end),
        "attendee_emails": people,
        **extra,
    }


def test_overlap_with_an_attendee_is_refused_unless_allowed(w: World) -> None:
    err = fails(w.db, "create_event", "conflict", **_book(w, 10))
    assert "Board prep" in err.message and w.boss.last in err.message
    out = run(w.db, "create_event", **_book(w, 10, allow_conflicts=True))
    assert {a["email"]: a["response"] for a in out["attendees"]} == {
        w.user.email: "accepted",
        w.boss.email: "needs_action",
    }


def test_the_users_own_events_count_but_declined_ones_do_not(w: World) -> None:
    fails(
        w.db,
        "create_event",
        "conflict",
        title="Solo",
        start=iso(at(1, 14, 30)),
        end=iso(at(1, 15, 30)),
        attendee_emails=[],
    )
    # The user is invited to the Vendor demo (10:00-11:00); declining frees the slot.
    run(w.db, "respond_to_event", code=w.events["theirs"], response="declined")
    out = run(
        w.db,
        "create_event",
        title="Solo",
        start=iso(at(1, 10)),
        end=iso(at(1, 11)),
        attendee_emails=[],
    )
    assert out["organizer"] == w.user.email


def test_time_rules(w: World) -> None:
    fails(
        w.db,
        "create_event",
        "in_the_past",
        title="Old",
        start=iso(at(0, 8)),
        end=iso(at(0, 9)),
        attendee_emails=[],
    )
    fails(
        w.db,
        "create_event",
        "invalid_arguments",
        title="Backwards",
        start=iso(at(2, 10)),
        end=iso(at(2, 9)),
        attendee_emails=[],
    )
    fails(
        w.db,
        "create_event",
        "event_too_long",
        title="Marathon",
        start=iso(at(2, 8)),
        end=iso(at(2, 17)),
        attendee_emails=[],
    )


def test_former_employees_cannot_be_invited(w: World) -> None:
    fails(
        w.db,
        "create_event",
        "inactive_employee",
        title="x",
        start=iso(at(3, 10)),
        end=iso(at(3, 11)),
        attendee_emails=[w.gone.email],
    )


def test_only_the_organizer_reschedules_or_cancels(w: World) -> None:
    fails(
        w.db,
        "reschedule_event",
        "not_organizer",
        code=w.events["theirs"],
        new_start=iso(at(2, 10)),
        new_end=iso(at(2, 11)),
    )
    fails(w.db, "cancel_event", "not_organizer", code=w.events["theirs"])
    fails(w.db, "respond_to_event", "not_invited", code=w.events["mine"], response="accepted")


def test_reschedule_checks_others_not_itself_and_resets_answers(w: World) -> None:
    run(w.db, "respond_to_event", code=w.events["theirs"], response="accepted")
    # Overlapping its own old slot is fine; the Vendor demo (10:00) is not.
    out = run(
        w.db,
        "reschedule_event",
        code=w.events["mine"],
        new_start=iso(at(1, 14, 30)),
        new_end=iso(at(1, 15, 30)),
    )
    assert out["start"] == iso(at(1, 14, 30))
    assert all(
        a["response"] == "needs_action" for a in out["attendees"] if a["email"] != w.user.email
    )
    fails(
        w.db,
        "reschedule_event",
        "conflict",
        code=w.events["mine"],
        new_start=iso(at(1, 10)),
        new_end=iso(at(1, 11)),
    )


def test_cancel_once(w: World) -> None:
    assert run(w.db, "cancel_event", code=w.events["mine"])["status"] == "cancelled"
    fails(w.db, "cancel_event", "cancelled", code=w.events["mine"])
    listed = run(w.db, "list_events", start_date="2026-03-17", end_date="2026-03-17")
    assert w.events["mine"] not in [e["code"] for e in listed["events"]]


def test_free_slot_skips_everyones_busy_time(w: World) -> None:
    # Boss busy 09-11, user's Vendor demo 10-11, user's Pipeline review 14-15.
    slot = run(
        w.db,
        "find_free_slot",
        attendee_emails=[w.boss.email],
        day="2026-03-17",
        duration_minutes=60,
    )
    assert slot["start"] == iso(at(1, 11))
    fails(
        w.db,
        "find_free_slot",
        "no_slot",
        attendee_emails=[w.boss.email],
        day="2026-03-17",
        duration_minutes=120,
        earliest="09:00",
        latest_end="11:30",
    )


def test_event_codes_are_deterministic(w: World) -> None:
    first = run(w.db, "create_event", **_book(w, 15))
    other = build_world()
    try:
        again = run(other.db, "create_event", **{**_book(other, 15), "title": " sync "})
    finally:
        other.db.close()
    assert first["code"] == again["code"]


def test_calendar_reads_write_nothing(w: World) -> None:
    before = dump(w.db, ENVIRONMENT)
    run(w.db, "list_events", start_date="2026-03-16", employee_email=w.boss.email)
    run(
        w.db,
        "find_free_slot",
        attendee_emails=[w.mate.email],
        day="2026-03-18",
        duration_minutes=30,
    )
    assert dump(w.db, ENVIRONMENT) == before
