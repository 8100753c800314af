"""The airline's schema: airports, flights and their seat inventory, members, reservations and
everything the reservation desk can do to them (payments, refunds, bags, seats, certificates).

Money is `Numeric(12, 2)` read back as float (tools round to cents before writing). Datetimes are
naive UTC. Every constraint is named so Alembic batch migrations can address it on SQLite.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.sdk.models import DeclarativeBase, Money, make_metadata, one_of

FARE_CLASSES = ("basic_economy", "economy", "business")
CABINS = ("economy", "business")
FLIGHT_STATUSES = ("scheduled", "delayed", "cancelled", "departed")
TIERS = ("regular", "silver", "gold")
METHOD_KINDS = ("credit_card", "gift_card", "certificate")
CANCEL_REASONS = ("change_of_plan", "airline_cancelled_flight", "other")


class Base(DeclarativeBase):
    metadata = make_metadata()


def _airport_label(context: Any) -> str:
    row = context.get_current_parameters()
    return f"{row['city']} ({row['code']})"


class Airport(Base):
    __tablename__ = "airports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(3), unique=True, index=True)  # IATA, e.g. "SFO"
    name: Mapped[str] = mapped_column(String(80))
    city: Mapped[str] = mapped_column(String(60))
    # Added by the airline branch's second migration, backfilled from city and code (same rule).
    label: Mapped[str] = mapped_column(String(70), default=_airport_label)


class Flight(Base):
    """One dated departure of a flight number (SG101 on 2026-05-12)."""

    __tablename__ = "flights"
    __table_args__ = (
        CheckConstraint(one_of("status", FLIGHT_STATUSES), name="status"),
        CheckConstraint("origin_id != destination_id", name="distinct_airports"),
        CheckConstraint("scheduled_arrival > scheduled_departure", name="arrives_after_departure"),
        CheckConstraint("delay_minutes >= 0", name="delay_nonnegative"),
        UniqueConstraint("flight_number", "flight_date", name="number_date"),
        Index("ix_flights_route_date", "origin_id", "destination_id", "flight_date"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flight_number: Mapped[str] = mapped_column(String(8))
    flight_date: Mapped[date] = mapped_column(Date)
    origin_id: Mapped[int] = mapped_column(ForeignKey("airports.id"))
    destination_id: Mapped[int] = mapped_column(ForeignKey("airports.id"), index=True)
    scheduled_departure: Mapped[datetime] = mapped_column(DateTime)
    scheduled_arrival: Mapped[datetime] = mapped_column(DateTime)
    status: Mapped[str] = mapped_column(String(10), default="scheduled")
    delay_minutes: Mapped[int] = mapped_column(Integer, default=0)

    origin: Mapped[Airport] = relationship(foreign_keys=[origin_id])
    destination: Mapped[Airport] = relationship(foreign_keys=[destination_id])
    cabins: Mapped[list[FlightCabin]] = relationship(
        back_populates="flight", order_by="FlightCabin.id"
    )


class FlightCabin(Base):
    """Sellable inventory and price of one fare class on one flight."""

    __tablename__ = "flight_cabins"
    __table_args__ = (
        CheckConstraint(one_of("fare_class", FARE_CLASSES), name="fare_class"),
        CheckConstraint("price > 0", name="price_positive"),
        CheckConstraint("seats_left >= 0 AND seats_left <= seats_total", name="seats_in_range"),
        UniqueConstraint("flight_id", "fare_class", name="flight_fare"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id"), index=True)
    fare_class: Mapped[str] = mapped_column(String(14))
    price: Mapped[float] = mapped_column(Money)
    seats_total: Mapped[int] = mapped_column(Integer)
    seats_left: Mapped[int] = mapped_column(Integer)

    flight: Mapped[Flight] = relationship(back_populates="cabins")


class Seat(Base):
    """One physical seat of a flight's seat map; `passenger_id` set when it is assigned."""

    __tablename__ = "seats"
    __table_args__ = (
        CheckConstraint(one_of("cabin", CABINS), name="cabin"),
        UniqueConstraint("flight_id", "seat_no", name="flight_seat"),
        # A passenger holds at most one seat per flight.
        UniqueConstraint("flight_id", "passenger_id", name="flight_passenger"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id"), index=True)
    seat_no: Mapped[str] = mapped_column(String(4))
    cabin: Mapped[str] = mapped_column(String(10))
    passenger_id: Mapped[int | None] = mapped_column(ForeignKey("passengers.id"), index=True)


class User(Base):
    """A member of the airline's loyalty programme; the tier sets the free baggage allowance."""

    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint(one_of("membership", TIERS), name="membership"),
        Index("ix_users_last_first", "last_name", "first_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The id members quote, e.g. "mia_chen_4821".
    user_code: Mapped[str] = mapped_column(String(40), unique=True, index=True)
    email: Mapped[str] = mapped_column(String(120), unique=True, index=True)
    first_name: Mapped[str] = mapped_column(String(60))
    last_name: Mapped[str] = mapped_column(String(60))
    date_of_birth: Mapped[date] = mapped_column(Date)
    membership: Mapped[str] = mapped_column(String(10), default="regular")
    created_at: Mapped[datetime] = mapped_column(DateTime)

    payment_methods: Mapped[list[PaymentMethod]] = relationship(order_by="PaymentMethod.id")


class PaymentMethod(Base):
    __tablename__ = "payment_methods"
    __table_args__ = (
        CheckConstraint(one_of("kind", METHOD_KINDS), name="kind"),
        CheckConstraint("balance IS NULL OR balance >= 0", name="balance_nonnegative"),
        # Cards carry brand/last4 and no balance; gift cards and certificates carry a balance.
        CheckConstraint(
            "(kind = 'credit_card' AND balance IS NULL AND last4 IS NOT NULL)"
            " OR (kind != 'credit_card' AND balance IS NOT NULL)",
            name="kind_fields",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The id the member and the agent use, e.g. "gift_card_1234567".
    code: Mapped[str] = mapped_column(String(40), unique=True, index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(12))
    brand: Mapped[str | None] = mapped_column(String(20))
    last4: Mapped[str | None] = mapped_column(String(4))
    balance: Mapped[float | None] = mapped_column(Money)


class Reservation(Base):
    __tablename__ = "reservations"
    __table_args__ = (
        CheckConstraint(one_of("trip_type", ("one_way", "round_trip")), name="trip_type"),
        CheckConstraint(one_of("fare_class", FARE_CLASSES), name="fare_class"),
        CheckConstraint(one_of("status", ("confirmed", "cancelled")), name="status"),
        CheckConstraint(
            "cancel_reason IS NULL OR " + one_of("cancel_reason", CANCEL_REASONS),
            name="cancel_reason",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Six-character booking code, e.g. "Q7K2PX"; deterministic for bookings made by the tools.
    code: Mapped[str] = mapped_column(String(6), unique=True, index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    origin_id: Mapped[int] = mapped_column(ForeignKey("airports.id"))
    destination_id: Mapped[int] = mapped_column(ForeignKey("airports.id"))
    trip_type: Mapped[str] = mapped_column(String(10))
    fare_class: Mapped[str] = mapped_column(String(14))
    status: Mapped[str] = mapped_column(String(10), default="confirmed")
    insurance: Mapped[bool] = mapped_column(Boolean, default=False)
    cancel_reason: Mapped[str | None] = mapped_column(String(30))
    created_at: Mapped[datetime] = mapped_column(DateTime)

    user: Mapped[User] = relationship()
    origin: Mapped[Airport] = relationship(foreign_keys=[origin_id])
    destination: Mapped[Airport] = relationship(foreign_keys=[destination_id])
    segments: Mapped[list[ReservationSegment]] = relationship(
        back_populates="reservation", order_by="ReservationSegment.leg_no"
    )
    passengers: Mapped[list[Passenger]] = relationship(order_by="Passenger.position")
    payments: Mapped[list[Payment]] = relationship(order_by="Payment.id")
    refunds: Mapped[list[Refund]] = relationship(order_by="Refund.id")
    baggage: Mapped[Baggage | None] = relationship()


class ReservationSegment(Base):
    """One flight of a reservation, with the per-passenger fare paid for it."""

    __tablename__ = "reservation_segments"
    __table_args__ = (
        CheckConstraint("price >= 0", name="price_nonnegative"),
        UniqueConstraint("reservation_id", "leg_no", name="reservation_leg"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), index=True)
    leg_no: Mapped[int] = mapped_column(Integer)
    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id"), index=True)
    price: Mapped[float] = mapped_column(Money)

    reservation: Mapped[Reservation] = relationship(back_populates="segments")
    flight: Mapped[Flight] = relationship()


class Passenger(Base):
    __tablename__ = "passengers"
    __table_args__ = (UniqueConstraint("reservation_id", "position", name="reservation_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # "<booking code>-<position>", e.g. "Q7K2PX-1": stable when a name is corrected.
    ticket_number: Mapped[str] = mapped_column(String(10), unique=True, index=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    first_name: Mapped[str] = mapped_column(String(60))
    last_name: Mapped[str] = mapped_column(String(60))
    date_of_birth: Mapped[date] = mapped_column(Date)


class Payment(Base):
    """One charge to a payment method (fare, insurance, bags, a change's price difference)."""

    __tablename__ = "payments"
    __table_args__ = (
        CheckConstraint(
            one_of("purpose", ("fare", "insurance", "baggage", "change")), name="purpose"
        ),
        CheckConstraint("amount > 0", name="amount_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), index=True)
    payment_method_id: Mapped[int] = mapped_column(ForeignKey("payment_methods.id"), index=True)
    purpose: Mapped[str] = mapped_column(String(10))
    amount: Mapped[float] = mapped_column(Money)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    payment_method: Mapped[PaymentMethod] = relationship()


class Refund(Base):
    """Money going back to the payment method it came from (cancellation, cheaper change)."""

    __tablename__ = "refunds"
    __table_args__ = (
        CheckConstraint(one_of("reason", ("cancellation", "change")), name="reason"),
        CheckConstraint("amount > 0", name="amount_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), index=True)
    payment_method_id: Mapped[int] = mapped_column(ForeignKey("payment_methods.id"), index=True)
    reason: Mapped[str] = mapped_column(String(14))
    amount: Mapped[float] = mapped_column(Money)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    payment_method: Mapped[PaymentMethod] = relationship()


class Baggage(Base):
    """Checked bags of a reservation: how many, how many free (allowance), how many paid."""

    __tablename__ = "baggage"
    __table_args__ = (
        CheckConstraint("checked_bags = free_bags + paid_bags", name="bags_add_up"),
        CheckConstraint("free_bags >= 0 AND paid_bags >= 0", name="bags_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), unique=True)
    checked_bags: Mapped[int] = mapped_column(Integer)
    free_bags: Mapped[int] = mapped_column(Integer)
    paid_bags: Mapped[int] = mapped_column(Integer)


class Certificate(Base):
    """A compensation certificate issued to a member; its balance lives in `payment_methods`."""

    __tablename__ = "certificates"
    __table_args__ = (
        CheckConstraint(one_of("reason", ("flight_delayed", "flight_cancelled")), name="reason"),
        CheckConstraint("amount > 0", name="amount_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(40), unique=True, index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    # At most one compensation per reservation.
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), unique=True)
    payment_method_id: Mapped[int] = mapped_column(ForeignKey("payment_methods.id"))
    reason: Mapped[str] = mapped_column(String(20))
    amount: Mapped[float] = mapped_column(Money)
    issued_at: Mapped[datetime] = mapped_column(DateTime)
