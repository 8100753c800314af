"""The deterministic base dataset: 10 airports, 216 dated flights with seat maps, 200 members,
~500 reservations with passengers, payments, bags and seat assignments.

Built with Core bulk inserts (explicit ids 1..N, stable across builds; task seeds use ids >=
100000). Everything random comes from the `rng` passed in, nothing from the wall clock.
"""

from __future__ import annotations

import itertools
import random
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

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
from envs.airline.rules import (
    AIRPORTS,
    BAG_FEE,
    BUSINESS_SEATS,
    CABIN_OF,
    ECONOMY_SEATS,
    INSURANCE_PER_PASSENGER,
    INVENTORY,
    RETURN_OF,
    ROUTES,
    free_bags,
)

# The base data describes the airline as of the environment's default clock.
AS_OF = datetime(2026, 5, 10, 12, 0)
FIRST_DAY = date(2026, 5, 7)
N_DAYS = 12
N_USERS = 200
N_RESERVATIONS = 500
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

FIRST_NAMES = (
    "Olivia Liam Emma Noah Ava Elijah Sophia James Isabella Lucas Mia Mason Amelia Ethan Harper "
    "Logan Evelyn Aiden Abigail Caleb Ella Owen Scarlett Daniel Grace Henry Chloe Jack Zoe Levi "
    "Omar Priya Yuki Fatima Diego Amara Ravi Sofia Hugo Ingrid Kofi Mei Arjun Lucia Tomas"
).split()
LAST_NAMES = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill"
).split()
CARD_BRANDS = ("visa", "mastercard", "amex")


def fare_prices(minutes: int, rng: random.Random) -> dict[str, float]:
    """Whole-dollar fares that grow with flight time; business ~2.8x economy."""
    economy = float(round(60 + minutes * 0.55 + rng.randint(-15, 25)))
    return {
        "basic_economy": float(round(economy * 0.7)),
        "economy": economy,
        "business": float(round(economy * 2.8)),
    }


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: dict[type, list[dict[str, Any]]] = {}

    def add(self, model: type, **row: Any) -> int:
        rows = self.rows.setdefault(model, [])
        row["id"] = len(rows) + 1
        rows.append(row)
        return int(row["id"])

    def network(self) -> None:
        rng = self.rng
        ids = {
            code: self.add(Airport, code=code, name=name, city=city)
            for code, name, city in AIRPORTS
        }
        self.flights: dict[tuple[str, date], dict[str, Any]] = {}
        self.cabins: dict[tuple[int, str], dict[str, Any]] = {}
        self.seats: dict[int, list[dict[str, Any]]] = {}
        for day, (number, orig, dest, hhmm, minutes) in itertools.product(range(N_DAYS), ROUTES):
            flight_date = FIRST_DAY + timedelta(days=day)
            hh, mm = (int(x) for x in hhmm.split(":"))
            dep = datetime(flight_date.year, flight_date.month, flight_date.day, hh, mm)
            if dep <= AS_OF:
                status, delay = ("departed", 0) if rng.random() > 0.04 else ("cancelled", 0)
            else:
                roll = rng.random()
                status = "cancelled" if roll < 0.04 else "delayed" if roll < 0.11 else "scheduled"
                delay = rng.choice((90, 150, 240, 320)) if status == "delayed" else 0
            fid = self.add(
                Flight,
                flight_number=number,
                flight_date=flight_date,
                origin_id=ids[orig],
                destination_id=ids[dest],
                scheduled_departure=dep,
                scheduled_arrival=dep + timedelta(minutes=minutes),
                status=status,
                delay_minutes=delay,
            )
            self.flights[(number, flight_date)] = self.rows[Flight][-1]
            for fare, price in fare_prices(minutes, rng).items():
                self.add(
                    FlightCabin,
                    flight_id=fid,
                    fare_class=fare,
                    price=price,
                    seats_total=INVENTORY[fare],
                    seats_left=INVENTORY[fare],
                )
                self.cabins[(fid, fare)] = self.rows[FlightCabin][-1]
            self.seats[fid] = []
            for cabin, seat_nos in (("business", BUSINESS_SEATS), ("economy", ECONOMY_SEATS)):
                for seat_no in seat_nos:
                    self.add(Seat, flight_id=fid, seat_no=seat_no, cabin=cabin, passenger_id=None)
                    self.seats[fid].append(self.rows[Seat][-1])

    def users(self) -> None:
        rng = self.rng
        names = rng.sample(list(itertools.product(FIRST_NAMES, LAST_NAMES)), N_USERS)
        numbers = iter(rng.sample(range(1000, 9999), N_USERS))
        codes = iter(rng.sample(range(1_000_000, 9_000_000), N_USERS * 4))
        self.methods: dict[int, list[dict[str, Any]]] = {}
        for first, last in names:
            n = next(numbers)
            uid = self.add(
                User,
                user_code=f"{first}_{last}_{n}".lower(),
                email=f"{first}.{last}{n}@example.com".lower(),
                first_name=first,
                last_name=last,
                date_of_birth=date(rng.randint(1950, 2004), rng.randint(1, 12), rng.randint(1, 28)),
                membership=rng.choices(("regular", "silver", "gold"), (6, 3, 1))[0],
                created_at=AS_OF - timedelta(days=rng.randint(100, 2000)),
            )
            kinds = ["credit_card"] + [
                k
                for k, p in (("gift_card", 0.5), ("certificate", 0.2), ("credit_card", 0.2))
                if rng.random() < p
            ]
            for kind in kinds:
                card = kind == "credit_card"
                balance = (
                    None
                    if card
                    else (
                        float(rng.randint(20, 400))
                        if kind == "gift_card"
                        else rng.choice((50.0, 100.0, 150.0, 250.0))
                    )
                )
                self.add(
                    PaymentMethod,
                    code=f"{kind}_{next(codes)}",
                    user_id=uid,
                    kind=kind,
                    brand=rng.choice(CARD_BRANDS) if card else None,
                    last4=f"{rng.randint(0, 9999):04d}" if card else None,
                    balance=balance,
                )
                self.methods.setdefault(uid, []).append(self.rows[PaymentMethod][-1])

    def reservations(self) -> None:
        rng = self.rng
        users = self.rows[User]
        used_codes: set[str] = set()
        for _ in range(N_RESERVATIONS):
            user = rng.choice(users)
            number, orig, dest, _, _ = rng.choice(ROUTES)
            first_day = FIRST_DAY + timedelta(days=rng.randrange(N_DAYS))
            legs = [self.flights[(number, first_day)]]
            back_day = first_day + timedelta(days=rng.randint(2, 5))
            if rng.random() < 0.5 and (RETURN_OF[number], back_day) in self.flights:
                legs.append(self.flights[(RETURN_OF[number], back_day)])
            fare = rng.choices(("basic_economy", "economy", "business"), (3, 5, 2))[0]
            n_pax = rng.choice((1, 1, 1, 2, 2, 3))
            cabins = [self.cabins[(f["id"], fare)] for f in legs]
            if any(c["seats_left"] < n_pax for c in cabins):
                continue
            latest = min(legs[0]["scheduled_departure"], AS_OF) - timedelta(hours=2)
            created = latest - timedelta(minutes=rng.randint(0, 60 * 24 * 50))
            cancelled = rng.random() < 0.08
            code = ""
            while not code or code in used_codes:
                code = "".join(rng.choice(CODE_ALPHABET) for _ in range(6))
            used_codes.add(code)
            insured = rng.random() < 0.3
            rid = self.add(
                Reservation,
                code=code,
                user_id=user["id"],
                origin_id=legs[0]["origin_id"],
                destination_id=legs[0]["destination_id"],
                trip_type="round_trip" if len(legs) == 2 else "one_way",
                fare_class=fare,
                status="cancelled" if cancelled else "confirmed",
                insurance=insured,
                cancel_reason="change_of_plan" if cancelled else None,
                created_at=created,
            )
            for leg_no, (f, c) in enumerate(zip(legs, cabins, strict=True), start=1):
                self.add(
                    ReservationSegment,
                    reservation_id=rid,
                    leg_no=leg_no,
                    flight_id=f["id"],
                    price=c["price"],
                )
                if not cancelled:
                    c["seats_left"] -= n_pax
            pax_ids = self._passengers(rid, code, user, n_pax)
            card = next(m for m in self.methods[user["id"]] if m["kind"] == "credit_card")
            charges = [("fare", round(sum(c["price"] for c in cabins) * n_pax, 2))]
            if insured:
                charges.append(("insurance", INSURANCE_PER_PASSENGER * n_pax))
            allowance = free_bags(user["membership"], fare, n_pax)
            checked = rng.randint(0, allowance + 1)
            paid = max(0, checked - allowance)
            self.add(
                Baggage,
                reservation_id=rid,
                checked_bags=checked,
                free_bags=checked - paid,
                paid_bags=paid,
            )
            if paid:
                charges.append(("baggage", BAG_FEE * paid))
            for purpose, amount in charges:
                self.add(
                    Payment,
                    reservation_id=rid,
                    payment_method_id=card["id"],
                    purpose=purpose,
                    amount=amount,
                    created_at=created,
                )
                if cancelled:
                    self.add(
                        Refund,
                        reservation_id=rid,
                        payment_method_id=card["id"],
                        reason="cancellation",
                        amount=amount,
                        created_at=created + timedelta(days=1),
                    )
            if not cancelled and fare != "basic_economy" and rng.random() < 0.4:
                self._assign_seats(legs, CABIN_OF[fare], pax_ids)

    def _passengers(self, rid: int, code: str, user: dict[str, Any], n: int) -> list[int]:
        rng = self.rng
        ids = []
        for pos in range(1, n + 1):
            if pos == 1 and rng.random() < 0.7:
                first, last, dob = user["first_name"], user["last_name"], user["date_of_birth"]
            else:
                first, last = rng.choice(FIRST_NAMES), rng.choice((user["last_name"], *LAST_NAMES))
                dob = date(rng.randint(1950, 2020), rng.randint(1, 12), rng.randint(1, 28))
            ids.append(
                self.add(
                    Passenger,
                    ticket_number=f"{code}-{pos}",
                    reservation_id=rid,
                    position=pos,
                    first_name=first,
                    last_name=last,
                    date_of_birth=dob,
                )
            )
        return ids

    def _assign_seats(self, legs: list[dict[str, Any]], cabin: str, pax_ids: list[int]) -> None:
        for f in legs:
            free = [s for s in self.seats[f["id"]] if s["cabin"] == cabin and not s["passenger_id"]]
            for seat, pid in zip(self.rng.sample(free, len(pax_ids)), pax_ids, strict=True):
                seat["passenger_id"] = pid


# Insert order: parents before children, so foreign keys hold at every step.
TABLE_ORDER = (Airport, Flight, FlightCabin, User, PaymentMethod, Reservation, ReservationSegment,
               Passenger, Seat, Payment, Refund, Baggage)  # fmt: skip


def build_base(db: Session, rng: random.Random) -> None:
    """Insert the base dataset into an empty schema (deterministic for a given `rng` seed)."""
    builder = _Builder(rng)
    builder.network()
    builder.users()
    builder.reservations()
    for model in TABLE_ORDER:
        rows = builder.rows.get(model)
        if rows:
            db.execute(insert(model), rows)
