"""Policy rules of the airline's write tools, each on a real in-memory SQLite database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.authoring.replay import open_task_db
from envs.airline import ENVIRONMENT
from envs.airline.models import (
    Certificate,
    Flight,
    FlightCabin,
    Passenger,
    PaymentMethod,
    Reservation,
    ReservationSegment,
    Seat,
    User,
)
from envs.airline.rules import RETURN_OF
from envs.airline.testing import NOW, a_flight, age, book, fails, member, ref, run


@pytest.fixture()
def db() -> Iterator[Session]:
    session, _ = open_task_db(ENVIRONMENT)
    yield session
    session.close()


def left(db: Session, flight: Flight, fare: str) -> int:
    return db.scalars(
        select(FlightCabin.seats_left).where(
            FlightCabin.flight_id == flight.id, FlightCabin.fare_class == fare
        )
    ).one()


def same_number_later(db: Session, f: Flight) -> Flight:
    later = db.scalars(
        select(Flight)
        .where(
            Flight.flight_number == f.flight_number,
            Flight.flight_date > f.flight_date,
            Flight.status == "scheduled",
        )
        .order_by(Flight.flight_date)
    ).first()
    assert later is not None
    return later


def args(user: Any, code: str, **more: Any) -> dict[str, Any]:
    return {"user_id": user.user_code, "reservation_code": code, **more}


# ---- cancel -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fare, insured, days", [("economy", False, 0.5), ("economy", True, 9), ("business", False, 9)]
)
def test_cancel_is_allowed_and_refunds_to_the_original_method(db, fare, insured, days) -> None:
    user = member(db, gift=2000.0)
    f = a_flight(db, "scheduled")
    before = left(db, f, fare)
    code = book(db, user, [f], fare, n=2, insurance=insured, pay=f"gift_card_{user.id}")[
        "reservation_code"
    ]
    age(db, code, days)
    result = run(db, "cancel_reservation", **args(user, code, reason="change_of_plan"))
    assert result["status"] == "cancelled"
    assert sum(r["amount"] for r in result["refunds"]) == pytest.approx(
        sum(p["amount"] for p in result["payments"])
    )
    assert {r["payment_method_id"] for r in result["refunds"]} == {f"gift_card_{user.id}"}
    gift = db.scalars(select(PaymentMethod).where(PaymentMethod.code == f"gift_card_{user.id}"))
    assert gift.one().balance == pytest.approx(2000.0)
    assert left(db, f, fare) == before


def test_cancel_refused_after_24h_without_a_rule_and_after_departure(db) -> None:
    user = member(db)
    code = book(db, user, [a_flight(db, "scheduled")], "economy")["reservation_code"]
    age(db, code, 2)
    err = fails(db, "cancel_reservation", **args(user, code, reason="change_of_plan"))
    assert code in err.message and "cannot be cancelled" in err.message
    assert err.code == "cancellation_not_allowed"  # each rule's error is its decline reason
    err = fails(db, "cancel_reservation", **args(user, code, reason="airline_cancelled_flight"))
    assert err.code == "invalid_arguments"
    # A round trip whose outbound flight has departed can no longer be cancelled or changed.
    gone = a_flight(db, "departed")
    back = db.scalars(
        select(Flight).where(
            Flight.flight_number == RETURN_OF[gone.flight_number],
            Flight.flight_date == gone.flight_date + timedelta(4),
        )
    ).one()
    trip = by_hand(db, user, "TEST11", [gone, back], "business")
    err = fails(db, "cancel_reservation", **args(user, trip, reason="change_of_plan"))
    assert "already departed" in err.message and err.code == "already_departed"
    err = fails(
        db, "change_cabin", **args(user, trip, fare_class="economy", payment_method_id=None)
    )
    assert "already departed" in err.message


def by_hand(db: Session, user: User, code: str, flights: list[Flight], fare: str) -> str:
    """An old booking on flights that can no longer be booked (departed or cancelled)."""
    r = Reservation(
        code=code,
        user_id=user.id,
        origin_id=flights[0].origin_id,
        destination_id=flights[0].destination_id,
        trip_type="round_trip" if len(flights) == 2 else "one_way",
        fare_class=fare,
        status="confirmed",
        insurance=False,
        created_at=flights[0].scheduled_departure - timedelta(days=30),
    )
    db.add(r)
    db.flush()
    for leg_no, f in enumerate(flights, start=1):
        db.add(ReservationSegment(reservation_id=r.id, leg_no=leg_no, flight_id=f.id, price=99.0))
        cabin = db.scalars(
            select(FlightCabin).where(FlightCabin.flight_id == f.id, FlightCabin.fare_class == fare)
        ).one()
        cabin.seats_left -= 1  # the inventory stays consistent with the bookings
    db.add(
        Passenger(
            ticket_number=f"{code}-1",
            reservation_id=r.id,
            position=1,
            first_name="A",
            last_name="B",
            date_of_birth=user.date_of_birth,
        )
    )
    db.commit()
    return code


def test_airline_cancelled_flight_allows_cancellation(db) -> None:
    user = member(db)
    f = a_flight(db, "cancelled")
    by_hand(db, user, "TEST22", [f], "economy")
    result = run(
        db, "cancel_reservation", **args(user, "TEST22", reason="airline_cancelled_flight")
    )
    assert result["status"] == "cancelled"
    # The output states what happened, not the rule that allowed it (the agent checks the rule).
    assert "allowed_because" not in result


@pytest.mark.parametrize("minutes, allowed", [(24 * 60, True), (24 * 60 + 1, False)])
def test_the_24_hour_window_includes_its_last_minute(db, minutes: int, allowed: bool) -> None:
    user = member(db)
    code = book(db, user, [a_flight(db, "scheduled")], "economy")["reservation_code"]
    age(db, code, minutes / (24 * 60))
    call = args(user, code, reason="change_of_plan")
    if allowed:
        assert run(db, "cancel_reservation", **call)["status"] == "cancelled"
    else:
        assert fails(db, "cancel_reservation", **call).code == "cancellation_not_allowed"


def test_the_policy_states_the_24_hour_boundary() -> None:
    assert "booked exactly 24 hours ago still counts" in ENVIRONMENT.policy


def test_a_cancelled_flight_in_the_past_never_counts_as_departed(db) -> None:
    user = member(db)
    past = db.scalars(
        select(Flight).where(Flight.status == "cancelled", Flight.scheduled_departure < NOW)
    ).first()
    assert past is not None, "the base data has cancelled flights in the past"
    by_hand(db, user, "TEST33", [past], "economy")
    result = run(
        db, "cancel_reservation", **args(user, "TEST33", reason="airline_cancelled_flight")
    )
    assert result["status"] == "cancelled"


def test_only_the_owner_can_act(db) -> None:
    user, other = member(db), member(db)
    code = book(db, user, [a_flight(db, "scheduled")], "business")["reservation_code"]
    err = fails(db, "cancel_reservation", **args(other, code, reason="change_of_plan"))
    assert err.code == "other_member"


# ---- change flights and cabin -------------------------------------------------------------------


def test_basic_economy_flights_cannot_change(db) -> None:
    user = member(db)
    f = a_flight(db, "scheduled")
    code = book(db, user, [f], "basic_economy")["reservation_code"]
    err = fails(
        db,
        "change_flights",
        **args(
            user,
            code,
            flights=[ref(same_number_later(db, f))],
            payment_method_id=f"credit_card_{user.id}",
        ),
    )
    assert "basic economy" in err.message and "change_cabin" in (err.hint or "")
    assert err.code == "basic_economy_no_change"


def test_change_flights_moves_inventory_and_settles_the_difference(db) -> None:
    user = member(db)
    f = a_flight(db, "scheduled")
    g = same_number_later(db, f)
    code = book(db, user, [f], "economy", n=2)["reservation_code"]
    before_f, before_g = left(db, f, "economy"), left(db, g, "economy")
    diff = 2 * (
        db.scalars(
            select(FlightCabin.price).where(
                FlightCabin.flight_id == g.id, FlightCabin.fare_class == "economy"
            )
        ).one()
        - db.scalars(
            select(FlightCabin.price).where(
                FlightCabin.flight_id == f.id, FlightCabin.fare_class == "economy"
            )
        ).one()
    )
    if diff > 0:
        err = fails(
            db, "change_flights", **args(user, code, flights=[ref(g)], payment_method_id=None)
        )
        assert "payment_method_id is required" in err.message
    result = run(
        db,
        "change_flights",
        **args(user, code, flights=[ref(g)], payment_method_id=f"credit_card_{user.id}"),
    )
    assert [x["flight_number"] + x["date"] for x in result["flights"]] == [
        g.flight_number + g.flight_date.isoformat()
    ]
    assert left(db, f, "economy") == before_f + 2 and left(db, g, "economy") == before_g - 2
    moved = sum(p["amount"] for p in result["payments"] if p["purpose"] == "change") - sum(
        r["amount"] for r in result["refunds"]
    )
    assert moved == pytest.approx(diff)
    assert result["fare_difference"] == pytest.approx(diff)  # a number, like every amount
    assert isinstance(result["fare_difference"], float)
    err = fails(db, "change_flights", **args(user, code, flights=[ref(g)], payment_method_id=None))
    assert "already has exactly these flights" in err.message


def test_change_cabin_charges_upgrades_frees_seats_and_refunds_downgrades(db) -> None:
    user = member(db)
    f = a_flight(db, "scheduled")
    code = book(db, user, [f], "economy")["reservation_code"]
    seat = run(
        db,
        "get_seat_map",
        flight_number=f.flight_number,
        date=f.flight_date.isoformat(),
        cabin="economy",
    )["free_seats"][0]
    run(
        db,
        "assign_seat",
        **args(
            user,
            code,
            ticket_number=f"{code}-1",
            flight_number=f.flight_number,
            date=f.flight_date.isoformat(),
            seat_no=seat,
        ),
    )
    assert (
        "invalid_arguments"
        == fails(
            db, "change_cabin", **args(user, code, fare_class="business", payment_method_id=None)
        ).code
    )
    up = run(
        db,
        "change_cabin",
        **args(user, code, fare_class="business", payment_method_id=f"credit_card_{user.id}"),
    )
    assert up["fare_class"] == "business" and up["flights"][0]["seats"] == {}
    down = run(db, "change_cabin", **args(user, code, fare_class="economy", payment_method_id=None))
    assert isinstance(up["fare_difference"], float)  # amounts are numbers, as in every tool
    assert down["refunds"][0]["amount"] == pytest.approx(up["fare_difference"])
    assert (
        fails(
            db, "change_cabin", **args(user, code, fare_class="economy", payment_method_id=None)
        ).code
        == "invalid_arguments"
    )


def test_update_passengers_keeps_the_count(db) -> None:
    user = member(db)
    code = book(db, user, [a_flight(db, "scheduled")], n=2)["reservation_code"]
    people = run(db, "get_reservation_details", reservation_code=code)["passengers"]
    fixed = [{k: p[k] for k in ("first_name", "last_name", "date_of_birth")} for p in people]
    fixed[1]["last_name"] = "Renamed"
    assert fails(db, "update_passengers", **args(user, code, passengers=fixed[:1])).code == (
        "invalid_arguments"
    )
    result = run(db, "update_passengers", **args(user, code, passengers=fixed))
    assert result["passengers"][1]["last_name"] == "Renamed"
    assert result["passengers"][1]["ticket_number"] == f"{code}-2"
    assert "already" in fails(db, "update_passengers", **args(user, code, passengers=fixed)).message


# ---- bags, seats, compensation ------------------------------------------------------------------


def test_bags_beyond_the_tier_allowance_cost_50_each(db) -> None:
    user = member(db, "gold")  # gold + economy: 3 free per passenger
    code = book(db, user, [a_flight(db, "scheduled")], "economy", bags=2)["reservation_code"]
    free = run(db, "add_baggage", **args(user, code, extra_bags=1, payment_method_id=None))
    assert (
        free["fee"] == 0.0 and isinstance(free["fee"], float) and free["baggage"]["paid_bags"] == 0
    )
    err = fails(db, "add_baggage", **args(user, code, extra_bags=2, payment_method_id=None))
    assert "100.00" in err.message
    paid = run(
        db,
        "add_baggage",
        **args(user, code, extra_bags=2, payment_method_id=f"credit_card_{user.id}"),
    )
    assert paid["fee"] == 100.0
    assert paid["baggage"] == {"checked_bags": 5, "free_bags": 3, "paid_bags": 2}
    over = fails(db, "add_baggage", **args(user, code, extra_bags=1, payment_method_id=None))
    assert "At most 5" in over.message and over.code == "baggage_rules"


def test_seats_need_a_free_seat_in_the_fare_cabin(db) -> None:
    user = member(db)
    f = a_flight(db, "scheduled")
    day, number = f.flight_date.isoformat(), f.flight_number
    basic = book(db, user, [f], "basic_economy")["reservation_code"]
    code = book(db, user, [f], "economy")["reservation_code"]
    where = {"flight_number": number, "date": day}
    err = fails(
        db, "assign_seat", **args(user, basic, ticket_number=f"{basic}-1", seat_no="12A", **where)
    )
    assert "check-in" in err.message and err.code == "seat_not_allowed"
    assert (
        "business cabin"
        in fails(
            db, "assign_seat", **args(user, code, ticket_number=f"{code}-1", seat_no="1A", **where)
        ).message
    )
    taken = db.scalars(
        select(Seat.seat_no).where(
            Seat.flight_id == f.id, Seat.cabin == "economy", Seat.passenger_id.is_not(None)
        )
    ).first()
    if taken:
        err = fails(
            db, "assign_seat", **args(user, code, ticket_number=f"{code}-1", seat_no=taken, **where)
        )
        assert "taken" in err.message and err.code == "seat_not_allowed"
    free = run(db, "get_seat_map", cabin="economy", **where)["free_seats"]
    run(db, "assign_seat", **args(user, code, ticket_number=f"{code}-1", seat_no=free[0], **where))
    moved = run(
        db, "assign_seat", **args(user, code, ticket_number=f"{code}-1", seat_no=free[1], **where)
    )
    assert moved["previous_seat"] == free[0]
    assert free[0] in run(db, "get_seat_map", cabin="economy", **where)["free_seats"]


def test_compensation_only_for_eligible_members_once(db) -> None:
    delayed = a_flight(db, "delayed")
    regular, silver = member(db), member(db, "silver")
    plain = book(db, regular, [delayed], "economy")["reservation_code"]
    err = fails(db, "issue_compensation_certificate", **args(regular, plain))
    assert "no compensation certificate is allowed" in err.message
    assert err.code == "not_eligible_compensation"
    code = book(db, silver, [delayed], "economy", n=3)["reservation_code"]
    result = run(db, "issue_compensation_certificate", **args(silver, code))
    assert result == {
        "certificate_id": f"certificate_{code.lower()}",
        "amount": 150.0,
        "reason": "flight_delayed",
    }
    cert = db.scalars(select(Certificate)).one()
    assert cert.payment_method_id is not None and cert.amount == 150.0
    err = fails(db, "issue_compensation_certificate", **args(silver, code))
    assert "already issued" in err.message and err.code == "compensation_already_issued"
    fine = book(db, silver, [a_flight(db, "scheduled")], "business")["reservation_code"]
    assert (
        "no compensation is due"
        in fails(db, "issue_compensation_certificate", **args(silver, fine)).message
    )


def test_every_rule_error_is_named_by_its_decline_reason() -> None:
    """A tool refusing on a rule answers with the code decline_request names that rule by;
    the only other codes are bad arguments and unknown entities (no generic rule_violation)."""
    import ast
    from pathlib import Path

    from envs.airline.policy import DECLINE_REASONS

    calls = [
        node
        for path in Path(__file__).resolve().parents[1].glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ToolError"
    ]
    codes = [next((k.value for k in c.keywords if k.arg == "code"), None) for c in calls]
    assert len(calls) > 30 and None not in codes  # none falls back to rule_violation
    named = {c.value for c in codes if isinstance(c, ast.Constant)}
    assert named - {"invalid_arguments", "not_found"} <= set(DECLINE_REASONS)
    assert {"cabin_full", "already_departed", "other_member", "baggage_rules"} <= named
