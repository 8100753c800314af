"""Building blocks of the airline task generator: a view of the base flight network, a seed
builder per task story and gold-call helpers (the rest is app/taskgen/kit.py).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.sdk.environment import Environment
from app.sdk.taskgen import Draft as Draft  # re-exported: what the families return
from app.sdk.taskgen import (
    Phrasing,
    SeedBuilder,
    name_pool,
    opening,
    sentence_starting,
    sentence_with,
)
from app.sdk.taskgen import call as shared_call
from envs.airline import ENVIRONMENT
from envs.airline.models import Airport, Flight, FlightCabin, Seat
from envs.airline.rules import BAG_FEE, CABIN_OF, INSURANCE_PER_PASSENGER, free_bags

NOW = ENVIRONMENT.default_now
# The seed's table order (parents first; flights, seats and flight_cabins rows update base rows).
SEED_TABLES = ("flights", "users", "payment_methods", "reservations", "reservation_segments",
               "passengers", "payments", "baggage", "seats", "flight_cabins",
               "certificates")  # fmt: skip


def money(value: float) -> str:
    return f"{value:.2f}"


@dataclass
class FlightInfo:
    id: int
    number: str
    date: str
    origin: str
    destination: str
    departure: datetime
    status: str
    delay: int
    cabins: dict[str, dict[str, Any]]  # fare -> {"id", "price", "left"}
    free_seats: dict[str, list[tuple[int, str]]]  # cabin -> [(seat id, seat no)]

    def ref(self) -> dict[str, str]:
        return {"flight_number": self.number, "date": self.date}

    def text(self) -> str:
        return f"{self.number} on {self.date}"


class Network:
    """The base data's dated flights, with fares, inventory and free seats."""

    def __init__(self, db: Session) -> None:
        codes = {a.id: a.code for a in db.scalars(select(Airport))}
        self.flights: dict[tuple[str, str], FlightInfo] = {}
        self.by_id: dict[int, FlightInfo] = {}
        self.ids_of: dict[str, list[int]] = defaultdict(list)  # number -> its flights' ids
        by_id = self.by_id
        for f in db.scalars(select(Flight).order_by(Flight.id)):
            info = FlightInfo(
                f.id,
                f.flight_number,
                f.flight_date.isoformat(),
                codes[f.origin_id],
                codes[f.destination_id],
                f.scheduled_departure,
                f.status,
                f.delay_minutes,
                {},
                defaultdict(list),
            )
            self.flights[(info.number, info.date)] = by_id[f.id] = info
            self.ids_of[info.number].append(f.id)
        for c in db.scalars(select(FlightCabin).order_by(FlightCabin.id)):
            by_id[c.flight_id].cabins[c.fare_class] = {
                "id": c.id,
                "price": c.price,
                "left": c.seats_left,
            }
        free = select(Seat).where(Seat.passenger_id.is_(None)).order_by(Seat.id)
        for s in db.scalars(free):
            by_id[s.flight_id].free_seats[s.cabin].append((s.id, s.seat_no))

    def get(self, number: str, day: date | str) -> FlightInfo:
        return self.flights[(number, str(day))]

    def future(self, status: str = "scheduled", min_hours: float = 12) -> list[FlightInfo]:
        soon = NOW + timedelta(hours=min_hours)
        return [f for f in self.flights.values() if f.status == status and f.departure > soon]

    def departed(self) -> list[FlightInfo]:
        return [f for f in self.flights.values() if f.status == "departed"]


@dataclass
class Person:
    id: int
    user_code: str
    first: str
    last: str
    email: str
    tier: str
    dob: str
    methods: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


@dataclass
class Booking:
    id: int
    code: str
    flights: list[FlightInfo]
    fare: str
    passengers: list[dict[str, str]]
    tickets: list[str]
    paid: float
    pax_ids: list[int]


class Story:
    """The rows one task seeds on top of the base data (its `SeedBuilder`, id block `index`)."""

    def __init__(self, index: int, net: Network, rng: random.Random) -> None:
        self.index, self.net, self.rng = index, net, rng
        self.b = SeedBuilder(index, SEED_TABLES, NOW)
        self.rows = self.b.rows
        self.left: dict[int, int] = {}  # flight_cabins id -> seats left after this story's rows
        self.taken: set[int] = set()

    @property
    def distractor(self) -> bool:
        """Whether this is a task's distractor story (in a world, an even index: the task's own
        is odd, app/taskgen/draw.py): its people and rows join the seed, never a base update."""
        return self.b.world is not None and self.index % 2 == 0

    def _add(self, table: str, **row: Any) -> int:
        return int(self.b.add(table, **row)["id"])

    def _ts(self, days_ago: float) -> str:
        return (NOW - timedelta(days=days_ago)).isoformat()

    def member(self, first: str, last: str, tier: str = "regular") -> Person:
        code = f"{first}_{last}_{self.b.code(5)}".lower()
        email = f"{first}.{last}.{self.b.code(5)}@example.org".lower()
        dob = self.birthday(1960, 2000)
        uid = self._add(
            "users",
            user_code=code,
            email=email,
            first_name=first,
            last_name=last,
            date_of_birth=dob,
            membership=tier,
            created_at=self._ts(800),
        )
        p = Person(uid, code, first, last, email, tier, dob)
        # A look-alike card half the time, listed before or after the Visa: a policy that does
        # not read the member's payment methods cannot tell which id pays.
        other = self.rng.random() < 0.5
        if other and self.rng.random() < 0.5:
            self.method(p, "credit_card", "mastercard")
        self.method(p, "credit_card", "visa")
        if other and "mastercard" not in p.methods:
            self.method(p, "credit_card", "mastercard")
        return p

    def birthday(self, first_year: int, last_year: int) -> str:
        """A date of birth drawn from the story's stream (every month and day a calendar has)."""
        day = date(self.rng.randint(first_year, last_year), 1, 1) + timedelta(
            days=self.rng.randrange(365)
        )
        return day.isoformat()

    def amount(self, low: int, high: int) -> float:
        """A whole amount in [low, high] from the story's stream (balances, certificates)."""
        return float(self.rng.randint(low, high))

    def method(self, p: Person, kind: str, label: str, balance: float | None = None) -> str:
        code = f"{kind}_{self.b.code(7)}"
        card = kind == "credit_card"
        self._add(
            "payment_methods",
            code=code,
            user_id=p.id,
            kind=kind,
            brand=label if card else None,
            last4=f"{self.rng.randint(1000, 9999)}" if card else None,
            balance=None if card else balance,
        )
        p.methods[label] = code
        return code

    def last4(self, code: str) -> str:
        return str(next(m["last4"] for m in self.rows["payment_methods"] if m["code"] == code))

    def set_status(self, f: FlightInfo, status: str, delay: int = 0) -> None:
        """This world's status of base flight f (a delay of `delay` minutes, a cancellation)."""
        self.b.update("flights", f.id, status=status, delay_minutes=delay)

    def set_left(self, f: FlightInfo, fare: str, left: int) -> None:
        self.left[f.cabins[fare]["id"]] = left

    def seats_left(self, f: FlightInfo, fare: str) -> int:
        cabin = f.cabins[fare]
        return self.left.get(cabin["id"], cabin["left"])

    def free_seat(self, f: FlightInfo, cabin: str, skip: int = 0) -> str:
        """A free seat of the cabin drawn from the story's stream, kept from later draws (`skip`
        is kept for call sites' readability: successive draws already differ)."""
        free = [(sid, no) for sid, no in f.free_seats[cabin] if sid not in self.taken]
        sid, no = self.rng.choice(free)
        self.taken.add(sid)
        return no

    def booking(
        self,
        p: Person,
        flights: list[FlightInfo],
        fare: str,
        *,
        travellers: int = 1,
        days_ago: float = 10,
        insurance: bool = False,
        bags: int = 0,
        seats: bool = False,
        pay: str | None = None,
    ) -> Booking:
        # A letter and the world's number: the tools' own codes (ops.booking_code) step past any
        # code already taken, so a story's code never collides with one the agent books.
        code = f"{self.rng.choice(CODE_LETTERS)}{self.b.code(5)}"
        round_trip = len(flights) == 2 and flights[0].origin == flights[1].destination
        rid = self._add(
            "reservations",
            code=code,
            user_id=p.id,
            origin_id=None,
            destination_id=None,
            trip_type="round_trip" if round_trip else "one_way",
            fare_class=fare,
            status="confirmed",
            insurance=insurance,
            cancel_reason=None,
            created_at=self._ts(days_ago),
        )
        row = self.rows["reservations"][-1]
        row["origin_id"] = AIRPORT_IDS[flights[0].origin]
        row["destination_id"] = AIRPORT_IDS[flights[0 if round_trip else -1].destination]
        for leg_no, f in enumerate(flights, start=1):
            self._add(
                "reservation_segments",
                reservation_id=rid,
                leg_no=leg_no,
                flight_id=f.id,
                price=f.cabins[fare]["price"],
            )
            self.left[f.cabins[fare]["id"]] = self.seats_left(f, fare) - travellers
        pax = [{"first_name": p.first, "last_name": p.last, "date_of_birth": p.dob}]
        for first in self.companions(travellers - 1):
            pax.append(
                {
                    "first_name": first,
                    "last_name": p.last,
                    "date_of_birth": self.birthday(1950, 2015),
                }
            )
        tickets, pax_ids = [], []
        for pos, who in enumerate(pax, start=1):
            tickets.append(f"{code}-{pos}")
            pax_ids.append(
                self._add(
                    "passengers",
                    ticket_number=f"{code}-{pos}",
                    reservation_id=rid,
                    position=pos,
                    **who,
                )
            )
        allowance = free_bags(p.tier, fare, travellers)
        paid_bags = max(0, bags - allowance)
        self._add(
            "baggage",
            reservation_id=rid,
            checked_bags=bags,
            free_bags=bags - paid_bags,
            paid_bags=paid_bags,
        )
        method_id = next(
            m["id"] for m in self.rows["payment_methods"] if m["code"] == (pay or p.methods["visa"])
        )
        bills = [
            ("fare", round(sum(f.cabins[fare]["price"] for f in flights) * travellers, 2)),
            ("insurance", INSURANCE_PER_PASSENGER * travellers if insurance else 0),
            ("baggage", BAG_FEE * paid_bags),
        ]
        for purpose, amount in bills:
            if amount:
                self._add(
                    "payments",
                    reservation_id=rid,
                    payment_method_id=method_id,
                    purpose=purpose,
                    amount=amount,
                    created_at=self._ts(days_ago),
                )
        if seats:
            for f in flights:
                for pid in pax_ids:
                    sid = self.rng.choice(
                        [s for s, _ in f.free_seats[CABIN_OF[fare]] if s not in self.taken]
                    )
                    self.taken.add(sid)
                    self.b.update("seats", sid, passenger_id=pid)
        return Booking(rid, code, flights, fare, pax, tickets, sum(a for _, a in bills), pax_ids)

    def cancelled(self, b: Booking) -> None:
        """Booking b as the member cancelled it earlier (its seats back in the cabins)."""
        row = next(r for r in self.rows["reservations"] if r["id"] == b.id)
        row.update(status="cancelled", cancel_reason="change_of_plan")
        for f in b.flights:
            self.left[f.cabins[b.fare]["id"]] = self.seats_left(f, b.fare) + len(b.passengers)

    def certificate(self, p: Person, b: Booking, what: str, amount: float, days_ago: float) -> str:
        """A compensation certificate issued for booking b earlier (`what`: cancelled or
        delayed), kept as the tool keeps one: a payment method named after the booking code."""
        code = f"certificate_{b.code.lower()}"
        method = self._add(
            "payment_methods",
            code=code,
            user_id=p.id,
            kind="certificate",
            brand=None,
            last4=None,
            balance=amount,
        )
        self._add(
            "certificates",
            code=code,
            user_id=p.id,
            reservation_id=b.id,
            payment_method_id=method,
            reason=f"flight_{what}",
            amount=amount,
            issued_at=self._ts(days_ago),
        )
        return code

    def companions(self, n: int) -> list[str]:
        """First names of n people travelling with the member, drawn from the story's stream."""
        return self.rng.sample(COMPANIONS, n)

    def seed(self) -> dict[str, Any]:
        """The seed, with the seats left of every cabin the story booked (base rows)."""
        left = [{"id": k, "seats_left": v} for k, v in sorted(self.left.items())]
        return self.b.seed(updates={"flight_cabins": left})


AIRPORT_IDS = {
    code: i
    for i, code in enumerate(
        ("SFO", "LAX", "SEA", "DEN", "ORD", "JFK", "BOS", "ATL", "MIA", "DFW"), start=1
    )
}
# Travel companions' first names (a story draws its own; none is a member's name in NAMES).
COMPANIONS = (
    "Ada", "Ben", "Cleo", "Dev", "Elsa", "Finn", "Gia", "Hal", "Ivy", "Jude", "Abe", "Bo", "Cai",
    "Dov", "Eve", "Fay", "Gil", "Ike", "Jem", "Kit", "Lux", "Mae", "Ned", "Oz", "Pru", "Rex", "Sol",
    "Milo", "Nora", "Otto", "Pia", "Tess", "Uma", "Vito", "Wren", "Xena",
    "Zeke", "Cora", "Dario", "Edda", "Flora", "Gus", "Hedda", "Ilse",
    "Jonas", "Luca", "Olga", "Rhea", "Saul", "Tilda", "Ugo",
    "Wim", "Yuri", "Arlo", "Cyrus", "Dina", "Emil", "Fern", "Gideon",
    "Joel", "Kenzo", "Lotte", "Marek", "Nell", "Orla", "Pim", "Rafe", "Sia",
)  # fmt: skip
CODE_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"


def call(env: Environment, name: str, **arguments: Any) -> dict[str, Any]:
    """The shared gold call; a flight search leaves out one-stop trips unless it asks."""
    if name == "search_flights" and arguments.get("include_one_stop") is None:
        arguments["include_one_stop"] = False
    return shared_call(env, name, **arguments)


C = partial(call, ENVIRONMENT)


NAMES = name_pool(57, replace={53: ("Vera", "Lindgren"), 54: ("Wes", "Okonkwo")})
# The shipped set pops NAMES in order, then these (its stories outnumber NAMES' members).
MORE_NAMES = [("Imke", "Haddad"), ("Tomas", "Riedel"), ("Ines", "Farrow"), ("Lars", "Okafor")]
SHIPPED_NAMES = [*NAMES, *name_pool()[57:], *MORE_NAMES]


@dataclass
class Ctx:
    """What a family function gets: its story (seed builder), the network, its variant k."""

    s: Story
    net: Network
    k: int
    names: list[tuple[str, str]]

    def member(self, tier: str = "regular") -> Person:
        first, last = self.names.pop()
        return self.s.member(first, last, tier)

    def pick(self, flights: list[FlightInfo], offset: int = 0) -> FlightInfo:
        """A flight drawn from the story's stream (`offset` is kept for call sites' readability:
        each draw is already its own)."""
        ordered = sorted(flights, key=lambda f: (f.date, f.number))
        return self.s.rng.choice(ordered)

    def choose(self, options: list[Any]) -> Any:
        """One of `options`, drawn from the story's stream."""
        return options[self.s.rng.randrange(len(options))]

    def coin(self) -> bool:
        """A fair coin from the story's stream: which twin (allowed or forbidden) a draw is."""
        return self.s.rng.random() < 0.5


def hello(p: Person, by: str = "id") -> str:
    if by == "email":
        return f"Hi, I'm {p.name}, my email is {p.email}."
    return f"Hi, I'm {p.name}, user id {p.user_code}."


def ident(p: Person, by: str = "id") -> list[dict[str, Any]]:
    """The identification calls: by email the agent must look the user id up first."""
    return [C("find_user_by_email", email=p.email)] if by == "email" else []


GO = "Please go ahead, you have my confirmation."
# What a draw may reword (app/sdk/phrasing.py): the "Please ..." request (not the consent), the
# consent sentence, and the greeting saying who the member is (`hello`).
PHRASING = Phrasing(
    request=sentence_starting("Please"),
    keep_request=("go ahead", "confirm"),
    consent=sentence_with("confirmation"),
    greeting=opening(("Hi",), ("I'm",)),
    closing=("confirm", "go ahead", "proceed"),
)


def asked(family: str, prompt: str, gold: list[dict[str, Any]], kind: str, value: Any) -> Draft:
    """A question: the gold reads; build_row ends it submitting `value` (a `kind` of
    app/core/values.py)."""
    return Draft(family, prompt, gold, False, answer=(kind, value))


def refused(family: str, prompt: str, gold: list[dict[str, Any]], code: str, message: str) -> Draft:
    """A request the policy forbids (all of it, or the rest after the gold's writes): the gold
    ends declining it with reason `code` (envs/airline/policy.py DECLINE_REASONS)."""
    reads = {t.name for t in ENVIRONMENT.tools if t.read_only}
    writes = any(c["name"] not in reads for c in gold)  # the partial refusal acts first
    return Draft(family, prompt, gold, writes, decline=code, decline_message=message)
