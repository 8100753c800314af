"""Helpers for airline tests: run tools directly on an in-memory database, make members and
bookings through the tools themselves, pick base flights."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.testing import ToolCalls
from envs.airline import ENVIRONMENT
from envs.airline.models import Flight, PaymentMethod, Reservation, User

NOW = ENVIRONMENT.default_now


CALLS = ToolCalls(ENVIRONMENT)
run, fails = CALLS.run, CALLS.fails


def member(db: Session, tier: str = "regular", *, gift: float = 0.0, cert: float = 0.0) -> User:
    """A fresh member (id range of tasks) with a card, and optionally a gift card / certificate."""
    n = 100_000 + (db.scalar(select(User.id).order_by(User.id.desc()).limit(1)) or 0)
    user = User(
        id=n,
        user_code=f"test_user_{n}",
        email=f"t{n}@example.test",
        first_name="Test",
        last_name="User",
        date_of_birth=NOW.date().replace(year=1990),
        membership=tier,
        created_at=NOW - timedelta(days=400),
    )
    db.add(user)
    db.flush()
    db.add(
        PaymentMethod(
            code=f"credit_card_{n}", user_id=user.id, kind="credit_card", brand="visa", last4="4242"
        )
    )
    if gift:
        db.add(
            PaymentMethod(code=f"gift_card_{n}", user_id=user.id, kind="gift_card", balance=gift)
        )
    if cert:
        db.add(
            PaymentMethod(
                code=f"certificate_{n}", user_id=user.id, kind="certificate", balance=cert
            )
        )
    db.commit()
    return user


def flight(db: Session, number: str, day: str) -> Flight:
    return db.scalars(
        select(Flight).where(
            Flight.flight_number == number, Flight.flight_date == date.fromisoformat(day)
        )
    ).one()


def a_flight(db: Session, status: str) -> Flight:
    """The first future flight with the status (departed: the first departed one)."""
    query = select(Flight).where(Flight.status == status).order_by(Flight.id)
    if status != "departed":
        query = query.where(Flight.scheduled_departure > NOW + timedelta(hours=12))
    found = db.scalars(query).first()
    assert found is not None, status
    return found


def ref(f: Flight) -> dict[str, str]:
    return {"flight_number": f.flight_number, "date": f.flight_date.isoformat()}


def pax(n: int = 1) -> list[dict[str, str]]:
    names = ("Ada", "Ben", "Cleo", "Dev", "Elsa", "Finn")
    return [
        {"first_name": names[i], "last_name": "Tester", "date_of_birth": f"198{i}-01-15"}
        for i in range(n)
    ]


def book(
    db: Session,
    user: User,
    flights: list[Flight],
    fare: str = "economy",
    *,
    n: int = 1,
    bags: int = 0,
    insurance: bool = False,
    pay: str | None = None,
    cert: str | None = None,
    round_trip: bool = False,
) -> dict[str, Any]:
    """Book through the tool; returns its result (reservation_code, total_charged, ...)."""
    return run(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="round_trip" if round_trip else "one_way",
        origin=flights[0].origin.code,
        destination=flights[0 if round_trip else -1].destination.code,
        fare_class=fare,
        flights=[ref(f) for f in flights],
        passengers=pax(n),
        insurance=insurance,
        checked_bags=bags,
        payment_method_id=pay or f"credit_card_{user.id}",
        certificate_id=cert,
    )


def age(db: Session, code: str, days: float) -> None:
    """Pretend the reservation was made `days` ago (outside the 24-hour window when > 1)."""
    r = db.scalars(select(Reservation).where(Reservation.code == code)).one()
    r.created_at = NOW - timedelta(days=days)
    db.commit()
