"""Lookup and refusal stories: the gold holds only reads and the state must not change."""

from __future__ import annotations

from datetime import date, timedelta

from envs.airline.rules import AIRPORTS, RETURN_OF
from envs.airline.taskgen.kit import (
    GO,
    C,
    Ctx,
    Draft,
    FlightInfo,
    asked,
    hello,
    ident,
    money,
    refused,
)

# ---- lookups: the gold submits the one answer (submit_answer), checked by value ---------------


def lookup_flight_status(c: Ctx) -> Draft:
    # The world decides the flight's state: on time, delayed by its own minutes, or cancelled.
    f = c.pick([x for x in c.net.future() if x.departure.hour < 19], c.k)
    state = c.choose(
        ["scheduled", "delayed", "delayed", "cancelled"]
        if c.k == 2
        else ["scheduled", "delayed", "delayed"]
    )
    delay = c.s.rng.randrange(15, 300, 5) if state == "delayed" else 0
    if state != "scheduled":
        c.s.set_status(f, state, delay)
    if c.k < 2:
        leaves = f.departure + timedelta(minutes=delay)
        prompt = (
            f"Hello, is flight {f.number} on {f.date} on time? If not, at what time (UTC) "
            "will it leave now?"
        )
        kind, value = "time", leaves.strftime("%H:%M")  # departures before 19:00 + < 5 h
    else:
        prompt = (
            f"Hi, what is the status of flight {f.number} on {f.date}? I need to know "
            "whether it is operating."
        )
        kind, value = "text", state  # the status as get_flight_status shows it
    gold = [C("get_flight_status", flight_number=f.number, date=f.date)]
    return asked("lookup", prompt, gold, kind, value)


def lookup_fare(c: Ctx) -> Draft:
    fare = ("economy", "business")[c.k]
    f = c.pick(c.net.future(), c.k)  # every route has one direct flight a day
    prompt = (
        f"Hi! How much does one {fare} seat cost on your direct flight from {f.origin} to "
        f"{f.destination} on {f.date}? I'm not a member yet."
    )
    gold = [C("search_flights", origin=f.origin, destination=f.destination, date=f.date)]
    return asked("lookup", prompt, gold, "amount", money(f.cabins[fare]["price"]))


def lookup_airports(c: Ctx) -> Draft:
    (a, _, city_a), (b, _, city_b) = c.s.rng.sample(AIRPORTS, 2)
    prompt = f"Which airport codes do you use for {city_a} and for {city_b}?"
    return asked("lookup", prompt, [C("list_airports")], "id", [a, b])


# Routes with no direct flight and exactly one connection a day (envs/airline/rules.py ROUTES).
CONNECTIONS = (("DFW", "MIA", "SG160", "SG150"), ("MIA", "DFW", "SG151", "SG161"),
               ("BOS", "LAX", "SG171", "SG131"))  # fmt: skip


def lookup_connection(c: Ctx) -> Draft:
    origin, dest, first, second = c.choose(list(CONNECTIONS))
    days = [
        day
        for day in (date(2026, 5, 11) + timedelta(days=i) for i in range(9))
        if (first, str(day)) in c.net.flights
        and (second, str(day)) in c.net.flights
        and c.net.get(first, day).status == c.net.get(second, day).status == "scheduled"
    ]
    day = c.choose(days)
    city = {code: name for code, _, name in AIRPORTS}
    prompt = (
        f"I need to get from {city[origin]} ({origin}) to {city[dest]} ({dest}) on {day}. If "
        "there is no direct flight, which two flights connect? Give me both flight numbers."
    )
    gold = [C("search_flights", origin=origin, destination=dest, date=str(day),
              include_one_stop=True)]  # fmt: skip
    return asked("lookup", prompt, gold, "id", [first, second])


def lookup_paid_total(c: Ctx) -> Draft:
    p = c.member("silver")
    f = c.pick(c.net.future())
    b = c.s.booking(p, [f], "economy", travellers=2, insurance=True, bags=5)
    prompt = f"{hello(p, 'email')} How much did I pay in total for reservation {b.code}?"
    gold = [*ident(p, "email"), C("get_reservation_details", reservation_code=b.code)]
    return asked("lookup", prompt, gold, "amount", money(b.paid))


def lookup_certificate(c: Ctx) -> Draft:
    p = c.member("gold")
    amount = c.s.amount(60, 400)
    c.s.method(p, "certificate", "certificate", amount)
    c.s.booking(p, [c.pick(c.net.future())], "business")
    prompt = f"{hello(p)} How much is left on my travel certificate?"
    gold = [C("get_user_details", user_id=p.user_code)]
    return asked("lookup", prompt, gold, "amount", money(amount))


def lookup_seat(c: Ctx) -> Draft:
    p = c.member()
    f = c.pick(c.net.future())
    b = c.s.booking(p, [f], "economy", seats=True)
    seat = next(r for r in c.s.rows["seats"] if r["passenger_id"] == b.pax_ids[0])
    seat_no = next(no for sid, no in f.free_seats["economy"] if sid == seat["id"])
    prompt = f"{hello(p)} Which seat do I have on flight {f.number} ({b.code})?"
    gold = [C("get_reservation_details", reservation_code=b.code)]
    return asked("lookup", prompt, gold, "id", seat_no)


# ---- refusals and their allowed twins: the same request, and the data decides -------------
# Each family draws a coin: one world forbids the request (the gold declines with the rule's
# reason code), the other permits it (the gold acts), so the wording never predicts the outcome.


def later_flight(c: Ctx, f: FlightInfo, days: int = 1) -> FlightInfo | None:
    """The same flight number `days` later, if it is scheduled."""
    g = c.net.flights.get((f.number, str(date.fromisoformat(f.date) + timedelta(days=days))))
    return g if g is not None and g.status == "scheduled" else None


def refuse_cancel(c: Ctx) -> Draft:
    by = ("id", "email")[c.k]
    fare = ("economy", "basic_economy")[c.k]
    p = c.member()
    allowed = c.coin()
    # The allowed twin: booked within 24 hours, or insured, or (economy only) a business fare.
    days, ins = 9.0, False
    if allowed:
        days, ins, fare = c.choose(
            [(0.4, False, fare), (9.0, True, fare), (9.0, False, "business")]
        )
    b = c.s.booking(p, [c.pick(c.net.future())], fare, days_ago=days, insurance=ins)
    # Forbidden by one rule or another: too old to cancel, or cancelled already.
    rule = "" if allowed else c.choose(["cancellation_not_allowed", "already_cancelled"])
    if rule == "already_cancelled":
        c.s.cancelled(b)
    prompt = f"{hello(p, by)} My plans changed, please cancel reservation {b.code}. {GO}"
    gold = [*ident(p, by), C("get_reservation_details", reservation_code=b.code)]
    if allowed:
        gold.append(
            C(
                "cancel_reservation",
                user_id=p.user_code,
                reservation_code=b.code,
                reason="change_of_plan",
            )
        )
        return Draft("refuse_cancel", prompt, gold, True)
    why = f"Reservation {b.code} cannot be cancelled ({rule.replace('_', ' ')})."
    return refused("refuse_cancel", prompt, gold, rule, why)


def refuse_basic_change(c: Ctx) -> Draft:
    p = c.member("silver")
    allowed = c.coin()
    fare = "economy" if allowed else "basic_economy"
    pairs = [(f, g) for f in c.net.future() if (g := later_flight(c, f)) is not None]
    f, later = c.choose(pairs)
    b = c.s.booking(p, [f], fare, days_ago=4)
    prompt = (
        f"{hello(p)} Please move my reservation {b.code} from {f.text()} to the same flight "
        f"one day later, {later.date}. I'll pay any difference with my Visa. {GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code),
            C("get_reservation_details", reservation_code=b.code)]  # fmt: skip
    if allowed:
        up = later.cabins[fare]["price"] > f.cabins[fare]["price"]
        gold += [
            C("search_flights", origin=f.origin, destination=f.destination, date=later.date),
            C(
                "change_flights",
                user_id=p.user_code,
                reservation_code=b.code,
                flights=[later.ref()],
                payment_method_id=p.methods["visa"] if up else None,
            ),
        ]
        return Draft("refuse_basic_change", prompt, gold, True)
    why = f"Reservation {b.code} is basic economy: its flights cannot be changed."
    return refused("refuse_basic_change", prompt, gold, "basic_economy_no_change", why)


def refuse_departed(c: Ctx) -> Draft:
    p = c.member()
    allowed = c.coin()
    outs = c.net.future() if allowed else c.net.departed()
    trips = [
        (f, r, g)
        for f in outs
        if (
            r := c.net.flights.get(
                (RETURN_OF[f.number], str(date.fromisoformat(f.date) + timedelta(days=4)))
            )
        )
        and r.status == "scheduled"
        and (g := later_flight(c, r)) is not None
    ]
    out, back, moved = c.choose(trips)
    b = c.s.booking(p, [out, back], "economy", days_ago=20)
    prompt = (
        f"{hello(p)} For my trip {b.code}, please move my return flight {back.text()} to "
        f"the same flight one day later; any difference goes on my Visa. {GO}"
    )
    gold = [C("get_reservation_details", reservation_code=b.code)]
    if allowed:
        up = moved.cabins["economy"]["price"] > back.cabins["economy"]["price"]
        gold += [
            C("search_flights", origin=back.origin, destination=back.destination, date=moved.date),
            C(
                "change_flights",
                user_id=p.user_code,
                reservation_code=b.code,
                flights=[out.ref(), moved.ref()],
                payment_method_id=p.methods["visa"] if up else None,
            ),
        ]
        return Draft("refuse_departed", prompt, gold, True)
    why = f"Flight {out.text()} of reservation {b.code} has departed: nothing can be changed."
    return refused("refuse_departed", prompt, gold, "already_departed", why)


def refuse_compensation(c: Ctx) -> Draft:
    allowed = c.coin()
    # Eligible: a silver or gold member, a business fare, or insurance (one of them).
    tier, fare, ins = ("regular", "economy", False)
    if allowed:
        tier, fare, ins = c.choose(
            [
                ("silver", "economy", False),
                ("gold", "economy", False),
                ("regular", "business", False),
                ("regular", "economy", True),
            ]
        )
    p = c.member(tier)
    f = c.pick(c.net.future("delayed", 0))
    b = c.s.booking(p, [f], fare, days_ago=12, insurance=ins)
    prompt = (
        f"{hello(p)} My flight {f.text()} (reservation {b.code}) is delayed and I'm "
        f"furious. I want a compensation certificate for this. {GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code),
            C("get_reservation_details", reservation_code=b.code)]  # fmt: skip
    if allowed:
        gold.append(
            C("issue_compensation_certificate", user_id=p.user_code, reservation_code=b.code)
        )
        return Draft("refuse_compensation", prompt, gold, True)
    why = f"Reservation {b.code} (regular member, economy, no insurance) gets no compensation."
    return refused("refuse_compensation", prompt, gold, "not_eligible_compensation", why)


def refuse_other_member(c: Ctx) -> Draft:
    p = c.member("gold")
    c.s.booking(p, [c.pick(c.net.future())], "business")
    other = c.member()
    allowed = c.coin()
    # Allowed: the member booked it themselves for the colleague (the colleague travels on it).
    owner = p if allowed else other
    theirs = c.s.booking(owner, [c.pick(c.net.future(), 3)], "business", days_ago=0.2)
    if allowed:
        row = next(r for r in c.s.rows["passengers"] if r["reservation_id"] == theirs.id)
        row.update(first_name=other.first, last_name=other.last, date_of_birth=other.dob)
    prompt = (
        f"{hello(p)} Please cancel reservation {theirs.code}; it's my colleague "
        f"{other.name}'s trip, they asked me to do it. {GO}"
    )
    gold = [C("get_reservation_details", reservation_code=theirs.code)]
    if allowed:
        gold.append(
            C(
                "cancel_reservation",
                user_id=p.user_code,
                reservation_code=theirs.code,
                reason="change_of_plan",
            )
        )
        return Draft("refuse_other_member", prompt, gold, True)
    why = f"Reservation {theirs.code} belongs to another member; only they can cancel it."
    return refused("refuse_other_member", prompt, gold, "other_member", why)


def refuse_seat_basic(c: Ctx) -> Draft:
    p = c.member()
    f = c.pick(c.net.future())
    allowed = c.coin()
    b = c.s.booking(p, [f], "economy" if allowed else "basic_economy", days_ago=3)
    seat = c.s.free_seat(f, "economy")
    prompt = f"{hello(p)} Can I get seat {seat} on {f.text()} for reservation {b.code}? {GO}"
    gold = [C("get_reservation_details", reservation_code=b.code)]
    if allowed:
        gold += [
            C("get_seat_map", flight_number=f.number, date=f.date, cabin="economy"),
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
        return Draft("refuse_seat_basic", prompt, gold, True)
    why = f"Reservation {b.code} is basic economy: seats are assigned at check-in."
    return refused("refuse_seat_basic", prompt, gold, "seat_not_allowed", why)


def refuse_full_cabin(c: Ctx) -> Draft:
    p = c.member("silver")
    f = c.pick([x for x in c.net.future() if x.cabins["business"]["left"] >= 1])
    allowed = c.coin()
    b = c.s.booking(p, [f], "economy", days_ago=6)
    if not allowed:
        c.s.set_left(f, "business", 0)
    prompt = (
        f"{hello(p)} I'd like to upgrade reservation {b.code} to business, charge my Visa. {GO}"
    )
    gold = [
        C("get_reservation_details", reservation_code=b.code),
        C("search_flights", origin=f.origin, destination=f.destination, date=f.date),
    ]
    if allowed:
        gold += [
            C("get_user_details", user_id=p.user_code),
            C(
                "change_cabin",
                user_id=p.user_code,
                reservation_code=b.code,
                fare_class="business",
                payment_method_id=p.methods["visa"],
            ),
        ]
        return Draft("refuse_full_cabin", prompt, gold, True)
    why = f"Business on {f.text()} is sold out, so {b.code} cannot be upgraded."
    return refused("refuse_full_cabin", prompt, gold, "cabin_full", why)
