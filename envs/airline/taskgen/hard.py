"""The hard tier: requests over a long booking history, with several intents or a computation.

`cancel_trips_to`: a member with 10-16 reservations asks to cancel every one to a city whose
flight has not left (found only by reading each reservation), and for compensation on a delayed
trip. What the data says decides each part: a trip to the city may or may not be cancellable
(24 hours, insurance, business fare), the delayed trip may or may not earn compensation (tier,
fare, insurance). At most one part is forbidden (a conversation declines at most once), so the
gold ends with one decline naming that rule, or with none.
`bag_fee_quote`: the total bag fee of adding bags to every upcoming trip to a city, computed
from the tier's allowance, each trip's fare, passengers and the bags already checked.
"""

from __future__ import annotations

from envs.airline.rules import AIRPORTS, BAG_FEE, FREE_BAGS
from envs.airline.taskgen.kit import (
    GO,
    Booking,
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

CITY = {code: city for code, _, city in AIRPORTS}


def cancel_trips_to(c: Ctx) -> Draft:
    rng = c.s.rng
    by = ("id", "email")[c.k]
    forbidden = c.choose(["none", "none", "cancel", "compensation"])  # half the draws decline
    dest = c.choose(sorted({f.destination for f in c.net.future()}))
    to_dest = [f for f in c.net.future() if f.destination == dest]
    elsewhere = [f for f in c.net.future() if f.destination != dest]
    # The compensation part: regular tier and a plain economy trip earn nothing; silver or gold,
    # a business fare or insurance earn a certificate.
    tier = "regular" if forbidden == "compensation" else c.choose(["regular", "silver", "gold"])
    p = c.member(tier)
    eligible = forbidden != "compensation" and tier == "regular"
    x_fare, x_ins = "economy", False
    if eligible:  # a regular member needs the fare or the insurance
        x_fare, x_ins = c.choose([("business", False), ("economy", True)])

    history: list[tuple[Booking, FlightInfo]] = []

    def book(f: FlightInfo, fare: str, days: float, ins: bool) -> Booking:
        b = c.s.booking(p, [f], fare, days_ago=days, insurance=ins)
        history.append((b, f))
        return b

    # The trips to the city: 2-4, each cancellable or not by the data; at least one cancellable,
    # and at least one not when the cancel part is the forbidden one.
    n_targets = rng.randint(2, 4)
    targets: list[tuple[Booking, bool]] = []
    for i in range(n_targets):
        ok = forbidden != "cancel" or i == 0 or (i > 1 and rng.random() < 0.5)
        if ok:
            fare, days, ins = c.choose(
                [
                    ("economy", rng.uniform(0.2, 0.9), False),
                    ("economy", rng.uniform(3, 40), True),
                    ("business", rng.uniform(3, 40), False),
                ]
            )
        else:
            fare, days, ins = c.choose(["economy", "basic_economy"]), rng.uniform(2, 40), False
        targets.append((book(c.choose(to_dest), fare, days, ins), ok))
    # The delayed trip (elsewhere), and look-alikes: past trips to the city, trips elsewhere.
    xf = c.choose([f for f in elsewhere if f.departure.hour < 19])
    x = book(xf, x_fare, rng.uniform(5, 40), x_ins)
    c.s.set_status(xf, "delayed", rng.randrange(30, 300, 5))
    for _ in range(rng.randint(2, 4)):
        past = [f for f in c.net.departed() if f.destination == dest] or c.net.departed()
        book(c.choose(past), "economy", rng.uniform(30, 90), False)
    for _ in range(rng.randint(3, 6)):
        book(c.choose(elsewhere), c.choose(["economy", "basic_economy"]), rng.uniform(1, 60), False)
    rng.shuffle(history)  # the order reservations were made in is not the order they matter

    prompt = (
        f"{hello(p, by)} I'm not going to {CITY[dest]} any more: please cancel every reservation "
        f"of mine to {CITY[dest]} ({dest}) whose flight hasn't left yet, with refunds. Also, my "
        f"flight on reservation {x.code} is delayed; if I'm owed compensation for it, please "
        f"issue the certificate. {GO}"
    )
    gold = [*ident(p, by), C("get_user_details", user_id=p.user_code)]
    gold += [C("get_reservation_details", reservation_code=b.code) for b, _ in history]
    gold += [
        C(
            "cancel_reservation",
            user_id=p.user_code,
            reservation_code=b.code,
            reason="change_of_plan",
        )
        for b, ok in targets
        if ok
    ]
    gold.append(C("get_flight_status", flight_number=xf.number, date=xf.date))
    owed = tier in ("silver", "gold") or eligible
    if owed:
        gold.append(
            C("issue_compensation_certificate", user_id=p.user_code, reservation_code=x.code)
        )
    if forbidden == "cancel":
        kept = ", ".join(b.code for b, ok in targets if not ok)
        why = f"{kept}: booked over 24 hours ago, no insurance, not business: not cancellable."
        return refused("hard_cancel_trips", prompt, gold, "cancellation_not_allowed", why)
    if forbidden == "compensation":
        why = f"{x.code}: a regular member's economy fare without insurance earns no compensation."
        return refused("hard_cancel_trips", prompt, gold, "not_eligible_compensation", why)
    return Draft("hard_cancel_trips", prompt, gold, True)


def bag_fee_quote(c: Ctx) -> Draft:
    """A computation over a history: the bag fees of adding bags to every upcoming trip to a
    city, from the member's tier, each trip's fare, passengers and bags already checked."""
    rng = c.s.rng
    dest = c.choose(sorted({f.destination for f in c.net.future()}))
    p = c.member(c.choose(["regular", "silver", "gold"]))
    extra = rng.randint(1, 2)
    history: list[Booking] = []
    total = 0.0
    for _ in range(rng.randint(2, 4)):  # the trips that count, each with its own allowance
        f = c.choose([x for x in c.net.future() if x.destination == dest])
        fare, n = c.choose(["basic_economy", "economy", "business"]), rng.randint(1, 3)
        if c.s.seats_left(f, fare) < n:
            continue
        bags = rng.randint(0, 5 * n - extra)
        history.append(
            c.s.booking(p, [f], fare, travellers=n, bags=bags, days_ago=rng.uniform(1, 40))
        )
        allowance = FREE_BAGS[p.tier][fare] * n
        total += BAG_FEE * (max(0, bags + extra - allowance) - max(0, bags - allowance))
    if not history:
        raise ValueError("no trip to the city had seats left")  # the draw is dropped
    past = [f for f in c.net.departed() if f.destination == dest] or c.net.departed()
    for _ in range(rng.randint(2, 4)):  # look-alikes: trips there that have flown, others
        history.append(c.s.booking(p, [c.choose(past)], "economy", bags=1, days_ago=60))
    elsewhere = [f for f in c.net.future() if f.destination != dest]
    for _ in range(rng.randint(3, 6)):
        history.append(c.s.booking(p, [c.choose(elsewhere)], "economy", bags=0, days_ago=9))
    rng.shuffle(history)
    # The answer is the gift card's balance after those fees: it varies with the world.
    balance = round(total + rng.uniform(5, 400), 2)
    c.s.method(p, "gift_card", "gift_card", balance)
    prompt = (
        f"{hello(p)} I'm planning to bring {extra} more checked bag(s) per reservation on every "
        f"trip of mine to {CITY[dest]} ({dest}) that hasn't flown yet, paying the bag fees with "
        "my gift card. Don't add anything yet: what would be left on my gift card afterwards?"
    )
    gold = [C("get_user_details", user_id=p.user_code)]
    gold += [C("get_reservation_details", reservation_code=b.code) for b in history]
    return asked("hard_bag_fee_quote", prompt, gold, "amount", money(balance - total))
