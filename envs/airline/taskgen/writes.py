"""Single-request write stories: one change the member asks for, after the reads it needs."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from envs.airline.rules import RETURN_OF
from envs.airline.taskgen.kit import GO, C, Ctx, Draft, FlightInfo, Person, hello, refused


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
    # The forbidden twin: fewer seats left in the fare than travellers, or the world's airline
    # cancelled the flight; which rule applies is in the data too.
    # A distractor's story is the allowed twin: a full or cancelled flight is a base-row update,
    # which keeps a distractor out (the namesake joins the seed as a member who books).
    full = c.coin() and not c.s.distractor
    rule = c.choose(["cabin_full", "flight_not_bookable"]) if full else ""
    if rule == "cabin_full":
        c.s.set_left(f, fare, n - 1)
    elif rule == "flight_not_bookable":
        c.s.set_status(f, "cancelled")
    cert = c.s.method(p, "certificate", "certificate", c.s.amount(40, 150)) if c.k == 2 else None
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
    ]
    if full:
        why = f"{f.text()} cannot take {n} {fare} passenger(s): it is full or cancelled."
        return refused("book", prompt, gold, rule, why)
    gold += [
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
    out, back = c.choose(pairs)
    # The forbidden twin: the return flight's economy cabin is sold out (never a distractor's).
    full = c.coin() and not c.s.distractor
    if full:
        c.s.set_left(back, "economy", 0)
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
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("search_flights", origin=out.origin, destination=out.destination, date=out.date),
        C("search_flights", origin=back.origin, destination=back.destination, date=back.date),
    ]
    if full:
        why = f"Economy on the return flight {back.text()} is sold out: no round trip to book."
        return refused("book", prompt, gold, "cabin_full", why)
    gold += [
        book_call(
            p, "round_trip", out.origin, out.destination, "economy", [out, back], pax, False, 0, pay
        )
    ]
    return Draft("book", prompt, gold, True)


def book_one_stop(c: Ctx) -> Draft:
    p = c.member("gold")
    legs = c.choose(
        [
            (a, b)
            for a in sorted(c.net.future(), key=lambda x: x.date)
            if a.number == "SG110"
            for b in later(c, a, range(0, 1), "SG120")
        ]
    )
    # The forbidden twin: the second leg's economy cabin is sold out (never a distractor's).
    full = c.coin() and not c.s.distractor
    if full:
        c.s.set_left(legs[1], "economy", 0)
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
    ]
    if full:
        why = f"Economy on {legs[1].text()} is sold out: the connection cannot be booked."
        return refused("book", prompt, gold, "cabin_full", why)
    gold += [
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
    claim = status == "cancelled"
    # The forbidden twin: the one fact that allowed it is not so (booked days ago, no insurance,
    # an economy fare, or the flight the member says was cancelled is operating).
    forbidden = c.coin()
    rule = "cancellation_not_allowed"
    if forbidden:  # which rule forbids it is in the data too
        rule = c.choose(["cancellation_not_allowed", "already_departed", "already_cancelled"])
    if rule == "cancellation_not_allowed" and forbidden:
        days_ago, ins, fare, status = (
            (3.0, ins, fare, status),
            (days_ago, False, fare, status),
            (days_ago, ins, "economy", status),
            (days_ago, ins, fare, "scheduled"),
        )[c.k]
    flights = c.net.future(status, 0 if status == "cancelled" else 12)
    f = c.pick(c.net.departed() if rule == "already_departed" else flights, c.k)
    b = c.s.booking(
        p,
        [f],
        fare,
        days_ago=max(days_ago, 20) if rule == "already_departed" else days_ago,
        insurance=ins,
        bags=1,
    )
    if rule == "already_cancelled":
        c.s.cancelled(b)
    reason = "airline_cancelled_flight" if status == "cancelled" else "change_of_plan"
    why = "you cancelled my flight" if claim else "my plans changed"
    prompt = f"{hello(p)} Please cancel reservation {b.code}, {why}. {GO}"
    gold = [C("get_reservation_details", reservation_code=b.code)]
    if claim:
        gold.append(C("get_flight_status", flight_number=f.number, date=f.date))
    if forbidden:
        msg = f"Reservation {b.code} cannot be cancelled ({rule.replace('_', ' ')})."
        return refused("cancel", prompt, gold, rule, msg)
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
    # The forbidden twin: the new flight has no seat left in the fare, or (economy trips) the
    # reservation turns out to be basic economy, whose flights never change.
    full = c.coin()
    rule = (
        c.choose(["cabin_full", "basic_economy_no_change"] if fare == "economy" else ["cabin_full"])
        if full
        else ""
    )
    booked_fare = "basic_economy" if rule == "basic_economy_no_change" else fare
    b = c.s.booking(p, booked, booked_fare, days_ago=8)
    if rule == "cabin_full":
        c.s.set_left(target, fare, 0)
    settle = "charge any difference to my Visa" if up else "refund any difference"
    prompt = f"{hello(p)} For reservation {b.code}, please {ask}; {settle}. {GO}"
    gold = [C("get_user_details", user_id=p.user_code)] if up else []
    gold.append(C("get_reservation_details", reservation_code=b.code))
    if rule == "basic_economy_no_change":
        why = f"Reservation {b.code} is basic economy: its flights cannot be changed."
        return refused("change_flights", prompt, gold, rule, why)
    gold.append(
        C("search_flights", origin=target.origin, destination=target.destination, date=target.date)
    )
    if full:
        why = f"{fare.capitalize()} on {target.text()} is sold out: {b.code} cannot move to it."
        return refused("change_flights", prompt, gold, "cabin_full", why)
    gold += [
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
    full = c.coin()  # the forbidden twin: the new fare is full, or the flight has departed
    rule = c.choose(["cabin_full", "already_departed"]) if full else ""
    flights = c.net.departed() if rule == "already_departed" else c.net.future()
    f = c.pick([x for x in flights if c.s.seats_left(x, new) >= n], c.k)
    b = c.s.booking(p, [f], old, travellers=n, days_ago=25 if rule == "already_departed" else 5)
    if rule == "cabin_full":
        c.s.set_left(f, new, n - 1)
    diff = (f.cabins[new]["price"] - f.cabins[old]["price"]) * n
    up = diff > 0
    ask = "charge my Visa" if up else "refund the difference"
    prompt = (
        f"{hello(p)} Please change reservation {b.code} to {new.replace('_', ' ')}; {ask}. {GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code)] if up else []
    gold.append(C("get_reservation_details", reservation_code=b.code))
    if rule == "already_departed":
        why = f"Flight {f.text()} of {b.code} has departed: its cabin cannot change."
        return refused("change_cabin", prompt, gold, rule, why)
    gold.append(C("search_flights", origin=f.origin, destination=f.destination, date=f.date))
    if full:
        why = f"Not enough {new.replace('_', ' ')} seats are left on {f.text()} for {b.code}."
        return refused("change_cabin", prompt, gold, "cabin_full", why)
    gold += [
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
    # The forbidden twin: the reservation's flight has departed, or it was cancelled.
    rule = c.choose(["already_departed", "already_cancelled"]) if c.coin() else ""
    flown = rule == "already_departed"
    f = c.pick(c.net.departed() if flown else c.net.future())
    b = c.s.booking(p, [f], "economy", travellers=2, days_ago=20 if flown else 6)
    if rule == "already_cancelled":
        c.s.cancelled(b)
    rows = [r for r in c.s.rows["passengers"] if r["reservation_id"] == b.id]
    fixed = [dict(x) for x in b.passengers]
    if c.k == 0:
        rows[0]["last_name"] = p.last[:-1]  # the booking has a typo; `fixed` is right
        what = f"my last name is misspelled; it must be {p.last}"
    else:
        rows[1]["date_of_birth"] = c.s.birthday(1950, 2015)
        if rows[1]["date_of_birth"] == fixed[1]["date_of_birth"]:
            rows[1]["date_of_birth"] = "1949-12-31"  # never the right date
        what = (
            f"{fixed[1]['first_name']}'s date of birth is wrong; it is {fixed[1]['date_of_birth']}"
        )
    prompt = f"{hello(p)} On reservation {b.code}, {what}. Please fix it. {GO}"
    gold = [C("get_reservation_details", reservation_code=b.code)]
    if rule:
        why = f"{b.code} cannot be changed any more ({rule.replace('_', ' ')})."
        return refused("update_passengers", prompt, gold, rule, why)
    gold.append(
        C("update_passengers", user_id=p.user_code, reservation_code=b.code, passengers=fixed)
    )
    return Draft("update_passengers", prompt, gold, True)


def add_baggage(c: Ctx) -> Draft:
    tier, fare, n, bags, extra, fee = (
        ("silver", "economy", 1, 2, 1, 50.0),
        ("gold", "business", 1, 1, 2, 0.0),
        ("regular", "economy", 2, 1, 3, 100.0),
    )[c.k]
    p = c.member(tier)
    # The forbidden twin: the bags already checked leave no room, or the flight has departed.
    rule = c.choose(["baggage_rules", "already_departed"]) if c.coin() else ""
    over = rule == "baggage_rules"
    if over:
        bags = 5 * n - extra + c.s.rng.randint(1, extra)
    flights = c.net.departed() if rule == "already_departed" else c.net.future()
    b = c.s.booking(p, [c.pick(flights, c.k)], fare, travellers=n, bags=bags, days_ago=7)
    pay, pay_text = p.methods["visa"], "my Visa"
    if c.k == 2:
        pay, pay_text = (
            c.s.method(p, "gift_card", "gift_card", c.s.amount(150, 400)),
            "my gift card",
        )
    prompt = (
        f"{hello(p)} I need to add {extra} more checked bag(s) to reservation {b.code}. "
        f"If there's a fee, put it on {pay_text}. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
    ]
    if rule:
        why = f"No bags can be added to {b.code} ({rule.replace('_', ' ')})."
        return refused("add_baggage", prompt, gold, rule, why)
    gold += [
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
    free = [(sid, no) for sid, no in f.free_seats[cabin] if sid not in c.s.taken]
    sid, seat = c.choose(free[1:])
    taken = c.coin()  # the forbidden twin: another member's passenger already sits there
    if taken:
        other = c.member()
        theirs = c.s.booking(other, [f], fare, days_ago=12)
        c.s.taken.add(sid)
        c.s.b.update("seats", sid, passenger_id=theirs.pax_ids[0])
    prompt = f"{hello(p)} On reservation {b.code}, I'd like seat {seat} on {f.text()}. {GO}"
    gold = [
        C("get_reservation_details", reservation_code=b.code),
        C("get_seat_map", flight_number=f.number, date=f.date, cabin=cabin),
    ]
    if taken:
        why = f"Seat {seat} on {f.text()} is taken; get_seat_map lists the free ones."
        return refused("assign_seat", prompt, gold, "seat_not_allowed", why)
    gold.append(
        C(
            "assign_seat",
            user_id=p.user_code,
            reservation_code=b.code,
            ticket_number=b.tickets[0],
            flight_number=f.number,
            date=f.date,
            seat_no=seat,
        )
    )
    return Draft("assign_seat", prompt, gold, True)


def compensation(c: Ctx) -> Draft:
    tier, fare, n, ins, status = (
        ("silver", "economy", 2, False, "delayed"),
        ("regular", "economy", 1, True, "cancelled"),
        ("regular", "business", 1, False, "delayed"),
    )[c.k]
    # The forbidden twin: the one fact that made it eligible is not so (a regular member, no
    # insurance, an economy fare).
    forbidden = c.coin()
    if forbidden:
        tier, ins, fare = (("regular", ins, fare), (tier, False, fare), (tier, ins, "economy"))[c.k]
    p = c.member(tier)
    f = c.pick(c.net.future(status, 0), c.k)
    b = c.s.booking(p, [f], fare, travellers=n, insurance=ins, days_ago=14)
    # The request carries the explicit confirmation the policy asks before every change.
    prompt = (
        f"{hello(p)} My flight {f.text()} on reservation {b.code} was {status} and it "
        "ruined my plans. I'm keeping the reservation as it is, but I expect a "
        f"compensation certificate. Please issue it if I'm owed one. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C("get_flight_status", flight_number=f.number, date=f.date),
    ]
    if forbidden:
        why = f"Reservation {b.code} is not eligible: a regular member's {fare} fare, no insurance."
        return refused("compensation", prompt, gold, "not_eligible_compensation", why)
    gold.append(C("issue_compensation_certificate", user_id=p.user_code, reservation_code=b.code))
    return Draft("compensation", prompt, gold, True)
