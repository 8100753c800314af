"""Write tools that modify a confirmed reservation: flights, cabin, passengers.

Every check runs before the first write, so a refused call changes nothing even before the
framework rolls its transaction back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.airline.itinerary import cabins_with_room, load_itinerary, refs_text
from envs.airline.models import PaymentMethod, Reservation, ReservationSegment
from envs.airline.ops import (
    FlightRef,
    cabin_of,
    cents,
    charge,
    money,
    owned_reservation,
    refund_to_methods,
    release_seats,
    require_not_flown,
    reservation_view,
    user_method,
)
from envs.airline.rules import CABIN_OF
from envs.airline.tools_booking import PassengerInfo


def settle(
    db: Session,
    r: Reservation,
    method_code: str | None,
    diff: float,
    now: datetime,
) -> PaymentMethod | None:
    """Charge a positive price difference to the named method; refund a negative one to the
    reservation's original payment methods."""
    diff = cents(diff)
    if diff > 0:
        if not method_code:
            raise ToolError(
                f"The change costs {money(diff)} more; a payment_method_id is required.",
                hint="Ask the member which of their payment methods pays the difference.",
                code="invalid_arguments",
            )
        method = user_method(r.user, method_code)
        charge(r, method, diff, "change", now)
        return method
    if diff < 0:
        refund_to_methods(db, r, -diff, "change", now)
    return None


class ChangeFlightsArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The booking code, e.g. 'Q7K2PX'.")
    flights: list[FlightRef] = Field(
        description="The complete new itinerary in travel order, unchanged flights included."
    )
    payment_method_id: str | None = Field(
        None,
        description="The member's payment method that pays a higher fare, e.g. "
        "'credit_card_1234567'; null when the new flights cost the same or less (a lower fare is "
        "refunded to the original payment method).",
    )


@tool
def change_flights(db: Session, args: ChangeFlightsArgs, ctx: ToolContext) -> dict[str, Any]:
    """Replace the flights of a reservation, keeping its origin, destination, trip type, fare
    class and passengers. New flights need seats left in the same fare class; flights kept keep
    the price paid, new ones cost today's fare.

    Not allowed for basic economy reservations, nor once any flight of the trip has departed.
    The fare difference for all passengers is charged to payment_method_id, or refunded to the
    original payment methods when the new flights are cheaper.
    """
    r = owned_reservation(db, args.reservation_code, args.user_id)
    if r.fare_class == "basic_economy":
        raise ToolError(
            f"Reservation {r.code} is basic economy: its flights cannot be changed.",
            hint="A basic economy reservation can have its cabin upgraded first (change_cabin); "
            "otherwise the flights stay as booked.",
            code="basic_economy_no_change",
        )
    require_not_flown(r, ctx.now, "changed")
    flights = load_itinerary(
        db,
        args.flights,
        origin=r.origin,
        destination=r.destination,
        round_trip=r.trip_type == "round_trip",
        now=ctx.now,
    )
    old = {s.flight_id: s for s in r.segments}
    if [f.id for f in flights] == [s.flight_id for s in r.segments]:
        raise ToolError(
            f"Reservation {r.code} already has exactly these flights.", code="invalid_arguments"
        )
    n = len(r.passengers)
    new_flights = [f for f in flights if f.id not in old]
    new_cabins = dict(
        zip(
            (f.id for f in new_flights),
            cabins_with_room(db, new_flights, r.fare_class, n),
            strict=True,
        )
    )
    prices = [old[f.id].price if f.id in old else new_cabins[f.id].price for f in flights]
    diff = (sum(prices) - sum(s.price for s in r.segments)) * n
    method = settle(db, r, args.payment_method_id, diff, ctx.now)
    dropped = {fid for fid in old if fid not in {f.id for f in flights}}
    for fid in dropped:
        cabin_of(db, old[fid].flight, r.fare_class).seats_left += n
    for cabin in new_cabins.values():
        cabin.seats_left -= n
    release_seats(db, r, dropped)
    # Update legs in place: (reservation, leg_no) is unique and inserts flush before deletes.
    segments = list(r.segments)
    for leg_no, (f, price) in enumerate(zip(flights, prices, strict=True), start=1):
        if leg_no <= len(segments):
            seg = segments[leg_no - 1]
            seg.flight_id, seg.price = f.id, price
        else:
            r.segments.append(ReservationSegment(leg_no=leg_no, flight_id=f.id, price=price))
    for seg in segments[len(flights) :]:
        db.delete(seg)
    db.flush()
    # Segments now point at other flights: reload them (and their flights) before the view.
    db.expire_all()
    return {
        "fare_difference": cents(diff),
        "paid_with": method.code if method else None,
        "new_flights": refs_text(args.flights),
        **reservation_view(db, r.id),
    }


class ChangeCabinArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The booking code, e.g. 'Q7K2PX'.")
    fare_class: Literal["basic_economy", "economy", "business"] = Field(
        description="The new fare class for every flight of the reservation."
    )
    payment_method_id: str | None = Field(
        None,
        description="The member's payment method that pays an upgrade; null for a downgrade "
        "(refunded to the original payment method).",
    )


@tool
def change_cabin(db: Session, args: ChangeCabinArgs, ctx: ToolContext) -> dict[str, Any]:
    """Change the fare class of every flight of a reservation (any fare class, basic economy
    included), before any flight has departed and with seats left in the new class.

    The difference between today's fares in the new class and the prices paid, for all
    passengers, is charged to payment_method_id (upgrade) or refunded to the original payment
    methods (downgrade). Moving between the economy and business cabins frees assigned seats.
    Checked bags already booked are kept as they are.
    """
    r = owned_reservation(db, args.reservation_code, args.user_id)
    require_not_flown(r, ctx.now, "changed")
    if args.fare_class == r.fare_class:
        raise ToolError(
            f"Reservation {r.code} already is {r.fare_class}.", code="invalid_arguments"
        )
    n = len(r.passengers)
    flights = [s.flight for s in r.segments]
    cabins = cabins_with_room(db, flights, args.fare_class, n)
    diff = sum(c.price - s.price for c, s in zip(cabins, r.segments, strict=True)) * n
    method = settle(db, r, args.payment_method_id, diff, ctx.now)
    for s, new in zip(r.segments, cabins, strict=True):
        cabin_of(db, s.flight, r.fare_class).seats_left += n
        new.seats_left -= n
        s.price = new.price
    if CABIN_OF[args.fare_class] != CABIN_OF[r.fare_class]:
        release_seats(db, r)
    r.fare_class = args.fare_class
    db.flush()
    return {
        "fare_difference": cents(diff),
        "paid_with": method.code if method else None,
        **reservation_view(db, r.id),
    }


class UpdatePassengersArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The booking code, e.g. 'Q7K2PX'.")
    passengers: list[PassengerInfo] = Field(
        description="Every passenger of the reservation, in ticket order, with corrected details."
    )


@tool
def update_passengers(db: Session, args: UpdatePassengersArgs, ctx: ToolContext) -> dict[str, Any]:
    """Correct passenger names or dates of birth (any fare class). The number of passengers
    cannot change: list every passenger in ticket order. Not after a flight has departed."""
    r = owned_reservation(db, args.reservation_code, args.user_id)
    require_not_flown(r, ctx.now, "changed")
    if len(args.passengers) != len(r.passengers):
        raise ToolError(
            f"Reservation {r.code} has {len(r.passengers)} passenger(s); list exactly that many.",
            hint="Passengers cannot be added or removed; a new booking is needed for that.",
            code="invalid_arguments",
        )
    dobs = [p.dob() for p in args.passengers]
    changed = False
    for pax, new, dob in zip(r.passengers, args.passengers, dobs, strict=True):
        values = (new.first_name, new.last_name, dob)
        if (pax.first_name, pax.last_name, pax.date_of_birth) != values:
            pax.first_name, pax.last_name, pax.date_of_birth = values
            changed = True
    if not changed:
        raise ToolError(
            f"The passengers of {r.code} already have exactly these details.",
            code="invalid_arguments",
        )
    db.flush()
    return reservation_view(db, r.id)
