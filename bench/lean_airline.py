"""Airline's tools over the lean baseline's dicts (bench/lean_db.py): the 15 tools the airline
tasks' gold solutions call, each reading and writing the rows StateGym's tool does (envs/airline/:
fares, inventory, payments, refunds, bags, seats, certificates), with the main checks but not the
whole policy (no cancellation windows, connection rules or departed-flight checks).
"""

from __future__ import annotations

from typing import Any

from bench.lean_db import Db, Row, ToolFailed, cents
from envs.airline.ops import candidate_code
from envs.airline.rules import BAG_FEE, CABIN_OF, COMPENSATION, INSURANCE_PER_PASSENGER, free_bags

TABLES = (
    "airports flights flight_cabins seats users payment_methods reservations "
    "reservation_segments passengers payments refunds baggage certificates"
).split()
COMPARED = tuple(t for t in TABLES if t not in ("airports", "flights"))


def _flight(db: Db, number: str, day: str) -> Row:
    for f in db.where("flights", "flight_number", number.strip().upper()):
        if str(f["flight_date"])[:10] == day:
            return f
    raise ToolFailed(f"No flight {number} on {day}.")


def _cabin(db: Db, flight_id: int, fare_class: str) -> Row:
    c = next(
        (
            c
            for c in db.where("flight_cabins", "flight_id", flight_id)
            if c["fare_class"] == fare_class
        ),
        None,
    )
    if c is None:
        raise ToolFailed(f"No {fare_class} fare on that flight.")
    return db.mut("flight_cabins", c["id"])


def _user(db: Db, code: str) -> Row:
    u = db.first("users", "user_code", code)
    if u is None:
        raise ToolFailed(f"No user {code!r}.")
    return u


def _reservation(db: Db, a: dict[str, Any]) -> Row:
    u = _user(db, a["user_id"])
    r = db.first("reservations", "code", a["reservation_code"].strip().upper())
    if r is None or r["user_id"] != u["id"]:
        raise ToolFailed(f"No reservation {a['reservation_code']} of {a['user_id']}.")
    return db.mut("reservations", r["id"])


def _method(db: Db, user_id: int, code: str | None) -> Row:
    m = next(
        (m for m in db.where("payment_methods", "user_id", user_id) if m["code"] == code), None
    )
    if m is None:
        raise ToolFailed(f"No payment method {code!r}.")
    return db.mut("payment_methods", m["id"])


def _charge(db: Db, r: Row, method: Row, amount: float, purpose: str, now: str) -> None:
    amount = cents(amount)
    if amount <= 0:
        return
    if method["balance"] is not None:
        if method["balance"] + 1e-9 < amount:
            raise ToolFailed(f"{method['code']} has not enough balance.")
        method["balance"] = cents(method["balance"] - amount)
    db.insert(
        "payments",
        {
            "reservation_id": r["id"],
            "payment_method_id": method["id"],
            "purpose": purpose,
            "amount": amount,
            "created_at": now,
        },
    )


def _refund(db: Db, r: Row, method_id: int, amount: float, reason: str, now: str) -> None:
    method = db.mut("payment_methods", method_id)
    if method["balance"] is not None:
        method["balance"] = cents(method["balance"] + amount)
    db.insert(
        "refunds",
        {
            "reservation_id": r["id"],
            "payment_method_id": method_id,
            "reason": reason,
            "amount": cents(amount),
            "created_at": now,
        },
    )


def _net_paid(db: Db, r: Row) -> dict[int, float]:
    net: dict[int, float] = {}
    for p in db.where("payments", "reservation_id", r["id"]):
        net[p["payment_method_id"]] = net.get(p["payment_method_id"], 0.0) + p["amount"]
    for p in db.where("refunds", "reservation_id", r["id"]):
        net[p["payment_method_id"]] = net.get(p["payment_method_id"], 0.0) - p["amount"]
    return {k: cents(v) for k, v in net.items() if cents(v) > 0}


def _settle(db: Db, r: Row, code: str | None, diff: float, now: str) -> None:
    if cents(diff) > 0:
        _charge(db, r, _method(db, r["user_id"], code), diff, "change", now)
    elif cents(diff) < 0:
        left = -diff
        for method_id, paid in _net_paid(db, r).items():
            part = min(paid, left)
            _refund(db, r, method_id, part, "change", now)
            left -= part


def _flight_view(db: Db, f: Row) -> dict[str, Any]:
    o, d = db.get("airports", f["origin_id"]), db.get("airports", f["destination_id"])
    assert o is not None and d is not None
    return {
        "flight_number": f["flight_number"],
        "date": str(f["flight_date"])[:10],
        "origin": o["code"],
        "destination": d["code"],
        "scheduled_departure": f["scheduled_departure"],
        "scheduled_arrival": f["scheduled_arrival"],
        "status": f["status"],
        "delay_minutes": f["delay_minutes"],
    }


def reservation_view(db: Db, r: Row) -> dict[str, Any]:
    user, bags = db.get("users", r["user_id"]), db.first("baggage", "reservation_id", r["id"])
    assert user is not None
    passengers = sorted(
        db.where("passengers", "reservation_id", r["id"]), key=lambda p: p["position"]
    )
    tickets = {p["id"]: p["ticket_number"] for p in passengers}
    flights = []
    for s in sorted(
        db.where("reservation_segments", "reservation_id", r["id"]), key=lambda s: s["leg_no"]
    ):
        f = db.get("flights", s["flight_id"])
        assert f is not None
        seats = {
            tickets[x["passenger_id"]]: x["seat_no"]
            for x in db.where("seats", "flight_id", f["id"])
            if x["passenger_id"] in tickets
        }
        flights.append(
            {**_flight_view(db, f), "price_per_passenger": cents(s["price"]), "seats": seats}
        )
    return {
        "reservation_code": r["code"],
        "user_id": user["user_code"],
        **{k: r[k] for k in ("status", "trip_type", "fare_class", "insurance", "created_at")},
        "flights": flights,
        "passengers": [
            {k: p[k] for k in ("ticket_number", "first_name", "last_name", "date_of_birth")}
            for p in passengers
        ],
        "baggage": {k: (bags or {}).get(k, 0) for k in ("checked_bags", "free_bags", "paid_bags")},
        "payments": [
            {k: p[k] for k in ("purpose", "amount")}
            for p in db.where("payments", "reservation_id", r["id"])
        ],
    }


# --- read tools ----------------------------------------------------------------------------------
def list_airports(db: Db, a: dict[str, Any], now: str) -> Any:
    return {"airports": [{k: x[k] for k in ("code", "name", "city")} for x in db.scan("airports")]}


def _airport_id(db: Db, code: str) -> int:
    x = db.first("airports", "code", code.strip().upper())
    if x is None:
        raise ToolFailed(f"The airline does not fly to {code!r}.")
    return int(x["id"])


def search_flights(db: Db, a: dict[str, Any], now: str) -> Any:
    origin, dest, day = _airport_id(db, a["origin"]), _airport_id(db, a["destination"]), a["date"]

    def offer(f: Row) -> dict[str, Any]:
        cabins = db.where("flight_cabins", "flight_id", f["id"])
        return {
            **_flight_view(db, f),
            "fares": {
                c["fare_class"]: {"price": cents(c["price"]), "seats_left": c["seats_left"]}
                for c in cabins
            },
        }

    def bookable(f: Row) -> bool:
        return str(f["flight_date"])[:10] == day and f["status"] in ("scheduled", "delayed")

    legs = [f for f in db.where("flights", "origin_id", origin) if bookable(f)]
    out: dict[str, Any] = {"direct": [offer(f) for f in legs if f["destination_id"] == dest]}
    if a.get("include_one_stop"):
        out["one_stop"] = [
            {"flights": [offer(f), offer(g)]}
            for f in legs
            if f["destination_id"] != dest
            for g in db.where("flights", "origin_id", f["destination_id"])
            if g["destination_id"] == dest
            and bookable(g)
            and g["scheduled_departure"] > f["scheduled_arrival"]
        ]
    return out


def get_flight_status(db: Db, a: dict[str, Any], now: str) -> Any:
    return _flight_view(db, _flight(db, a["flight_number"], a["date"]))


def get_seat_map(db: Db, a: dict[str, Any], now: str) -> Any:
    f = _flight(db, a["flight_number"], a["date"])
    free = [
        s["seat_no"]
        for s in db.where("seats", "flight_id", f["id"])
        if s["cabin"] == a["cabin"] and s["passenger_id"] is None
    ]
    return {
        "flight_number": f["flight_number"],
        "date": a["date"],
        "cabin": a["cabin"],
        "free_seats": free,
    }


def find_user_by_email(db: Db, a: dict[str, Any], now: str) -> Any:
    u = db.first("users", "email", str(a["email"]).strip().lower())
    if u is None:
        raise ToolFailed(f"No user has the email {a['email']!r}.")
    return {"user_id": u["user_code"], "first_name": u["first_name"], "last_name": u["last_name"]}


def get_user_details(db: Db, a: dict[str, Any], now: str) -> Any:
    u = _user(db, a["user_id"])
    return {
        "user_id": u["user_code"],
        **{k: u[k] for k in ("first_name", "last_name", "email", "date_of_birth", "membership")},
        "payment_methods": [
            {"payment_method_id": m["code"], "kind": m["kind"], "balance": m["balance"]}
            for m in db.where("payment_methods", "user_id", u["id"])
        ],
        "reservations": [r["code"] for r in db.where("reservations", "user_id", u["id"])],
    }


def get_reservation_details(db: Db, a: dict[str, Any], now: str) -> Any:
    r = db.first("reservations", "code", a["reservation_code"].strip().upper())
    if r is None:
        raise ToolFailed(f"No reservation {a['reservation_code']}.")
    return reservation_view(db, r)


# --- write tools ---------------------------------------------------------------------------------
def book_reservation(db: Db, a: dict[str, Any], now: str) -> Any:
    u = _user(db, a["user_id"])
    n, fare = len(a["passengers"]), a["fare_class"]
    flights = [_flight(db, x["flight_number"], x["date"]) for x in a["flights"]]
    cabins = [_cabin(db, f["id"], fare) for f in flights]
    if any(c["seats_left"] < n for c in cabins):
        raise ToolFailed("Not enough seats left.")
    main = _method(db, u["id"], a["payment_method_id"])
    paid_bags = max(0, a["checked_bags"] - free_bags(u["membership"], fare, n))
    salt = f"{len(db.where('reservations', 'user_id', u['id']))}|{flights[0]['id']}"
    code = next(
        c
        for i in range(99)
        if not db.first("reservations", "code", c := candidate_code(u["user_code"], salt, i))
    )
    r = db.insert(
        "reservations",
        {
            "code": code,
            "user_id": u["id"],
            "origin_id": _airport_id(db, a["origin"]),
            "destination_id": _airport_id(db, a["destination"]),
            "trip_type": a["trip_type"],
            "fare_class": fare,
            "status": "confirmed",
            "insurance": a["insurance"],
            "cancel_reason": None,
            "created_at": now,
        },
    )
    for leg_no, (flight, cabin) in enumerate(zip(flights, cabins, strict=True), 1):
        db.insert(
            "reservation_segments",
            {
                "reservation_id": r["id"],
                "leg_no": leg_no,
                "flight_id": flight["id"],
                "price": cabin["price"],
            },
        )
        cabin["seats_left"] -= n
    for pos, p in enumerate(a["passengers"], 1):
        db.insert(
            "passengers",
            {"ticket_number": f"{code}-{pos}", "reservation_id": r["id"], "position": pos, **p},
        )
    db.insert(
        "baggage",
        {
            "reservation_id": r["id"],
            "checked_bags": a["checked_bags"],
            "free_bags": a["checked_bags"] - paid_bags,
            "paid_bags": paid_bags,
        },
    )
    bills = [
        ("fare", sum(c["price"] for c in cabins) * n),
        ("insurance", INSURANCE_PER_PASSENGER * n if a["insurance"] else 0),
        ("baggage", BAG_FEE * paid_bags),
    ]
    cert = _method(db, u["id"], a["certificate_id"]) if a.get("certificate_id") else None
    for purpose, amount in bills:
        from_cert = cents(min(cert["balance"], amount)) if cert else 0.0
        if from_cert:
            _charge(db, r, cert, from_cert, purpose, now)  # type: ignore[arg-type]
        _charge(db, r, main, amount - from_cert, purpose, now)
    return reservation_view(db, r)


def cancel_reservation(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    if r["status"] != "confirmed":
        raise ToolFailed(f"Reservation {r['code']} is {r['status']}.")
    refunded = 0.0
    for method_id, amount in _net_paid(db, r).items():
        _refund(db, r, method_id, amount, "cancellation", now)
        refunded += amount
    n = len(db.where("passengers", "reservation_id", r["id"]))
    for s in db.where("reservation_segments", "reservation_id", r["id"]):
        _cabin(db, s["flight_id"], r["fare_class"])["seats_left"] += n
    r["status"], r["cancel_reason"] = "cancelled", a["reason"]
    return {"refunded": f"{refunded:.2f}", **reservation_view(db, r)}


def change_flights(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    n = len(db.where("passengers", "reservation_id", r["id"]))
    segments = sorted(
        db.where("reservation_segments", "reservation_id", r["id"]), key=lambda s: s["leg_no"]
    )
    old = {s["flight_id"]: s for s in segments}
    flights = [_flight(db, x["flight_number"], x["date"]) for x in a["flights"]]
    prices = [
        old[f["id"]]["price"] if f["id"] in old else _cabin(db, f["id"], r["fare_class"])["price"]
        for f in flights
    ]
    diff = (sum(prices) - sum(s["price"] for s in segments)) * n
    _settle(db, r, a.get("payment_method_id"), diff, now)
    for fid in old.keys() - {f["id"] for f in flights}:
        _cabin(db, fid, r["fare_class"])["seats_left"] += n
    for f in flights:
        if f["id"] not in old:
            _cabin(db, f["id"], r["fare_class"])["seats_left"] -= n
    for leg_no, (f, price) in enumerate(zip(flights, prices, strict=True), 1):
        if leg_no <= len(segments):
            seg = db.mut("reservation_segments", segments[leg_no - 1]["id"])
            seg["flight_id"], seg["price"] = f["id"], price
        else:
            db.insert(
                "reservation_segments",
                {"reservation_id": r["id"], "leg_no": leg_no, "flight_id": f["id"], "price": price},
            )
    return reservation_view(db, r)


def change_cabin(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    n = len(db.where("passengers", "reservation_id", r["id"]))
    segments = sorted(
        db.where("reservation_segments", "reservation_id", r["id"]), key=lambda s: s["leg_no"]
    )
    cabins = [_cabin(db, s["flight_id"], a["fare_class"]) for s in segments]
    diff = sum(c["price"] - s["price"] for c, s in zip(cabins, segments, strict=True)) * n
    _settle(db, r, a.get("payment_method_id"), diff, now)
    for c, s in zip(cabins, segments, strict=True):
        _cabin(db, s["flight_id"], r["fare_class"])["seats_left"] += n
        c["seats_left"] -= n
        db.mut("reservation_segments", s["id"])["price"] = c["price"]
    r["fare_class"] = a["fare_class"]
    return reservation_view(db, r)


def update_passengers(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    current = sorted(db.where("passengers", "reservation_id", r["id"]), key=lambda p: p["position"])
    if len(current) != len(a["passengers"]):
        raise ToolFailed("The number of passengers cannot change.")
    for p, new in zip(current, a["passengers"], strict=True):
        db.mut("passengers", p["id"]).update(new)
    return reservation_view(db, r)


def add_baggage(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    u = db.get("users", r["user_id"])
    assert u is not None
    n = len(db.where("passengers", "reservation_id", r["id"]))
    bags = db.first("baggage", "reservation_id", r["id"])
    bags = (
        db.mut("baggage", bags["id"])
        if bags
        else db.insert(
            "baggage",
            {"reservation_id": r["id"], "checked_bags": 0, "free_bags": 0, "paid_bags": 0},
        )
    )
    total = bags["checked_bags"] + a["extra_bags"]
    free = min(total, max(free_bags(u["membership"], r["fare_class"], n), bags["free_bags"]))
    paid = total - free
    fee = cents((paid - bags["paid_bags"]) * BAG_FEE)
    if fee:
        _charge(db, r, _method(db, u["id"], a.get("payment_method_id")), fee, "baggage", now)
    bags.update(checked_bags=total, free_bags=free, paid_bags=paid)
    return {"fee": f"{fee:.2f}", **reservation_view(db, r)}


def assign_seat(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    p = db.first("passengers", "ticket_number", a["ticket_number"].strip().upper())
    f = _flight(db, a["flight_number"], a["date"])
    if p is None or p["reservation_id"] != r["id"]:
        raise ToolFailed(f"No ticket {a['ticket_number']} on {r['code']}.")
    seats = db.where("seats", "flight_id", f["id"])
    seat = next((s for s in seats if s["seat_no"] == a["seat_no"]), None)
    if (
        seat is None
        or seat["passenger_id"] is not None
        or seat["cabin"] != CABIN_OF[r["fare_class"]]
    ):
        raise ToolFailed(f"Seat {a['seat_no']} is not free.")
    for s in seats:
        if s["passenger_id"] == p["id"]:
            db.mut("seats", s["id"])["passenger_id"] = None
    db.mut("seats", seat["id"])["passenger_id"] = p["id"]
    return reservation_view(db, r)


def issue_compensation_certificate(db: Db, a: dict[str, Any], now: str) -> Any:
    r = _reservation(db, a)
    u = db.get("users", r["user_id"])
    assert u is not None
    if db.first("certificates", "reservation_id", r["id"]):
        raise ToolFailed("A certificate was already issued for this reservation.")
    statuses = [
        (db.get("flights", s["flight_id"]) or {})["status"]
        for s in db.where("reservation_segments", "reservation_id", r["id"])
    ]
    what = "cancelled" if "cancelled" in statuses else "delayed"
    amount = cents(COMPENSATION[what] * len(db.where("passengers", "reservation_id", r["id"])))
    code = f"certificate_{r['code'].lower()}"
    method = db.insert(
        "payment_methods",
        {
            "code": code,
            "user_id": u["id"],
            "kind": "certificate",
            "brand": None,
            "last4": None,
            "balance": amount,
        },
    )
    db.insert(
        "certificates",
        {
            "code": code,
            "user_id": u["id"],
            "reservation_id": r["id"],
            "payment_method_id": method["id"],
            "reason": f"flight_{what}",
            "amount": amount,
            "issued_at": now,
        },
    )
    return {"certificate_id": code, "amount": f"{amount:.2f}", "reason": f"flight_{what}"}


TOOLS = {
    f.__name__: f
    for f in (
        list_airports,
        search_flights,
        get_flight_status,
        get_seat_map,
        find_user_by_email,
        get_user_details,
        get_reservation_details,
        book_reservation,
        cancel_reservation,
        change_flights,
        change_cabin,
        update_passengers,
        add_baggage,
        assign_seat,
        issue_compensation_certificate,
    )
}
