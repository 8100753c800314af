"""Single-request write stories: one change the member asks for, after the reads it needs."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from envs.airline.rules import RETURN_OF
from envs.airline.taskgen.kit import GO, C, Ctx, Draft, FlightInfo, Person, hello


def later(c: Ctx, f: FlightInfo, days: range, number: str | None = None) -> list[FlightInfo]:
    """Scheduled departures of the same (or the given) flight number some days after f."""
    out = []
    for d in days:
        key = (number or f.number, str(date.fromisoformat(f.date) + timedelta(days=d)))
        other = c.net.flights.get(key)
        if other is not None and other.status == "scheduled":
            out.append(other)
    return out


def pax_text(pax: list[dict[str, str]]) -> str:
    return "; ".join(f"{x['first_name']} {x['last_name']}, born {x['date_of_birth']}" for x in pax)


def travellers(p: Person, n: int, c: Ctx) -> list[dict[str, str]]:
    out = [{"first_name": p.first, "last_name": p.last, "date_of_birth": p.dob}]
    for first in c.s.companions(n - 1):
        out.append(
            {"first_name": first, "last_name": p.last, "date_of_birth": c.s.birthday(1950, 2015)}
        )
    return out


def book_call(
    p: Person,
    trip: str,
    origin: str,
    dest: str,
    fare: str,
    flights: list[FlightInfo],
    pax: list[dict[str, str]],
    insurance: bool,
    bags: int,
    pay: str,
    cert: str | None = None,
) -> dict[str, Any]:
    return C(
        "book_reservation",
        user_id=p.user_code,
        trip_type=trip,
        origin=origin,
        destination=dest,
        fare_class=fare,
        flights=[f.ref() for f in flights],
        passengers=pax,
        insurance=insurance,
        checked_bags=bags,
        payment_method_id=pay,
        certificate_id=cert,
    )


def book_one_way(c: Ctx) -> Draft:
    tier, fare, n, ins, bags = (
        ("regular", "economy", 1, False, 0),
        ("gold", "business", 2, True, 3),
        ("silver", "basic_economy", 1, False, 2),
    )[c.k]
    p = c.member(tier)
    f = c.pick([x for x in c.net.future() if c.s.seats_left(x, fare) >= n], c.k)
    cert = c.s.method(p, "certificate", "certificate", 100.0) if c.k == 2 else None
    pax = travellers(p, n, c)
    pay = "my travel certificate first and the rest on my Visa" if cert else "my Visa"
    prompt = (
        f"{hello(p)} Please book a one-way {fare.replace('_', ' ')} trip on flight "
        f"{f.number} from {f.origin} to {f.destination} on {f.date} for: {pax_text(pax)}. "
        f"{'Add travel insurance' if ins else 'No insurance'}, {bags} checked bag(s). Pay "
        f"with {pay}. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("search_flights", origin=f.origin, destination=f.destination, date=f.date),
        book_call(
            p,
            "one_way",
            f.origin,
            f.destination,
            fare,
            [f],
            pax,
            ins,
            bags,
            p.methods["visa"],
            cert,
        ),
    ]
    return Draft("book", prompt, gold, True)


def book_round_trip(c: Ctx) -> Draft:
    p = c.member(("regular", "silver")[c.k])
    pairs = [(f, r) for f in c.net.future() for r in later(c, f, range(3, 4), RETURN_OF[f.number])]
    out, back = c.pick([fr[0] for fr in pairs], c.k), None
    back = next(r for f, r in pairs if f is out)
    pax = travellers(p, 1, c)
    total = out.cabins["economy"]["price"] + back.cabins["economy"]["price"]
    pay = p.methods["visa"]
    pay_text = "my Visa"
    if c.k == 1:
        pay, pay_text = c.s.method(p, "gift_card", "gift_card", total + 40), "my gift card"
    prompt = (
        f"{hello(p)} I want a round trip in economy from {out.origin} to {out.destination}: "
        f"out on {out.date}, back on {back.date}, direct flights, just me ({pax_text(pax)}). "
        f"No insurance, no checked bags. Pay with {pay_text}. {GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code),
            C("search_flights", origin=out.origin, destination=out.destination, date=out.date),
            C("search_flights", origin=back.origin, destination=back.destination, date=back.date),
            book_call(p, "round_trip", out.origin, out.destination, "economy", [out, back], pax,
                      False, 0, pay)]  # fmt: skip
    return Draft("book", prompt, gold, True)


def book_one_stop(c: Ctx) -> Draft:
    p = c.member("gold")
    legs = next(
        (a, b)
        for a in sorted(c.net.future(), key=lambda x: x.date)
        if a.number == "SG110"
        for b in later(c, a, range(0, 1), "SG120")
    )
    pax = travellers(p, 1, c)
    prompt = (
        f"{hello(p)} I need to fly from San Francisco to New York (JFK) on {legs[0].date} "
        "in economy, via Denver is fine: SG110 then SG120. Just me, "
        f"{pax_text(pax)}; 1 checked bag, no insurance, on my Visa. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C(
            "search_flights",
            origin="SFO",
            destination="JFK",
            date=legs[0].date,
            include_one_stop=True,
        ),
        book_call(
            p, "one_way", "SFO", "JFK", "economy", list(legs), pax, False, 1, p.methods["visa"]
        ),
    ]
    return Draft("book", prompt, gold, True)


def cancel_allowed(c: Ctx) -> Draft:
    fare, days_ago, ins, status = (
        ("economy", 0.2, False, "scheduled"),
        ("economy", 15, True, "scheduled"),
        ("business", 20, False, "scheduled"),
        ("economy", 30, False, "cancelled"),
    )[c.k]
    p = c.member()
    f = c.pick(c.net.future(status, 0 if status == "cancelled" else 12), c.k)
    b = c.s.booking(p, [f], fare, days_ago=days_ago, insurance=ins, bags=1)
    reason = "airline_cancelled_flight" if status == "cancelled" else "change_of_plan"
    why = "you cancelled my flight" if status == "cancelled" else "my plans changed"
    prompt = f"{hello(p)} Please cancel reservation {b.code}, {why}. {GO}"
    gold = [C("get_reservation_details", reservation_code=b.code)]
    if status == "cancelled":
        gold.append(C("get_flight_status", flight_number=f.number, date=f.date))
    gold.append(
        C("cancel_reservation", user_id=p.user_code, reservation_code=b.code, reason=reason)
    )
    return Draft("cancel", prompt, gold, True)


def change_flights(c: Ctx) -> Draft:
    p = c.member("silver")
    up = c.k != 1
    fare = "business" if c.k == 2 else "economy"

    def fits(old: FlightInfo, new: FlightInfo) -> bool:
        diff = new.cabins[fare]["price"] - old.cabins[fare]["price"]
        return (diff > 0) == up and diff != 0 and new.cabins[fare]["left"] >= 1

    if c.k < 2:
        options = [(f, g) for f in c.net.future() for g in later(c, f, range(1, 3)) if fits(f, g)]
        f, target = c.choose(options)
        booked, new = [f], [target]
        ask = f"move my flight {f.text()} to {target.date} (same flight number)"
    else:
        trips = [
            (f, r, g)
            for f in c.net.future()
            for r in later(c, f, range(3, 4), RETURN_OF[f.number])
            for g in later(c, r, range(1, 3))
            if fits(r, g)
        ]
        f, r, target = c.choose(trips)
        booked, new = [f, r], [f, target]
        ask = f"keep my outbound flight but move my return {r.text()} to {target.date}"
    b = c.s.booking(p, booked, fare, days_ago=8)
    settle = "charge any difference to my Visa" if up else "refund any difference"
    prompt = f"{hello(p)} For reservation {b.code}, please {ask}; {settle}. {GO}"
    gold = [C("get_user_details", user_id=p.user_code)] if up else []
    gold += [
        C("get_reservation_details", reservation_code=b.code),
        C("search_flights", origin=target.origin, destination=target.destination, date=target.date),
        C(
            "change_flights",
            user_id=p.user_code,
            reservation_code=b.code,
            flights=[x.ref() for x in new],
            payment_method_id=p.methods["visa"] if up else None,
        ),
    ]
    return Draft("change_flights", prompt, gold, True)


def change_cabin(c: Ctx) -> Draft:
    old, new, n = (
        ("economy", "business", 1),
        ("basic_economy", "economy", 2),
        ("business", "economy", 1),
    )[c.k]
    p = c.member()
    f = c.pick([x for x in c.net.future() if c.s.seats_left(x, new) >= n], c.k)
    b = c.s.booking(p, [f], old, travellers=n, days_ago=5)
    diff = (f.cabins[new]["price"] - f.cabins[old]["price"]) * n
    up = diff > 0
    ask = "charge my Visa" if up else "refund the difference"
    prompt = (
        f"{hello(p)} Please change reservation {b.code} to {new.replace('_', ' ')}; {ask}. {GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code)] if up else []
    gold += [
        C("get_reservation_details", reservation_code=b.code),
        C(
            "change_cabin",
            user_id=p.user_code,
            reservation_code=b.code,
            fare_class=new,
            payment_method_id=p.methods["visa"] if up else None,
        ),
    ]
    return Draft("change_cabin", prompt, gold, True)


def update_passengers(c: Ctx) -> Draft:
    p = c.member()
    b = c.s.booking(p, [c.pick(c.net.future())], "economy", travellers=2, days_ago=6)
    rows = [r for r in c.s.rows["passengers"] if r["reservation_id"] == b.id]
    fixed = [dict(x) for x in b.passengers]
    if c.k == 0:
        rows[0]["last_name"] = p.last[:-1]  # the booking has a typo; `fixed` is right
        what = f"my last name is misspelled; it must be {p.last}"
    else:
        rows[1]["date_of_birth"] = "1990-01-01"
        what = (
            f"{fixed[1]['first_name']}'s date of birth is wrong; it is {fixed[1]['date_of_birth']}"
        )
    prompt = f"{hello(p)} On reservation {b.code}, {what}. Please fix it. {GO}"
    gold = [C("get_reservation_details", reservation_code=b.code),
            C("update_passengers", user_id=p.user_code, reservation_code=b.code,
              passengers=fixed)]  # fmt: skip
    return Draft("update_passengers", prompt, gold, True)


def add_baggage(c: Ctx) -> Draft:
    tier, fare, n, bags, extra, fee = (
        ("silver", "economy", 1, 2, 1, 50.0),
        ("gold", "business", 1, 1, 2, 0.0),
        ("regular", "economy", 2, 1, 3, 100.0),
    )[c.k]
    p = c.member(tier)
    b = c.s.booking(p, [c.pick(c.net.future(), c.k)], fare, travellers=n, bags=bags, days_ago=7)
    pay, pay_text = p.methods["visa"], "my Visa"
    if c.k == 2:
        pay, pay_text = c.s.method(p, "gift_card", "gift_card", 200.0), "my gift card"
    prompt = (
        f"{hello(p)} I need to add {extra} more checked bag(s) to reservation {b.code}. "
        f"If there's a fee, put it on {pay_text}. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C(
            "add_baggage",
            user_id=p.user_code,
            reservation_code=b.code,
            extra_bags=extra,
            payment_method_id=pay if fee else None,
        ),
    ]
    return Draft("add_baggage", prompt, gold, True)


def assign_seat(c: Ctx) -> Draft:
    fare, cabin = (("economy", "economy"), ("business", "business"))[c.k]
    p = c.member()
    f = c.pick(c.net.future(), c.k)
    b = c.s.booking(p, [f], fare, days_ago=5)
    seat = c.s.free_seat(f, cabin, 3)
    prompt = f"{hello(p)} On reservation {b.code}, I'd like seat {seat} on {f.text()}. {GO}"
    gold = [
        C("get_reservation_details", reservation_code=b.code),
        C("get_seat_map", flight_number=f.number, date=f.date, cabin=cabin),
        C(
            "assign_seat",
            user_id=p.user_code,
            reservation_code=b.code,
            ticket_number=b.tickets[0],
            flight_number=f.number,
            date=f.date,
            seat_no=seat,
        ),
    ]
    return Draft("assign_seat", prompt, gold, True)


def compensation(c: Ctx) -> Draft:
    tier, fare, n, ins, status = (
        ("silver", "economy", 2, False, "delayed"),
        ("regular", "economy", 1, True, "cancelled"),
        ("regular", "business", 1, False, "delayed"),
    )[c.k]
    p = c.member(tier)
    f = c.pick(c.net.future(status, 0), c.k)
    b = c.s.booking(p, [f], fare, travellers=n, insurance=ins, days_ago=14)
    prompt = (
        f"{hello(p)} My flight {f.text()} on reservation {b.code} was {status} and it "
        "ruined my plans. I'm keeping the reservation as it is, but I expect a "
        "compensation certificate."
    )
    gold = [C("get_user_details", user_id=p.user_code)] if c.k == 0 else []
    gold += [
        C("get_reservation_details", reservation_code=b.code),
        C("get_flight_status", flight_number=f.number, date=f.date),
        C("issue_compensation_certificate", user_id=p.user_code, reservation_code=b.code),
    ]
    return Draft("compensation", prompt, gold, True)
