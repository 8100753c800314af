"""Checking an itinerary (a list of dated flights) against a trip's route and the inventory."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.sdk.environment import ToolError
from envs.airline.models import Airport, Flight, FlightCabin
from envs.airline.ops import FlightRef, cabin_of, get_flight, has_left
from envs.airline.rules import MAX_CONNECTION_MINUTES, MIN_CONNECTION_MINUTES


def _describe(f: Flight) -> str:
    return f"{f.flight_number} on {f.flight_date.isoformat()}"


def bookable(flight: Flight, now: datetime) -> None:
    if flight.status == "cancelled":
        raise ToolError(
            f"Flight {_describe(flight)} is cancelled and cannot be booked.",
            hint="search_flights lists the bookable flights of that day.",
            code="flight_not_bookable",
        )
    if has_left(flight, now):
        raise ToolError(
            f"Flight {_describe(flight)} has already departed.", code="flight_not_bookable"
        )


def _connects(a: Flight, b: Flight) -> bool:
    gap = b.scheduled_departure - a.scheduled_arrival
    return timedelta(minutes=MIN_CONNECTION_MINUTES) <= gap


def load_itinerary(
    db: Session,
    refs: list[FlightRef],
    *,
    origin: Airport,
    destination: Airport,
    round_trip: bool,
    now: datetime,
) -> list[Flight]:
    """The flights, checked to fly origin -> destination (-> origin for a round trip)."""
    if not refs:
        raise ToolError("Name at least one flight.", code="invalid_arguments")
    if len(refs) > 4:
        raise ToolError("An itinerary has at most four flights.", code="invalid_arguments")
    flights = [get_flight(db, r.flight_number, r.date) for r in refs]
    if len({f.id for f in flights}) != len(flights):
        raise ToolError("The same flight is named twice.", code="invalid_arguments")
    for f in flights:
        bookable(f, now)
    route = " -> ".join([flights[0].origin.code, *(f.destination.code for f in flights)])
    wrong = ToolError(
        f"These flights fly {route}, which is not a "
        f"{'round trip' if round_trip else 'one-way trip'} {origin.code} -> {destination.code}"
        f"{' -> ' + origin.code if round_trip else ''}.",
        hint="List the flights in travel order; a connection needs at least 1 hour.",
        code="invalid_arguments",
    )
    if flights[0].origin_id != origin.id:
        raise wrong
    for a, b in zip(flights, flights[1:], strict=False):
        if a.destination_id != b.origin_id:
            raise wrong
        turnaround = a.destination_id == destination.id and round_trip
        if not turnaround and (
            not _connects(a, b)
            or b.scheduled_departure - a.scheduled_arrival
            > timedelta(minutes=MAX_CONNECTION_MINUTES)
        ):
            raise wrong
        if turnaround and not _connects(a, b):
            raise wrong
    stops = [f.destination_id for f in flights]
    if round_trip:
        if stops[-1] != origin.id or destination.id not in stops[:-1]:
            raise wrong
    elif stops[-1] != destination.id or origin.id in stops:
        raise wrong
    return flights


def cabins_with_room(
    db: Session, flights: list[Flight], fare_class: str, passengers: int
) -> list[FlightCabin]:
    cabins = [cabin_of(db, f, fare_class) for f in flights]
    for f, c in zip(flights, cabins, strict=True):
        if c.seats_left < passengers:
            raise ToolError(
                f"Flight {_describe(f)} has {c.seats_left} {fare_class} seat(s) left, "
                f"{passengers} needed.",
                hint="Offer another fare class or another flight (search_flights).",
                code="cabin_full",
            )
    return cabins


def refs_text(refs: list[FlightRef]) -> str:
    return ", ".join(f"{r.flight_number.upper()} {r.date}" for r in refs)
