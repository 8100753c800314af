"""Stories with several requests or reservations in one conversation (difficulty 4 to 8)."""

from __future__ import annotations

from envs.airline.ops import candidate_code
from envs.airline.taskgen.kit import GO, C, Ctx, Draft, hello, refused
from envs.airline.taskgen.writes import book_call, later, pax_text, travellers


def cancel_and_compensate(c: Ctx) -> Draft:
    p = c.member("gold")
    f = c.pick(c.net.future("cancelled", 0), 1)
    b = c.s.booking(p, [f], "economy", travellers=2, days_ago=25)
    prompt = (
        f"{hello(p)} You cancelled my flight {f.text()} (reservation {b.code}). Cancel the "
        f"whole reservation and refund us, and I'd like the compensation I'm owed. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C(
            "cancel_reservation",
            user_id=p.user_code,
            reservation_code=b.code,
            reason="airline_cancelled_flight",
        ),
        C("issue_compensation_certificate", user_id=p.user_code, reservation_code=b.code),
    ]
    return Draft("multi_cancel_compensate", prompt, gold, True)


def cancel_one_refuse_other(c: Ctx) -> Draft:
    p = c.member()
    a = c.s.booking(p, [c.pick(c.net.future())], "economy", days_ago=0.5)
    b = c.s.booking(p, [c.pick(c.net.future(), 4)], "economy", days_ago=12)
    prompt = (
        f"{hello(p)} Please cancel both of my reservations, {a.code} and {b.code}; I'm "
        f"not travelling anymore. {GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code),
            C("get_reservation_details", reservation_code=a.code),
            C("get_reservation_details", reservation_code=b.code),
            C("cancel_reservation", user_id=p.user_code, reservation_code=a.code,
              reason="change_of_plan")]  # fmt: skip
    why = f"Reservation {b.code} was booked over 24 hours ago: it cannot be cancelled."
    return refused("multi_partial_refusal", prompt, gold, "cancellation_not_allowed", why)


def upgrade_and_seats(c: Ctx) -> Draft:
    p = c.member("silver")
    f = c.pick([x for x in c.net.future() if len(x.free_seats["business"]) >= 4], c.k)
    b = c.s.booking(p, [f], "economy", travellers=2, days_ago=9)
    s1, s2 = c.s.free_seat(f, "business", 0), c.s.free_seat(f, "business", 1)
    prompt = (
        f"{hello(p)} Please upgrade reservation {b.code} to business for both of us, on "
        f"my Visa, and then seat me in {s1} and {b.passengers[1]['first_name']} in {s2}. "
        f"{GO}"
    )
    gold = [C("get_user_details", user_id=p.user_code)] if c.k else []
    gold += [
        C("get_reservation_details", reservation_code=b.code),
        C(
            "change_cabin",
            user_id=p.user_code,
            reservation_code=b.code,
            fare_class="business",
            payment_method_id=p.methods["visa"],
        ),
        C("get_seat_map", flight_number=f.number, date=f.date, cabin="business"),
    ]
    gold += [
        C(
            "assign_seat",
            user_id=p.user_code,
            reservation_code=b.code,
            ticket_number=t,
            flight_number=f.number,
            date=f.date,
            seat_no=s,
        )
        for t, s in zip(b.tickets, (s1, s2), strict=True)
    ]
    return Draft("multi_upgrade_seats", prompt, gold, True)


def book_with_seats(c: Ctx) -> Draft:
    p = c.member("silver")
    f = c.pick([x for x in c.net.future() if x.cabins["economy"]["left"] >= 2])
    pax = travellers(p, 2, c)
    code = candidate_code(p.user_code, f"0|{f.id}", 0)
    s1, s2 = c.s.free_seat(f, "economy", 6), c.s.free_seat(f, "economy", 7)
    prompt = (
        f"{hello(p)} Book flight {f.number} from {f.origin} to {f.destination} on "
        f"{f.date}, economy, one way, for {pax_text(pax)}. Two checked bags, no insurance, "
        f"my Visa. Then give us seats {s1} and {s2}. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("search_flights", origin=f.origin, destination=f.destination, date=f.date),
        book_call(
            p, "one_way", f.origin, f.destination, "economy", [f], pax, False, 2, p.methods["visa"]
        ),
        C("get_seat_map", flight_number=f.number, date=f.date, cabin="economy"),
    ]
    gold += [
        C(
            "assign_seat",
            user_id=p.user_code,
            reservation_code=code,
            ticket_number=f"{code}-{i}",
            flight_number=f.number,
            date=f.date,
            seat_no=s,
        )
        for i, s in ((1, s1), (2, s2))
    ]
    return Draft("multi_book_seats", prompt, gold, True)


def change_and_bags(c: Ctx) -> Draft:
    p = c.member("regular")
    options = [
        (f, g)
        for f in c.net.future()
        for g in later(c, f, range(1, 3))
        if g.cabins["economy"]["price"] > f.cabins["economy"]["price"]
    ]
    f, g = c.choose(options)
    b = c.s.booking(p, [f], "economy", days_ago=11, bags=1)
    prompt = (
        f"{hello(p)} For reservation {b.code}: move my flight {f.text()} to the same flight "
        f"on {g.date}, and add one more checked bag. Everything on my Visa. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C("search_flights", origin=g.origin, destination=g.destination, date=g.date),
        C(
            "change_flights",
            user_id=p.user_code,
            reservation_code=b.code,
            flights=[g.ref()],
            payment_method_id=p.methods["visa"],
        ),
        C(
            "add_baggage",
            user_id=p.user_code,
            reservation_code=b.code,
            extra_bags=1,
            payment_method_id=p.methods["visa"],
        ),
    ]
    return Draft("multi_change_bags", prompt, gold, True)


def fix_upgrade_seat(c: Ctx) -> Draft:
    p = c.member()
    f = c.pick(c.net.future(), 2)
    b = c.s.booking(p, [f], "basic_economy", days_ago=6)
    row = next(r for r in c.s.rows["passengers"] if r["reservation_id"] == b.id)
    row["first_name"] = p.first + "e"
    seat = c.s.free_seat(f, "economy", 2)
    prompt = (
        f"{hello(p, 'email')} Three things on reservation {b.code}: my first name is "
        f"misspelled, it should be {p.first}; upgrade me to regular economy on my Visa; and "
        f"then I'd like seat {seat}. {GO}"
    )
    gold = [
        C("find_user_by_email", email=p.email),
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C(
            "update_passengers",
            user_id=p.user_code,
            reservation_code=b.code,
            passengers=b.passengers,
        ),
        C(
            "change_cabin",
            user_id=p.user_code,
            reservation_code=b.code,
            fare_class="economy",
            payment_method_id=p.methods["visa"],
        ),
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
    return Draft("multi_fix_upgrade_seat", prompt, gold, True)


def trip_overhaul(c: Ctx) -> Draft:
    p = c.member("gold")
    options = [
        (f, g)
        for f in c.net.future()
        for g in later(c, f, range(1, 3))
        if g.cabins["business"]["price"] != f.cabins["business"]["price"]
    ]
    f, g = c.choose(options)
    b = c.s.booking(p, [f], "business", days_ago=10, bags=2)
    seat = c.s.free_seat(g, "business", 1)
    prompt = (
        f"{hello(p, 'email')} On reservation {b.code} please move me from {f.text()} to "
        f"the same flight on {g.date}, any fare difference on my Visa or back to how I "
        f"paid; seat me in {seat} on the new flight; and add three more checked bags, any fee "
        f"on my Visa. {GO}"
    )
    up = g.cabins["business"]["price"] > f.cabins["business"]["price"]
    gold = [
        C("find_user_by_email", email=p.email),
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C("search_flights", origin=g.origin, destination=g.destination, date=g.date),
        C(
            "change_flights",
            user_id=p.user_code,
            reservation_code=b.code,
            flights=[g.ref()],
            payment_method_id=p.methods["visa"] if up else None,
        ),
        C("get_seat_map", flight_number=g.number, date=g.date, cabin="business"),
        C(
            "assign_seat",
            user_id=p.user_code,
            reservation_code=b.code,
            ticket_number=b.tickets[0],
            flight_number=g.number,
            date=g.date,
            seat_no=seat,
        ),
        C(
            "add_baggage",
            user_id=p.user_code,
            reservation_code=b.code,
            extra_bags=3,
            payment_method_id=p.methods["visa"],
        ),
    ]
    return Draft("multi_overhaul", prompt, gold, True)


def compensate_and_rebook(c: Ctx) -> Draft:
    p = c.member("silver")
    options = [(f, g) for f in c.net.future("cancelled", 0) for g in later(c, f, range(1, 3))]
    f, g = c.choose(options)
    b = c.s.booking(p, [f], "economy", days_ago=21)
    cert = f"certificate_{b.code.lower()}"
    pax = travellers(p, 1, c)
    prompt = (
        f"{hello(p)} My flight {f.text()} (reservation {b.code}) was cancelled by you. "
        f"Cancel that reservation with a refund, give me the compensation I'm due, and "
        f"book me on {g.number} on {g.date} instead, economy, no bags, no insurance, using "
        f"that compensation certificate first and my Visa for the rest. {GO}"
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=b.code),
        C("get_flight_status", flight_number=f.number, date=f.date),
        C(
            "cancel_reservation",
            user_id=p.user_code,
            reservation_code=b.code,
            reason="airline_cancelled_flight",
        ),
        C("issue_compensation_certificate", user_id=p.user_code, reservation_code=b.code),
        C("search_flights", origin=g.origin, destination=g.destination, date=g.date),
        book_call(
            p,
            "one_way",
            g.origin,
            g.destination,
            "economy",
            [g],
            pax,
            False,
            0,
            p.methods["visa"],
            cert,
        ),
    ]
    return Draft("multi_compensate_rebook", prompt, gold, True)
