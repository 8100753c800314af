"""Write tools for extras: checked bags, seat assignments, compensation certificates."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.airline.models import Baggage, Certificate, PaymentMethod, Seat
from envs.airline.ops import (
    cents,
    charge,
    get_flight,
    get_reservation,
    get_user,
    has_left,
    money,
    owned_reservation,
    require_not_flown,
    reservation_view,
    user_method,
)
from envs.airline.rules import (
    BAG_FEE,
    CABIN_OF,
    COMPENSATION,
    COMPENSATION_TIERS,
    MAX_BAGS_PER_PASSENGER,
    free_bags,
)


class AddBaggageArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The booking code, e.g. 'Q7K2PX'.")
    extra_bags: int = Field(description="How many checked bags to add (1 or more).")
    payment_method_id: str | None = Field(
        None,
        description="The member's payment method for bags beyond the free allowance; null if "
        "every added bag is free.",
    )


@tool
def add_baggage(db: Session, args: AddBaggageArgs, ctx: ToolContext) -> dict[str, Any]:
    """Add checked bags to a reservation (bags cannot be removed). Each passenger travels with a
    free allowance set by the booking member's tier and the fare class (regular 0/1/2, silver
    1/2/3, gold 2/3/4 for basic economy/economy/business); every bag beyond it costs 50.00,
    charged to payment_method_id. At most 5 bags per passenger; not after departure.
    """
    r = owned_reservation(db, args.reservation_code, args.user_id)
    require_not_flown(r, ctx.now, "changed")
    if args.extra_bags < 1:
        raise ToolError(
            "extra_bags must be at least 1; bags cannot be removed.", code="invalid_arguments"
        )
    n = len(r.passengers)
    bags = r.baggage or Baggage(checked_bags=0, free_bags=0, paid_bags=0)
    total = bags.checked_bags + args.extra_bags
    if total > MAX_BAGS_PER_PASSENGER * n:
        raise ToolError(
            f"At most {MAX_BAGS_PER_PASSENGER * n} checked bags fit this reservation "
            f"({n} passenger(s)); it already has {bags.checked_bags}.",
            code="baggage_rules",
        )
    allowance = free_bags(r.user.membership, r.fare_class, n)
    free = min(total, max(allowance, bags.free_bags))
    paid = total - free
    fee = cents((paid - bags.paid_bags) * BAG_FEE)
    if fee > 0:
        if not args.payment_method_id:
            raise ToolError(
                f"{paid - bags.paid_bags} of these bags are beyond the free allowance of "
                f"{allowance}: {money(fee)} is due, so a payment_method_id is required.",
                hint="Tell the member the fee and ask which payment method to use.",
                code="invalid_arguments",
            )
        charge(r, user_method(r.user, args.payment_method_id), fee, "baggage", ctx.now)
    bags.checked_bags, bags.free_bags, bags.paid_bags = total, free, paid
    if r.baggage is None:
        r.baggage = bags
    db.flush()
    return {"fee": cents(fee), "free_allowance": allowance, **reservation_view(db, r.id)}


class AssignSeatArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The booking code, e.g. 'Q7K2PX'.")
    ticket_number: str = Field(description="The passenger's ticket number, e.g. 'Q7K2PX-1'.")
    flight_number: str = Field(description="A flight of the reservation, e.g. 'SG101'.")
    date: str = Field(description="That flight's departure date, YYYY-MM-DD.")
    seat_no: str = Field(description="The free seat wanted, e.g. '12A'.")


@tool
def assign_seat(db: Session, args: AssignSeatArgs, ctx: ToolContext) -> dict[str, Any]:
    """Give a passenger a seat on one flight of their reservation, or move them to another seat.
    The seat must be free and in the cabin of the fare class (economy cabin for economy, business
    cabin for business). Basic economy seats are assigned at check-in and cannot be chosen.
    Free of charge; not after the flight has departed.
    """
    r = owned_reservation(db, args.reservation_code, args.user_id)
    if r.fare_class == "basic_economy":
        raise ToolError(
            f"Reservation {r.code} is basic economy: seats are assigned at check-in "
            "and cannot be chosen.",
            hint="An upgrade to economy (change_cabin) allows choosing seats.",
            code="seat_not_allowed",
        )
    flight = get_flight(db, args.flight_number, args.date)
    if flight.id not in {s.flight_id for s in r.segments}:
        raise ToolError(
            f"Flight {flight.flight_number} on {args.date} is not part of reservation {r.code}.",
            code="invalid_arguments",
        )
    if has_left(flight, ctx.now):
        raise ToolError(
            f"Flight {flight.flight_number} on {args.date} has already departed.",
            code="already_departed",
        )
    ticket = args.ticket_number.strip().upper()
    pax = next((p for p in r.passengers if p.ticket_number == ticket), None)
    if pax is None:
        listed = ", ".join(p.ticket_number for p in r.passengers)
        raise ToolError(
            f"Reservation {r.code} has no ticket {ticket}.",
            hint=f"Its tickets are: {listed}.",
            code="not_found",
        )
    seat_no = args.seat_no.strip().upper()
    seat = db.scalar(select(Seat).where(Seat.flight_id == flight.id, Seat.seat_no == seat_no))
    if seat is None:
        raise ToolError(
            f"Flight {flight.flight_number} has no seat {seat_no}.",
            hint="get_seat_map lists the free seats of a cabin.",
            code="not_found",
        )
    cabin = CABIN_OF[r.fare_class]
    if seat.cabin != cabin:
        raise ToolError(
            f"Seat {seat_no} is in the {seat.cabin} cabin; a {r.fare_class} "
            f"passenger sits in the {cabin} cabin.",
            hint="Pick a seat of the same cabin (get_seat_map), or change the cabin first.",
            code="seat_not_allowed",
        )
    if seat.passenger_id == pax.id:
        raise ToolError(f"{ticket} already sits in {seat_no}.", code="invalid_arguments")
    if seat.passenger_id is not None:
        raise ToolError(
            f"Seat {seat_no} on {flight.flight_number} is taken.",
            hint="get_seat_map lists the free seats.",
            code="seat_not_allowed",
        )
    old = db.scalar(select(Seat).where(Seat.flight_id == flight.id, Seat.passenger_id == pax.id))
    if old is not None:
        old.passenger_id = None
        db.flush()  # free the old seat first: one seat per passenger and flight is unique
    seat.passenger_id = pax.id
    db.flush()
    return {
        "ticket_number": ticket,
        "flight_number": flight.flight_number,
        "date": args.date,
        "seat_no": seat_no,
        "previous_seat": old.seat_no if old else None,
    }


class CompensationArgs(ToolArgs):
    user_id: str = Field(description="The member's user id; must own the reservation.")
    reservation_code: str = Field(description="The reservation hit by the delay or cancellation.")


@tool
def issue_compensation_certificate(
    db: Session, args: CompensationArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Issue a travel certificate to a member whose reservation has a flight the airline
    cancelled (100.00 per passenger) or delayed (50.00 per passenger). Only for silver or gold
    members, business fares or insured reservations; at most one per reservation. The amount is
    computed here. Issue it only when the member complains about the disruption.
    """
    user = get_user(db, args.user_id)
    r = get_reservation(db, args.reservation_code)
    if r.user_id != user.id:
        raise ToolError(
            f"Reservation {r.code} does not belong to member {user.user_code}.", code="other_member"
        )
    statuses = {s.flight.status for s in r.segments}
    what = "cancelled" if "cancelled" in statuses else "delayed" if "delayed" in statuses else None
    if what is None:
        raise ToolError(
            f"No flight of reservation {r.code} was delayed or cancelled; no compensation is due.",
            code="not_eligible_compensation",
        )
    if not (user.membership in COMPENSATION_TIERS or r.fare_class == "business" or r.insurance):
        raise ToolError(
            f"Member {user.user_code} is a {user.membership} member and reservation {r.code} is "
            f"{r.fare_class} without insurance: no compensation certificate is allowed.",
            hint="Certificates are only for silver/gold members, business fares or insured trips.",
            code="not_eligible_compensation",
        )
    if db.scalar(select(Certificate.id).where(Certificate.reservation_id == r.id)) is not None:
        raise ToolError(
            f"A compensation certificate was already issued for {r.code}.",
            code="compensation_already_issued",
        )
    amount = cents(COMPENSATION[what] * len(r.passengers))
    code = f"certificate_{r.code.lower()}"
    method = PaymentMethod(code=code, user_id=user.id, kind="certificate", balance=amount)
    db.add(method)
    db.flush()
    db.add(
        Certificate(
            code=code,
            user_id=user.id,
            reservation_id=r.id,
            payment_method_id=method.id,
            reason=f"flight_{what}",
            amount=amount,
            issued_at=ctx.now,
        )
    )
    db.flush()
    return {"certificate_id": code, "amount": amount, "reason": f"flight_{what}"}
