"""The base dataset: the promised size, internally consistent, drawn from its rng."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.authoring.replay import dump, memory_engine
from envs.airline import ENVIRONMENT
from envs.airline.models import (
    FLIGHT_STATUSES,
    Flight,
    FlightCabin,
    Passenger,
    Reservation,
    Seat,
    User,
)
from envs.airline.rules import CABIN_OF, free_bags


def build(seed: int = ENVIRONMENT.base_seed) -> Session:
    db = Session(memory_engine(ENVIRONMENT))
    ENVIRONMENT.build_base(db, random.Random(seed))
    db.commit()
    return db


def count(db: Session, model: Any) -> int:
    return int(db.scalar(select(func.count()).select_from(model)) or 0)


def test_the_rng_drives_the_data() -> None:
    # That one seed builds the same data twice is the contract's check (envs check).
    other = dump(build(ENVIRONMENT.base_seed + 1), ENVIRONMENT)
    assert other != dump(build(), ENVIRONMENT), "the rng must drive the data"


def test_sizes_and_spread() -> None:
    db = build()
    assert count(db, Flight) == 216
    assert count(db, User) == 200
    assert 450 <= count(db, Reservation) <= 500
    statuses = Counter(db.scalars(select(Flight.status)))
    assert set(statuses) == set(FLIGHT_STATUSES)
    # Disruptions exist in the future, so compensation and airline-cancellation rules matter.
    future = select(Flight.status).where(Flight.scheduled_departure > ENVIRONMENT.default_now)
    assert {"delayed", "cancelled", "scheduled"} <= set(db.scalars(future))
    fares = Counter(db.scalars(select(Reservation.fare_class)))
    assert min(fares.values()) > 50


def test_ids_stay_below_the_task_range() -> None:
    db = build()
    for table in ENVIRONMENT.metadata.tables.values():
        biggest = db.scalar(select(func.max(table.c.id)))
        assert biggest is None or biggest < 100_000, table.name


def test_inventory_matches_bookings_and_seat_map() -> None:
    db = build()
    booked: Counter[tuple[int, str]] = Counter()
    for r in db.scalars(select(Reservation).where(Reservation.status == "confirmed")):
        for s in r.segments:
            booked[(s.flight_id, r.fare_class)] += len(r.passengers)
    for c in db.scalars(select(FlightCabin)):
        assert c.seats_left == c.seats_total - booked[(c.flight_id, c.fare_class)]
    seated = db.execute(select(Seat, Passenger).join(Passenger, Seat.passenger_id == Passenger.id))
    for seat, passenger in seated:
        r = db.get_one(Reservation, passenger.reservation_id)
        assert r.status == "confirmed" and seat.cabin == CABIN_OF[r.fare_class]
        assert seat.flight_id in {s.flight_id for s in r.segments}


def test_reservations_are_consistent() -> None:
    db = build()
    for r in db.scalars(select(Reservation)):
        assert [p.ticket_number for p in r.passengers] == [
            f"{r.code}-{i}" for i in range(1, len(r.passengers) + 1)
        ]
        fare = sum(s.price for s in r.segments) * len(r.passengers)
        charged = {p.purpose: p.amount for p in r.payments}
        assert abs(charged["fare"] - fare) < 0.005, r.code
        bags = r.baggage
        assert bags is not None
        assert bags.free_bags <= free_bags(r.user.membership, r.fare_class, len(r.passengers))
        assert abs(charged.get("baggage", 0.0) - 50 * bags.paid_bags) < 0.005
        refunded = sum(f.amount for f in r.refunds)
        assert (refunded > 0) == (r.status == "cancelled"), r.code
        assert all(p.payment_method.user_id == r.user_id for p in r.payments)
