"""Airline tools on a real in-memory SQLite: declarations, reads, and booking rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.replay import dump, open_task_db
from app.sdk.compare_spec import FRAMEWORK_TABLES
from envs.airline import ENVIRONMENT
from envs.airline.models import FlightCabin, PaymentMethod, Reservation
from envs.airline.testing import a_flight, book, fails, member, pax, ref, run

READ_TOOLS = {"find_user_by_email", "get_user_details", "get_reservation_details", "list_airports",
              "search_flights", "get_flight_status", "get_seat_map"}  # fmt: skip


@pytest.fixture()
def db() -> Iterator[Session]:
    session, _ = open_task_db(ENVIRONMENT)
    yield session
    session.close()


def cabin(db: Session, flight_id: int, fare: str) -> FlightCabin:
    return db.scalars(
        select(FlightCabin).where(
            FlightCabin.flight_id == flight_id, FlightCabin.fare_class == fare
        )
    ).one()


# ---- declarations -------------------------------------------------------------------------------


def test_every_tool_and_argument_is_described() -> None:
    own = [t for t in ENVIRONMENT.tools if not t.framework]
    assert 12 <= len(own) <= 16
    assert {t.name for t in ENVIRONMENT.tools if t.framework} == {
        "submit_answer",
        "decline_request",
    }
    for t in ENVIRONMENT.tools:
        assert len(t.description) > 40, t.name
        for name, field in t.args_model.model_fields.items():
            assert field.description, f"{t.name}.{name} has no description"
    assert {t.name for t in ENVIRONMENT.tools if t.read_only} == READ_TOOLS
    for s in ENVIRONMENT.tool_schemas():
        params = s["parameters"]
        assert s["strict"] and params["additionalProperties"] is False
        assert params["required"] == list(params["properties"])


def test_compare_spec_names_real_tables_and_columns() -> None:
    tables = ENVIRONMENT.metadata.tables
    # Every airline table; the framework's answer table is scored apart (CompareSpec skips it).
    assert set(ENVIRONMENT.compare.tables) == set(tables) - FRAMEWORK_TABLES
    for name, spec in ENVIRONMENT.compare.tables.items():
        cols = set(tables[name].c.keys())
        for col in (*spec.key, *spec.ignore, *spec.text, *spec.money, *spec.references):
            assert col in cols, f"{name}.{col}"
        for target in spec.references.values():
            assert ENVIRONMENT.compare.for_table(target).key, f"{target} needs a natural key"


# ---- reads --------------------------------------------------------------------------------------


def test_read_tools_write_nothing_and_answer(db: Session) -> None:
    r = db.scalars(select(Reservation).where(Reservation.status == "confirmed")).first()
    assert r is not None
    f = r.segments[0].flight
    before = dump(db, ENVIRONMENT)
    found = run(db, "find_user_by_email", email=r.user.email.upper())
    user = run(db, "get_user_details", user_id=found["user_id"])
    details = run(db, "get_reservation_details", reservation_code=r.code.lower())
    airports = run(db, "list_airports")
    search = run(
        db,
        "search_flights",
        origin=f.origin.code,
        destination=f.destination.code,
        date=f.flight_date.isoformat(),
        include_one_stop=True,
    )
    status = run(
        db, "get_flight_status", flight_number=f.flight_number, date=f.flight_date.isoformat()
    )
    seats = run(
        db,
        "get_seat_map",
        flight_number=f.flight_number,
        date=f.flight_date.isoformat(),
        cabin="business",
    )
    assert dump(db, ENVIRONMENT) == before
    assert found["user_id"] == r.user.user_code
    assert r.code in {x["reservation_code"] for x in user["reservations"]}
    assert details["user_id"] == r.user.user_code and len(details["passengers"]) >= 1
    assert len(airports["airports"]) == 10
    assert status["status"] == f.status
    assert all(s.endswith(("A", "C", "D", "F")) for s in seats["free_seats"])
    assert "direct" in search and "one_stop" in search


def test_search_lists_only_bookable_flights_and_one_stop_connections(db: Session) -> None:
    cancelled = a_flight(db, "cancelled")
    day = cancelled.flight_date.isoformat()
    result = run(
        db,
        "search_flights",
        origin=cancelled.origin.code,
        destination=cancelled.destination.code,
        date=day,
        include_one_stop=False,
    )
    assert cancelled.flight_number not in {f["flight_number"] for f in result["direct"]}
    via = run(
        db,
        "search_flights",
        origin="SFO",
        destination="JFK",
        date="2026-05-14",
        include_one_stop=True,
    )
    for option in via["one_stop"]:
        a, b = option["flights"]
        assert a["destination"] == b["origin"] == "DEN"
        assert b["scheduled_departure"] > a["scheduled_arrival"]


def test_unknown_things_are_not_found(db: Session) -> None:
    assert fails(db, "find_user_by_email", email="nobody@nowhere.test").code == "not_found"
    assert fails(db, "get_user_details", user_id="no_such_user").code == "not_found"
    assert fails(db, "get_reservation_details", reservation_code="ZZZZZZ").code == "not_found"
    err = fails(db, "get_flight_status", flight_number="SG999", date="2026-05-12")
    assert err.code == "not_found" and err.hint
    err = fails(
        db,
        "search_flights",
        origin="XXX",
        destination="JFK",
        date="2026-05-12",
        include_one_stop=False,
    )
    assert "list_airports" in (err.hint or "")
    assert fails(db, "get_flight_status", flight_number="SG101", date="12/05").code == (
        "invalid_arguments"
    )


# ---- booking ------------------------------------------------------------------------------------


def test_booking_charges_fare_insurance_and_extra_bags_and_takes_seats(db: Session) -> None:
    user = member(db, "silver")
    f = a_flight(db, "scheduled")
    left = cabin(db, f.id, "economy").seats_left
    price = cabin(db, f.id, "economy").price
    # silver + economy: 2 free bags per passenger -> 4 free of 5, one bag paid.
    result = book(db, user, [f], "economy", n=2, bags=5, insurance=True)
    assert result["total_charged"] == pytest.approx(price * 2 + 60 + 50)
    assert result["baggage"] == {"checked_bags": 5, "free_bags": 4, "paid_bags": 1}
    assert {p["purpose"] for p in result["payments"]} == {"fare", "insurance", "baggage"}
    assert cabin(db, f.id, "economy").seats_left == left - 2
    assert [p["ticket_number"] for p in result["passengers"]] == [
        f"{result['reservation_code']}-1",
        f"{result['reservation_code']}-2",
    ]


def test_booking_code_is_deterministic(db: Session) -> None:
    user = member(db)
    f = a_flight(db, "scheduled")
    first = book(db, user, [f])["reservation_code"]
    again, _ = open_task_db(ENVIRONMENT)
    twin = member(again)
    assert twin.user_code == user.user_code
    assert book(again, twin, [again.get_one(type(f), f.id)])["reservation_code"] == first
    again.close()


def test_certificate_pays_first_and_gift_card_needs_balance(db: Session) -> None:
    user = member(db, gift=20.0, cert=100.0)
    f = a_flight(db, "scheduled")
    price = cabin(db, f.id, "economy").price
    err = fails(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="one_way",
        origin=f.origin.code,
        destination=f.destination.code,
        fare_class="economy",
        flights=[ref(f)],
        passengers=pax(1),
        insurance=False,
        checked_bags=0,
        payment_method_id=f"gift_card_{user.id}",
        certificate_id=None,
    )
    assert "balance" in err.message
    result = book(db, user, [f], cert=f"certificate_{user.id}")
    paid = {p["payment_method_id"]: p["amount"] for p in result["payments"]}
    assert paid == {f"certificate_{user.id}": 100.0, f"credit_card_{user.id}": price - 100.0}
    assert (
        db.scalars(
            select(PaymentMethod.balance).where(PaymentMethod.code == f"certificate_{user.id}")
        ).one()
        == 0.0
    )


def test_cannot_book_cancelled_full_or_broken_itineraries(db: Session) -> None:
    user = member(db)
    err = fails(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="one_way",
        origin=a_flight(db, "cancelled").origin.code,
        destination=a_flight(db, "cancelled").destination.code,
        fare_class="economy",
        flights=[ref(a_flight(db, "cancelled"))],
        passengers=pax(1),
        insurance=False,
        checked_bags=0,
        payment_method_id=f"credit_card_{user.id}",
        certificate_id=None,
    )
    assert "cancelled" in err.message
    f = a_flight(db, "scheduled")
    cabin(db, f.id, "business").seats_left = 1
    db.commit()
    err = fails(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="one_way",
        origin=f.origin.code,
        destination=f.destination.code,
        fare_class="business",
        flights=[ref(f)],
        passengers=pax(2),
        insurance=False,
        checked_bags=0,
        payment_method_id=f"credit_card_{user.id}",
        certificate_id=None,
    )
    assert "1 business seat" in err.message
    err = fails(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="round_trip",
        origin=f.origin.code,
        destination=f.destination.code,
        fare_class="economy",
        flights=[ref(f)],
        passengers=pax(1),
        insurance=False,
        checked_bags=0,
        payment_method_id=f"credit_card_{user.id}",
        certificate_id=None,
    )
    assert err.code == "invalid_arguments" and "round trip" in err.message
    err = fails(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="one_way",
        origin=f.origin.code,
        destination=f.destination.code,
        fare_class="economy",
        flights=[ref(f)],
        passengers=pax(6),
        insurance=False,
        checked_bags=0,
        payment_method_id=f"credit_card_{user.id}",
        certificate_id=None,
    )
    assert "1 to 5 passengers" in err.message


def test_cannot_pay_with_someone_elses_method(db: Session) -> None:
    user, other = member(db), member(db)
    f = a_flight(db, "scheduled")
    err = fails(
        db,
        "book_reservation",
        user_id=user.user_code,
        trip_type="one_way",
        origin=f.origin.code,
        destination=f.destination.code,
        fare_class="economy",
        flights=[ref(f)],
        passengers=pax(1),
        insurance=False,
        checked_bags=0,
        payment_method_id=f"credit_card_{other.id}",
        certificate_id=None,
    )
    assert err.code == "not_found" and f"credit_card_{user.id}" in (err.hint or "")
