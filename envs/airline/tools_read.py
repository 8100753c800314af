"""Read-only tools: find members, look at reservations, airports, flights and seat maps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import Field
from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.airline.models import Airport
from envs.airline.ops import (
    AIRPORTS,
    FLIGHT_CABINS,
    FLIGHT_COLUMNS,
    FLIGHT_JOIN,
    FLIGHTS,
    PAYMENT_METHODS,
    RESERVATIONS,
    SEATS,
    USERS,
    cents,
    flight_row,
    flight_view,
    has_left,
    no_such_user,
    parse_date,
    reservation_view_by_code,
)
from envs.airline.rules import MAX_CONNECTION_MINUTES, MIN_CONNECTION_MINUTES

# Core, not ORM entity loads: hot reads; see docs/performance.md. Built once, run with values.
_USER_BY_EMAIL = select(USERS.c.user_code, USERS.c.first_name, USERS.c.last_name).where(
    func.lower(USERS.c.email) == bindparam("email")
)
_USER_BY_CODE = select(
    USERS.c.id,
    USERS.c.user_code,
    USERS.c.first_name,
    USERS.c.last_name,
    USERS.c.email,
    USERS.c.date_of_birth,
    USERS.c.membership,
).where(USERS.c.user_code == bindparam("user_code"))
_USER_METHODS = (
    select(
        PAYMENT_METHODS.c.code,
        PAYMENT_METHODS.c.kind,
        PAYMENT_METHODS.c.brand,
        PAYMENT_METHODS.c.last4,
        PAYMENT_METHODS.c.balance,
    )
    .where(PAYMENT_METHODS.c.user_id == bindparam("user_id"))
    .order_by(PAYMENT_METHODS.c.id)
)
_USER_RESERVATIONS = (
    select(RESERVATIONS.c.code, RESERVATIONS.c.status)
    .where(RESERVATIONS.c.user_id == bindparam("user_id"))
    .order_by(RESERVATIONS.c.created_at.desc(), RESERVATIONS.c.id.desc())
)


class FindUserArgs(ToolArgs):
    email: str = Field(description="The email address the member gives, e.g. 'jane@example.com'.")


@tool(read_only=True)
def find_user_by_email(db: Session, args: FindUserArgs, ctx: ToolContext) -> dict[str, Any]:
    """Find a member's user id by email address (exact, case-insensitive).

    Use it when the member does not know their user id; every other tool takes the user id.
    """
    user = db.execute(_USER_BY_EMAIL, {"email": args.email.lower()}).first()
    if user is None:
        raise ToolError(
            f"No member has the email {args.email!r}.",
            hint="Check the spelling or ask the member for their user id.",
            code="not_found",
        )
    return {"user_id": user.user_code, "first_name": user.first_name, "last_name": user.last_name}


class UserArgs(ToolArgs):
    user_id: str = Field(description="The member's user id, e.g. 'mia_chen_4821'.")


@tool(read_only=True)
def get_user_details(db: Session, args: UserArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show a member's profile: membership tier, payment methods (with gift card and certificate
    balances) and booking codes of their reservations (newest first) with their status."""
    u = db.execute(_USER_BY_CODE, {"user_code": args.user_id.strip().lower()}).first()
    if u is None:
        raise no_such_user(args.user_id)
    key = {"user_id": u.id}
    return {
        "user_id": u.user_code,
        "first_name": u.first_name,
        "last_name": u.last_name,
        "email": u.email,
        "date_of_birth": u.date_of_birth.isoformat(),
        "membership": u.membership,
        "payment_methods": [
            {
                "payment_method_id": m.code,
                "kind": m.kind,
                **({"brand": m.brand, "last4": m.last4} if m.kind == "credit_card" else {}),
                **({"balance": cents(m.balance)} if m.balance is not None else {}),
            }
            for m in db.execute(_USER_METHODS, key)
        ],
        "reservations": [
            {"reservation_code": c, "status": s} for c, s in db.execute(_USER_RESERVATIONS, key)
        ],
    }


class ReservationArgs(ToolArgs):
    reservation_code: str = Field(description="The six-character booking code, e.g. 'Q7K2PX'.")


@tool(read_only=True)
def get_reservation_details(db: Session, args: ReservationArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show one reservation: owner, status, fare class, insurance, flights (status, price, seats),
    passengers with ticket numbers, checked bags, payments and refunds.

    Check that user_id is the member you are talking to before discussing or changing it.
    """
    return reservation_view_by_code(db, args.reservation_code)


class NoArgs(ToolArgs):
    pass


@tool(read_only=True)
def list_airports(db: Session, args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the airports the airline flies to: IATA code, name and city."""
    rows = db.scalars(select(Airport).order_by(Airport.code))
    return {"airports": [{"code": a.code, "name": a.name, "city": a.city} for a in rows]}


class SearchArgs(ToolArgs):
    origin: str = Field(description="IATA code of the departure airport, e.g. 'SFO'.")
    destination: str = Field(description="IATA code of the arrival airport, e.g. 'JFK'.")
    date: str = Field(description="Departure date, YYYY-MM-DD.")
    include_one_stop: bool = Field(
        False, description="Also list one-stop itineraries (two flights with a connection)."
    )


_AIRPORT_ID = select(AIRPORTS.c.id).where(AIRPORTS.c.code == bindparam("code"))


def _airport_id(db: Session, code: str) -> int:
    airport_id = db.execute(_AIRPORT_ID, {"code": code.strip().upper()}).scalar()
    if airport_id is None:
        raise ToolError(
            f"The airline does not fly to {code!r}.",
            hint="list_airports lists every airport code.",
            code="not_found",
        )
    return airport_id


# Core, not ORM entities and a cabin query per flight: a hot read; see docs/performance.md.
_DIRECT = (
    select(*FLIGHT_COLUMNS)
    .select_from(FLIGHT_JOIN)
    .where(FLIGHTS.c.origin_id == bindparam("origin_id"))
    .where(FLIGHTS.c.destination_id == bindparam("destination_id"))
    .where(FLIGHTS.c.flight_date == bindparam("day"))
    .order_by(FLIGHTS.c.scheduled_departure)
)
# Pairs of flights origin -> X -> destination, the first leaving on the day (ids only: the few
# that connect are then read with _FLIGHTS_BY_ID).
_SECOND = FLIGHTS.alias("second")
_ONE_STOP = (
    select(FLIGHTS.c.id, _SECOND.c.id.label("second_id"))
    .select_from(FLIGHTS.join(_SECOND, _SECOND.c.origin_id == FLIGHTS.c.destination_id))
    .where(FLIGHTS.c.origin_id == bindparam("origin_id"))
    .where(_SECOND.c.destination_id == bindparam("destination_id"))
    .where(FLIGHTS.c.flight_date == bindparam("day"))
    .order_by(FLIGHTS.c.scheduled_departure, _SECOND.c.scheduled_departure)
)
_FLIGHTS_BY_ID = (
    select(*FLIGHT_COLUMNS)
    .select_from(FLIGHT_JOIN)
    .where(FLIGHTS.c.id.in_(bindparam("ids", expanding=True)))
)
# In id order: the order the cabins were read in before (by flight_id on its index).
_FARES = (
    select(
        FLIGHT_CABINS.c.flight_id,
        FLIGHT_CABINS.c.fare_class,
        FLIGHT_CABINS.c.price,
        FLIGHT_CABINS.c.seats_left,
    )
    .where(FLIGHT_CABINS.c.flight_id.in_(bindparam("ids", expanding=True)))
    .order_by(FLIGHT_CABINS.c.id)
)


_CONNECTION = (timedelta(minutes=MIN_CONNECTION_MINUTES), timedelta(minutes=MAX_CONNECTION_MINUTES))


def _connects(a: AnyRow, b: AnyRow) -> bool:
    return _CONNECTION[0] <= b.scheduled_departure - a.scheduled_arrival <= _CONNECTION[1]


def _one_stop_pairs(db: Session, route: dict[str, Any]) -> list[tuple[AnyRow, AnyRow]]:
    """Every (first, second) flight pair of the route via one stop, in departure order."""
    ids = db.execute(_ONE_STOP, route).all()
    if not ids:
        return []
    wanted = sorted({flight_id for pair in ids for flight_id in pair})
    legs = {f.id: f for f in db.execute(_FLIGHTS_BY_ID, {"ids": wanted})}
    return [(legs[first], legs[second]) for first, second in ids]


def _offers(db: Session, flights: list[AnyRow]) -> dict[int, dict[str, Any]]:
    """Flight id -> the flight's view with the price and seats left of each fare class."""
    offers = {f.id: {**flight_view(f), "fares": {}} for f in flights}
    if offers:
        for c in db.execute(_FARES, {"ids": list(offers)}):
            offers[c.flight_id]["fares"][c.fare_class] = {
                "price": cents(c.price),
                "seats_left": c.seats_left,
            }
    return offers


@tool(read_only=True)
def search_flights(db: Session, args: SearchArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search bookable flights from one airport to another on a date, with the price and seats
    left of each fare class (basic_economy, economy, business). Prices are per passenger.

    Cancelled and departed flights are not bookable and are not listed. With include_one_stop,
    also lists two-flight itineraries whose connection is 1 to 6 hours.
    """
    route = {
        "origin_id": _airport_id(db, args.origin),
        "destination_id": _airport_id(db, args.destination),
        "day": parse_date(args.date),
    }

    def bookable(f: AnyRow) -> bool:
        return f.status in ("scheduled", "delayed") and not has_left(f, ctx.now)

    direct = [f for f in db.execute(_DIRECT, route) if bookable(f)]
    candidates = _one_stop_pairs(db, route) if args.include_one_stop else []
    pairs = [(a, b) for a, b in candidates if bookable(a) and bookable(b) and _connects(a, b)]
    offers = _offers(db, direct + [f for pair in pairs for f in pair])
    result: dict[str, Any] = {"direct": [offers[f.id] for f in direct]}
    if args.include_one_stop:
        result["one_stop"] = [{"flights": [offers[a.id], offers[b.id]]} for a, b in pairs]
    return result


class FlightArgs(ToolArgs):
    flight_number: str = Field(description="The flight number, e.g. 'SG101'.")
    date: str = Field(description="The departure date, YYYY-MM-DD.")


@tool(read_only=True)
def get_flight_status(db: Session, args: FlightArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show a dated flight's schedule and status (scheduled, delayed with the delay in minutes,
    cancelled, departed)."""
    return flight_view(flight_row(db, args.flight_number, args.date))


class SeatMapArgs(ToolArgs):
    flight_number: str = Field(description="The flight number, e.g. 'SG101'.")
    date: str = Field(description="The departure date, YYYY-MM-DD.")
    cabin: Literal["economy", "business"] = Field(
        description="Which cabin's seats to list: 'economy' (also basic economy) or 'business'."
    )


# Core, not ORM: a hot read; see docs/performance.md.
_FREE_SEATS = (
    select(SEATS.c.seat_no)
    .where(SEATS.c.flight_id == bindparam("flight_id"), SEATS.c.cabin == bindparam("cabin"))
    .where(SEATS.c.passenger_id.is_(None))
    .order_by(SEATS.c.id)
)


@tool(read_only=True)
def get_seat_map(db: Session, args: SeatMapArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the free seats of one cabin of a dated flight (e.g. '12A'; A and F are windows)."""
    flight = flight_row(db, args.flight_number, args.date)
    free = db.scalars(_FREE_SEATS, {"flight_id": flight.id, "cabin": args.cabin}).all()
    return {
        "flight_number": flight.flight_number,
        "date": flight.flight_date.isoformat(),
        "cabin": args.cabin,
        "free_seats": list(free),
    }
