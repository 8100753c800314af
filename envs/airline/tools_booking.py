"""Write tools that create or end a reservation: book and cancel.

Every check runs before the first write, so a refused call changes nothing even before the
framework rolls its transaction back.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any, Literal

from pydantic import Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.airline.itinerary import cabins_with_room, load_itinerary
from envs.airline.models import (
    Airport,
    Baggage,
    Passenger,
    PaymentMethod,
    Reservation,
    ReservationSegment,
)
from envs.airline.ops import (
    FlightRef,
    booking_code,
    cabin_of,
    cents,
    charge,
    get_user,
    money,
    net_paid,
    owned_reservation,
    refund,
    release_seats,
    require_not_flown,
    reservation_view,
    user_method,
)
from envs.airline.rules import (
    BAG_FEE,
    FREE_CANCEL_HOURS,
    INSURANCE_PER_PASSENGER,
    MAX_BAGS_PER_PASSENGER,
    MAX_PASSENGERS,
    free_bags,
)

FareClass = Literal["basic_economy", "economy", "business"]


class PassengerInfo(ToolArgs):
    first_name: str = Field(description="The passenger's first name, as on their ID.")
    last_name: str = Field(description="The passenger's last name, as on their ID.")
    date_of_birth: str = Field(description="The passenger's date of birth, YYYY-MM-DD.")

    def dob(self) -> date:
        try:
            return date.fromisoformat(self.date_of_birth)
        except ValueError:
            raise ToolError(
                f"{self.date_of_birth!r} is not a date of birth.",
                hint="Write dates as YYYY-MM-DD.",
                code="invalid_arguments",
            ) from None


class BookArgs(ToolArgs):
    user_id: str = Field(description="The member who books and pays, e.g. 'mia_chen_4821'.")
    trip_type: Literal["one_way", "round_trip"] = Field(description="'one_way' or 'round_trip'.")
    origin: str = Field(description="IATA code where the trip starts, e.g. 'SFO'.")
    destination: str = Field(description="IATA code of the trip's destination, e.g. 'JFK'.")
    fare_class: FareClass = Field(description="'basic_economy', 'economy' or 'business'.")
    flights: list[FlightRef] = Field(
        description="Every flight in travel order (outbound, then return for a round trip)."
    )
    passengers: list[PassengerInfo] = Field(description="One to five passengers.")
    insurance: bool = Field(description="Travel insurance, 30.00 per passenger.")
    checked_bags: int = Field(description="Checked bags for the whole reservation (0 or more).")
    payment_method_id: str = Field(
        description="The member's credit card or gift card paying the rest, e.g. "
        "'credit_card_1234567'."
    )
    certificate_id: str | None = Field(
        None, description="Optional travel certificate of the member, used first; null if none."
    )


def _airport(db: Session, code: str) -> Airport:
    airport = db.scalar(select(Airport).where(Airport.code == code.strip().upper()))
    if airport is None:
        raise ToolError(f"The airline does not fly to {code!r}.", code="not_found")
    return airport


@tool
def book_reservation(db: Session, args: BookArgs, ctx: ToolContext) -> dict[str, Any]:
    """Book a reservation for a member: 1-5 passengers, one fare class on every flight, seats
    left on each flight. Charges fares, optional insurance (30.00 per passenger) and checked bags
    beyond the member's free allowance (50.00 each). An optional travel certificate pays first;
    the rest goes to one credit card or gift card (a gift card must hold enough balance).

    Returns the new booking code. Seats are chosen afterwards with assign_seat.
    """
    user = get_user(db, args.user_id)
    n = len(args.passengers)
    if not 1 <= n <= MAX_PASSENGERS:
        raise ToolError(
            f"A reservation has 1 to {MAX_PASSENGERS} passengers, not {n}.",
            code="invalid_arguments",
        )
    if not 0 <= args.checked_bags <= MAX_BAGS_PER_PASSENGER * n:
        raise ToolError(
            f"Checked bags must be 0 to {MAX_BAGS_PER_PASSENGER * n}.", code="invalid_arguments"
        )
    dobs = [p.dob() for p in args.passengers]
    origin, destination = _airport(db, args.origin), _airport(db, args.destination)
    flights = load_itinerary(
        db,
        args.flights,
        origin=origin,
        destination=destination,
        round_trip=args.trip_type == "round_trip",
        now=ctx.now,
    )
    cabins = cabins_with_room(db, flights, args.fare_class, n)
    main = user_method(user, args.payment_method_id)
    if main.kind == "certificate":
        raise ToolError(
            "Pass a travel certificate as certificate_id, not payment_method_id.",
            code="invalid_arguments",
        )
    cert: PaymentMethod | None = None
    if args.certificate_id:
        cert = user_method(user, args.certificate_id)
        if cert.kind != "certificate":
            raise ToolError(f"{cert.code} is not a travel certificate.", code="invalid_arguments")
    allowance = free_bags(user.membership, args.fare_class, n)
    paid_bags = max(0, args.checked_bags - allowance)
    bills = [
        ("fare", cents(sum(c.price for c in cabins) * n)),
        ("insurance", INSURANCE_PER_PASSENGER * n if args.insurance else 0.0),
        ("baggage", BAG_FEE * paid_bags),
    ]
    existing = db.scalar(select(func.count()).where(Reservation.user_id == user.id)) or 0
    code = booking_code(db, user, f"{existing}|{flights[0].id}")
    r = Reservation(
        code=code,
        user_id=user.id,
        origin_id=origin.id,
        destination_id=destination.id,
        trip_type=args.trip_type,
        fare_class=args.fare_class,
        status="confirmed",
        insurance=args.insurance,
        created_at=ctx.now,
    )
    db.add(r)
    for leg_no, (f, c) in enumerate(zip(flights, cabins, strict=True), start=1):
        r.segments.append(ReservationSegment(leg_no=leg_no, flight_id=f.id, price=c.price))
        c.seats_left -= n
    for pos, (p, dob) in enumerate(zip(args.passengers, dobs, strict=True), start=1):
        r.passengers.append(
            Passenger(
                ticket_number=f"{code}-{pos}",
                position=pos,
                first_name=p.first_name,
                last_name=p.last_name,
                date_of_birth=dob,
            )
        )
    r.baggage = Baggage(
        checked_bags=args.checked_bags, free_bags=args.checked_bags - paid_bags, paid_bags=paid_bags
    )
    credit = (cert.balance or 0.0) if cert else 0.0
    for purpose, amount in bills:
        from_cert = cents(min(credit, amount))
        if cert and from_cert > 0:
            charge(r, cert, from_cert, purpose, ctx.now)
            credit = cents(credit - from_cert)
        charge(r, main, amount - from_cert, purpose, ctx.now)
    db.flush()
    total = cents(sum(a for _, a in bills))
    return {"reservation_code": code, "total_charged": total, **reservation_view(db, r.id)}


class CancelArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The booking code to cancel, e.g. 'Q7K2PX'.")
    reason: Literal["change_of_plan", "airline_cancelled_flight", "other"] = Field(
        description="Why: 'change_of_plan', 'airline_cancelled_flight' or 'other'."
    )


def refundable_because(r: Reservation, now: Any) -> str | None:
    """Why the policy allows a refunded cancellation, or None if it does not."""
    if now - r.created_at <= timedelta(hours=FREE_CANCEL_HOURS):
        return f"booked within the last {FREE_CANCEL_HOURS} hours"
    if any(s.flight.status == "cancelled" for s in r.segments):
        return "the airline cancelled a flight"
    if r.fare_class == "business":
        return "business fare"
    if r.insurance:
        return "travel insurance"
    return None


@tool
def cancel_reservation(db: Session, args: CancelArgs, ctx: ToolContext) -> dict[str, Any]:
    """Cancel a whole reservation and refund every payment to the method it came from.

    Allowed only before any of its flights has departed, and only if it was booked within the
    last 24 hours, the airline cancelled one of its flights, the fare is business, or it has
    travel insurance. Otherwise it cannot be cancelled.
    """
    r = owned_reservation(db, args.reservation_code, args.user_id)
    require_not_flown(r, ctx.now, "cancelled")
    if args.reason == "airline_cancelled_flight" and not any(
        s.flight.status == "cancelled" for s in r.segments
    ):
        raise ToolError(
            f"No flight of reservation {r.code} was cancelled by the airline.",
            hint="Use the reason the member gives, e.g. 'change_of_plan'.",
            code="invalid_arguments",
        )
    if refundable_because(r, ctx.now) is None:
        raise ToolError(
            f"Reservation {r.code} ({r.fare_class}, no insurance, booked "
            f"{r.created_at.isoformat()}) cannot be cancelled: the 24-hour free cancellation has "
            "passed and no other rule allows it.",
            hint="Only reservations booked within 24 hours, with a flight cancelled by the "
            "airline, in business, or with travel insurance can be cancelled.",
            code="cancellation_not_allowed",
        )
    refunded = 0.0
    for method_id, amount in net_paid(r).items():
        refund(db, r, method_id, amount, "cancellation", ctx.now)
        refunded += amount
    for s in r.segments:
        cabin_of(db, s.flight, r.fare_class).seats_left += len(r.passengers)
    release_seats(db, r)
    r.status, r.cancel_reason = "cancelled", args.reason
    db.flush()
    # The output states what happened, not which rule allowed it: the agent checks the rule.
    return {"refunded": money(refunded), **reservation_view(db, r.id)}
