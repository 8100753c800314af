"""Shared helpers of the airline tools: lookups that fail helpfully, money movements, views."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import date, datetime, timedelta
from typing import Any, cast

from pydantic import Field
from sqlalchemy import Integer, Table, bindparam, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolError
from app.sdk.money import cents, money
from app.sdk.rows import AnyRow
from envs.airline.models import (
    Airport,
    Baggage,
    Flight,
    FlightCabin,
    Passenger,
    Payment,
    PaymentMethod,
    Refund,
    Reservation,
    ReservationSegment,
    Seat,
    User,
)

# The mapped tables, for the hot read paths that use Core instead of ORM entities.
AIRPORTS = cast(Table, Airport.__table__)
FLIGHTS = cast(Table, Flight.__table__)
FLIGHT_CABINS = cast(Table, FlightCabin.__table__)
SEATS = cast(Table, Seat.__table__)
USERS = cast(Table, User.__table__)
PAYMENT_METHODS = cast(Table, PaymentMethod.__table__)
RESERVATIONS = cast(Table, Reservation.__table__)
SEGMENTS = cast(Table, ReservationSegment.__table__)
PASSENGERS = cast(Table, Passenger.__table__)
PAYMENTS = cast(Table, Payment.__table__)
REFUNDS = cast(Table, Refund.__table__)
BAGGAGE = cast(Table, Baggage.__table__)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


class FlightRef(ToolArgs):
    """One dated flight, as printed on a ticket."""

    flight_number: str = Field(description="The flight number, e.g. 'SG101'.")
    date: str = Field(description="The departure date, YYYY-MM-DD, e.g. '2026-05-14'.")


def parse_date(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(
            f"{text!r} is not a date.", hint="Write dates as YYYY-MM-DD.", code="invalid_arguments"
        ) from None


def get_user(db: Session, user_code: str) -> User:
    user = db.scalar(select(User).where(User.user_code == user_code.strip().lower()))
    if user is None:
        raise no_such_user(user_code)
    return user


def no_such_user(user_code: str) -> ToolError:
    return ToolError(
        f"No member has user id {user_code!r}.",
        hint="Ask for the member's user id, or look it up with find_user_by_email.",
        code="not_found",
    )


def no_such_reservation(code: str) -> ToolError:
    return ToolError(
        f"No reservation has booking code {code}.",
        hint="Booking codes have six letters and digits; get_user_details lists a member's.",
        code="not_found",
    )


def get_reservation(db: Session, code: str) -> Reservation:
    norm = code.strip().upper()
    reservation = db.scalar(select(Reservation).where(Reservation.code == norm))
    if reservation is None:
        raise no_such_reservation(norm)
    return reservation


def owned_reservation(db: Session, code: str, user_code: str) -> Reservation:
    """The reservation, provided it belongs to the member and is still confirmed."""
    user = get_user(db, user_code)
    reservation = get_reservation(db, code)
    if reservation.user_id != user.id:
        raise ToolError(
            f"Reservation {reservation.code} does not belong to member {user.user_code}.",
            hint="Only act on reservations of the member you are talking to.",
            code="other_member",
        )
    if reservation.status == "cancelled":
        raise ToolError(
            f"Reservation {reservation.code} is already cancelled.", code="already_cancelled"
        )
    return reservation


def get_flight(db: Session, flight_number: str, day: str) -> Flight:
    """The dated flight as an ORM entity, for the write tools (lookup and errors: `flight_row`)."""
    return db.get_one(Flight, flight_row(db, flight_number, day).id)


def cabin_of(db: Session, flight: Flight, fare_class: str) -> FlightCabin:
    return db.scalars(
        select(FlightCabin).where(
            FlightCabin.flight_id == flight.id, FlightCabin.fare_class == fare_class
        )
    ).one()


def has_left(flight: Flight | AnyRow, now: datetime) -> bool:
    """A flight that departed (or whose scheduled departure, plus any delay, is past).

    A cancelled flight never leaves, so it never blocks cancelling or changing a reservation.
    """
    if flight.status == "cancelled":
        return False
    leaves = flight.scheduled_departure + timedelta(minutes=flight.delay_minutes)
    return flight.status == "departed" or leaves <= now


def require_not_flown(reservation: Reservation, now: datetime, action: str) -> None:
    flown = [s.flight for s in reservation.segments if has_left(s.flight, now)]
    if flown:
        raise ToolError(
            f"Reservation {reservation.code} cannot be {action}: flight "
            f"{flown[0].flight_number} of {flown[0].flight_date} has already departed.",
            hint="Nothing can be changed once a flight of the trip has departed.",
            code="already_departed",
        )


def user_method(user: User, code: str) -> PaymentMethod:
    wanted = code.strip().lower()
    method = next((m for m in user.payment_methods if m.code == wanted), None)
    if method is None:
        listed = ", ".join(m.code for m in user.payment_methods)
        raise ToolError(
            f"Member {user.user_code} has no payment method {code!r}.",
            hint=f"Their payment methods are: {listed}.",
            code="not_found",
        )
    return method


def charge(
    reservation: Reservation, method: PaymentMethod, amount: float, purpose: str, now: datetime
) -> None:
    amount = cents(amount)
    if amount <= 0:
        return
    if method.balance is not None:
        if method.balance + 1e-9 < amount:
            raise ToolError(
                f"{method.code} has a balance of {money(method.balance)}, "
                f"not enough to pay {money(amount)}.",
                hint="Ask the member for another payment method (a credit card has no limit).",
                code="payment_not_allowed",
            )
        method.balance = cents(method.balance - amount)
    reservation.payments.append(
        Payment(payment_method_id=method.id, purpose=purpose, amount=amount, created_at=now)
    )


def refund(
    db: Session, reservation: Reservation, method_id: int, amount: float, reason: str, now: datetime
) -> None:
    """Money goes back to the method it came from; gift card and certificate balances go up."""
    amount = cents(amount)
    method = db.get_one(PaymentMethod, method_id)
    if method.balance is not None:
        method.balance = cents(method.balance + amount)
    reservation.refunds.append(
        Refund(payment_method_id=method.id, reason=reason, amount=amount, created_at=now)
    )


def net_paid(reservation: Reservation) -> dict[int, float]:
    """Per payment method id: charges minus refunds on this reservation so far."""
    net: dict[int, float] = defaultdict(float)
    for p in reservation.payments:
        net[p.payment_method_id] += p.amount
    for r in reservation.refunds:
        net[r.payment_method_id] -= r.amount
    return {k: cents(v) for k, v in sorted(net.items()) if cents(v) > 0}


def refund_to_methods(
    db: Session, reservation: Reservation, amount: float, reason: str, now: datetime
) -> None:
    """Refund `amount` back to the reservation's payment methods, newest charge first."""
    left = cents(amount)
    paid = net_paid(reservation)
    for method_id in sorted(paid, reverse=True):
        if left <= 0:
            break
        part = min(left, paid[method_id])
        refund(db, reservation, method_id, part, reason, now)
        left = cents(left - part)


def release_seats(
    db: Session, reservation: Reservation, flight_ids: set[int] | None = None
) -> None:
    """Free the seats the reservation's passengers hold (on the given flights, or all)."""
    pax = [p.id for p in reservation.passengers]
    query = select(Seat).where(Seat.passenger_id.in_(pax))
    if flight_ids is not None:
        query = query.where(Seat.flight_id.in_(flight_ids))
    for seat in db.scalars(query):
        seat.passenger_id = None


def candidate_code(user_code: str, salt: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{user_code}|{salt}|{attempt}".encode()).digest()
    return "".join(CODE_ALPHABET[b % len(CODE_ALPHABET)] for b in digest[:6])


def booking_code(db: Session, user: User, salt: str) -> str:
    """A deterministic six-character code: the same calls on the same state give the same code."""
    attempt = 0
    while True:
        code = candidate_code(user.user_code, salt, attempt)
        if db.scalar(select(Reservation.id).where(Reservation.code == code)) is None:
            return code
        attempt += 1


# --- reservation and flight views, read with Core ---------------------------------------------
# Core, not ORM lazy loads: hot reads; see docs/performance.md. Statements are built once at
# import and run with bound values; each list keeps the order of the ORM relationship it replaces
# (segments by leg_no, passengers by position, payments and refunds by id).

_RESERVATION_ID = bindparam("reservation_id", type_=Integer)
_ORIGIN, _DESTINATION = AIRPORTS.alias("origin"), AIRPORTS.alias("destination")

# A dated flight with its airport codes: what `flight_view` shows.
FLIGHT_COLUMNS = (
    FLIGHTS.c.id,
    FLIGHTS.c.flight_number,
    FLIGHTS.c.flight_date,
    _ORIGIN.c.code.label("origin"),
    _DESTINATION.c.code.label("destination"),
    FLIGHTS.c.scheduled_departure,
    FLIGHTS.c.scheduled_arrival,
    FLIGHTS.c.status,
    FLIGHTS.c.delay_minutes,
)
FLIGHT_JOIN = FLIGHTS.join(_ORIGIN, _ORIGIN.c.id == FLIGHTS.c.origin_id).join(
    _DESTINATION, _DESTINATION.c.id == FLIGHTS.c.destination_id
)
_FLIGHT_BY_NUMBER_DATE = (
    select(*FLIGHT_COLUMNS)
    .select_from(FLIGHT_JOIN)
    .where(
        FLIGHTS.c.flight_number == bindparam("number"), FLIGHTS.c.flight_date == bindparam("day")
    )
)


def flight_row(db: Session, flight_number: str, day: str) -> AnyRow:
    """The dated flight's `flight_view` columns (and id); not_found if there is none."""
    number = flight_number.strip().upper()
    parsed = parse_date(day)
    flight = db.execute(_FLIGHT_BY_NUMBER_DATE, {"number": number, "day": parsed}).first()
    if flight is None:
        raise ToolError(
            f"There is no flight {number} on {day}.",
            hint="search_flights lists the flights between two airports on a date.",
            code="not_found",
        )
    return flight


def flight_view(flight: AnyRow) -> dict[str, Any]:
    """A flight row of `FLIGHT_COLUMNS` (origin and destination are airport codes)."""
    return {
        "flight_number": flight.flight_number,
        "date": flight.flight_date.isoformat(),
        "origin": flight.origin,
        "destination": flight.destination,
        "scheduled_departure": flight.scheduled_departure.isoformat(),
        "scheduled_arrival": flight.scheduled_arrival.isoformat(),
        "status": flight.status,
        "delay_minutes": flight.delay_minutes,
    }


_RESERVATION = (
    select(
        RESERVATIONS.c.id,
        RESERVATIONS.c.code,
        USERS.c.user_code,
        RESERVATIONS.c.status,
        RESERVATIONS.c.trip_type,
        RESERVATIONS.c.fare_class,
        _ORIGIN.c.code.label("origin"),
        _DESTINATION.c.code.label("destination"),
        RESERVATIONS.c.insurance,
        RESERVATIONS.c.created_at,
        BAGGAGE.c.checked_bags,
        BAGGAGE.c.free_bags,
        BAGGAGE.c.paid_bags,
    )
    .select_from(RESERVATIONS)
    .join(USERS, USERS.c.id == RESERVATIONS.c.user_id)
    .join(_ORIGIN, _ORIGIN.c.id == RESERVATIONS.c.origin_id)
    .join(_DESTINATION, _DESTINATION.c.id == RESERVATIONS.c.destination_id)
    .outerjoin(BAGGAGE, BAGGAGE.c.reservation_id == RESERVATIONS.c.id)
)
_RESERVATION_BY_ID = _RESERVATION.where(RESERVATIONS.c.id == _RESERVATION_ID)
_RESERVATION_BY_CODE = _RESERVATION.where(RESERVATIONS.c.code == bindparam("code"))

_SEGMENTS = (
    select(*FLIGHT_COLUMNS, SEGMENTS.c.price)
    .select_from(SEGMENTS.join(FLIGHT_JOIN, FLIGHTS.c.id == SEGMENTS.c.flight_id))
    .where(SEGMENTS.c.reservation_id == _RESERVATION_ID)
    .order_by(SEGMENTS.c.leg_no)
)
_PASSENGERS = (
    select(
        PASSENGERS.c.id,
        PASSENGERS.c.ticket_number,
        PASSENGERS.c.first_name,
        PASSENGERS.c.last_name,
        PASSENGERS.c.date_of_birth,
    )
    .where(PASSENGERS.c.reservation_id == _RESERVATION_ID)
    .order_by(PASSENGERS.c.position)
)
# Seats held by the reservation's passengers, in (flight, passenger) order as the view lists them.
_SEATS = (
    select(SEATS.c.flight_id, SEATS.c.seat_no, PASSENGERS.c.ticket_number)
    .select_from(SEATS.join(PASSENGERS, PASSENGERS.c.id == SEATS.c.passenger_id))
    .where(PASSENGERS.c.reservation_id == _RESERVATION_ID)
    .order_by(SEATS.c.flight_id, SEATS.c.passenger_id)
)
_PAYMENTS = (
    select(PAYMENT_METHODS.c.code, PAYMENTS.c.purpose, PAYMENTS.c.amount)
    .select_from(
        PAYMENTS.join(PAYMENT_METHODS, PAYMENT_METHODS.c.id == PAYMENTS.c.payment_method_id)
    )
    .where(PAYMENTS.c.reservation_id == _RESERVATION_ID)
    .order_by(PAYMENTS.c.id)
)
_REFUNDS = (
    select(PAYMENT_METHODS.c.code, REFUNDS.c.reason, REFUNDS.c.amount)
    .select_from(REFUNDS.join(PAYMENT_METHODS, PAYMENT_METHODS.c.id == REFUNDS.c.payment_method_id))
    .where(REFUNDS.c.reservation_id == _RESERVATION_ID)
    .order_by(REFUNDS.c.id)
)


def reservation_view(db: Session, reservation_id: int) -> dict[str, Any]:
    """Everything the desk may see about one reservation, as stored.

    Write tools call it after `db.flush()` (Session.execute autoflushes before Core statements
    too, so the read sees every pending change either way).
    """
    return _reservation_view(
        db, db.execute(_RESERVATION_BY_ID, {"reservation_id": reservation_id}).one()
    )


def reservation_view_by_code(db: Session, code: str) -> dict[str, Any]:
    """The view of a booking code as the agent typed it; not_found like `get_reservation`."""
    norm = code.strip().upper()
    row = db.execute(_RESERVATION_BY_CODE, {"code": norm}).first()
    if row is None:
        raise no_such_reservation(norm)
    return _reservation_view(db, row)


def _reservation_view(db: Session, r: AnyRow) -> dict[str, Any]:
    key = {"reservation_id": r.id}
    seats: dict[int, dict[str, str]] = defaultdict(dict)
    for flight_id, seat_no, ticket in db.execute(_SEATS, key):
        seats[flight_id][ticket] = seat_no
    return {
        "reservation_code": r.code,
        "user_id": r.user_code,
        "status": r.status,
        "trip_type": r.trip_type,
        "fare_class": r.fare_class,
        "origin": r.origin,
        "destination": r.destination,
        "insurance": r.insurance,
        "created_at": r.created_at.isoformat(),
        "flights": [
            {**flight_view(s), "price_per_passenger": cents(s.price), "seats": seats.get(s.id, {})}
            for s in db.execute(_SEGMENTS, key)
        ],
        "passengers": [
            {
                "ticket_number": p.ticket_number,
                "first_name": p.first_name,
                "last_name": p.last_name,
                "date_of_birth": p.date_of_birth.isoformat(),
            }
            for p in db.execute(_PASSENGERS, key)
        ],
        "baggage": {
            "checked_bags": r.checked_bags or 0,
            "free_bags": r.free_bags or 0,
            "paid_bags": r.paid_bags or 0,
        },
        "payments": [
            {"payment_method_id": code, "purpose": purpose, "amount": cents(amount)}
            for code, purpose, amount in db.execute(_PAYMENTS, key)
        ],
        "refunds": [
            {"payment_method_id": code, "reason": reason, "amount": cents(amount)}
            for code, reason, amount in db.execute(_REFUNDS, key)
        ],
    }
