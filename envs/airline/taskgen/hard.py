"""The hard tier: long booking histories where a misread fact, a boundary or the order of the
steps changes the outcome.

`cancel_trips_to`: cancel every confirmed trip to a city that has not flown (14-22 reservations,
the 24-hour window drawn to the minute; two or three may be refused, one decline naming each)
and compensation for a delayed trip (tier, fare, insurance); at most one part is refused.
`bag_fee_quote`: the gift card's balance after adding bags to every confirmed upcoming trip to a
city (allowance by tier, fare and passengers; bags already checked).
`refund_then_bags`: cancel one trip (fare refunded to the gift card, bag fee to the Visa), then
add bags to another on the gift card only if a stated floor stays on it: the refund, or its
refusal at the 24-hour boundary, decides which card pays.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from envs.airline.rules import AIRPORTS, BAG_FEE, FREE_BAGS, MAX_BAGS_PER_PASSENGER
from envs.airline.taskgen.kit import (
    GO,
    Booking,
    C,
    Ctx,
    Draft,
    FlightInfo,
    Person,
    asked,
    hello,
    ident,
    money,
    refused,
)

CITY = {code: city for code, _, city in AIRPORTS}


def record_first(call: dict[str, Any], key: str = "reservation_code") -> dict[str, Any]:
    """A refused write with the record it concerns named first: the decline's subject is read
    from the refused call's identifiers in order, and the member's own id is not the record."""
    args = call["arguments"]
    return {**call, "arguments": {key: args[key], **{k: v for k, v in args.items() if k != key}}}


def cancel_call(p: Person, b: Booking) -> dict[str, Any]:
    return C(
        "cancel_reservation", user_id=p.user_code, reservation_code=b.code, reason="change_of_plan"
    )


def cancellable(c: Ctx) -> tuple[str, float, bool]:
    """(fare, days since booking, insurance) of a trip the policy lets the member cancel; the
    24-hour window is drawn to its last minute half the time."""
    rng = c.s.rng
    return c.choose(
        [
            ("economy", 1.0, False),  # booked exactly 24 hours ago: still inside
            ("basic_economy", (24 * 60 - rng.randint(1, 50)) / MINUTES_A_DAY, False),
            ("economy", rng.uniform(3, 40), True),
            ("business", rng.uniform(3, 40), False),
        ]
    )


def not_cancellable(c: Ctx) -> tuple[str, float, bool]:
    """A trip the policy refuses: past the window (by a few minutes, half the time), economy or
    basic economy, no insurance."""
    rng = c.s.rng
    fare = c.choose(["economy", "basic_economy"])
    if c.coin():
        return fare, (24 * 60 + rng.randint(1, 30)) / MINUTES_A_DAY, False
    return fare, rng.uniform(2, 40), False


MINUTES_A_DAY = 24 * 60


def cancel_trips_to(c: Ctx) -> Draft:
    rng = c.s.rng
    by = ("id", "email")[c.k]
    forbidden = c.choose(["none", "none", "cancel", "cancel", "compensation"])
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

    history: list[Booking] = []

    def book(f: FlightInfo, fare: str, days: float, ins: bool, n: int = 1) -> Booking:
        b = c.s.booking(p, [f], fare, days_ago=days, insurance=ins, travellers=n)
        history.append(b)
        return b

    # The trips to the city: 3-5; when the cancel part is refused, two or three of them are.
    n_targets = rng.randint(3, 5)
    n_refused = rng.randint(2, min(3, n_targets - 1)) if forbidden == "cancel" else 0
    kinds = [False] * n_refused + [True] * (n_targets - n_refused)
    rng.shuffle(kinds)
    targets: list[tuple[Booking, bool]] = []
    for ok in kinds:
        fare, days, ins = cancellable(c) if ok else not_cancellable(c)
        f = c.choose([x for x in to_dest if c.s.seats_left(x, fare) >= 2])
        targets.append((book(f, fare, days, ins, rng.randint(1, 2)), ok))
    # The delayed trip (elsewhere), and look-alikes: past trips to the city, trips elsewhere
    # (some booked within the window too), a trip to the city the member already cancelled.
    xf = c.choose([f for f in elsewhere if f.departure.hour < 19])
    x = book(xf, x_fare, rng.uniform(5, 40), x_ins, rng.randint(1, 3))
    c.s.set_status(xf, "delayed", rng.randrange(30, 300, 5))
    past = [f for f in c.net.departed() if f.destination == dest] or c.net.departed()
    for _ in range(rng.randint(3, 5)):
        book(c.choose(past), c.choose(["economy", "business"]), rng.uniform(30, 90), False)
    for _ in range(rng.randint(6, 10)):
        fare, days, ins = c.choose([cancellable, not_cancellable])(c)
        book(c.choose(elsewhere), fare, days, ins)
    gone = c.choose(to_dest)
    c.s.cancelled(book(gone, "economy", rng.uniform(5, 30), False))
    rng.shuffle(history)  # the order reservations were made in is not the order they matter

    prompt = (
        f"{hello(p, by)} I'm not going to {CITY[dest]} any more: please cancel every confirmed "
        f"reservation of mine to {CITY[dest]} ({dest}) whose flight hasn't left yet, with refunds. "
        f"Also, my flight on reservation {x.code} is delayed; if I'm owed compensation for it, "
        f"please issue the certificate. {GO}"
    )
    gold = [*ident(p, by), C("get_user_details", user_id=p.user_code)]
    gold += [C("get_reservation_details", reservation_code=b.code) for b in history]
    gold += [cancel_call(p, b) for b, ok in targets if ok]
    gold.append(C("get_flight_status", flight_number=xf.number, date=xf.date))
    owed = tier in ("silver", "gold") or eligible
    if owed:
        gold.append(
            C("issue_compensation_certificate", user_id=p.user_code, reservation_code=x.code)
        )
    if forbidden == "cancel":
        kept = [b for b, ok in targets if not ok]
        why = (
            f"{', '.join(b.code for b in kept)}: booked more than 24 hours ago, no insurance, "
            "not business: these cannot be cancelled."
        )
        draft = refused("hard_cancel_trips", prompt, gold, "cancellation_not_allowed", why)
        return replace(
            draft,
            forbidden=(record_first(cancel_call(p, kept[0])), "cancellation_not_allowed"),
            also_refused=tuple(record_first(cancel_call(p, b)) for b in kept[1:]),
        )
    if forbidden == "compensation":
        why = f"{x.code}: a regular member's economy fare without insurance earns no compensation."
        draft = refused("hard_cancel_trips", prompt, gold, "not_eligible_compensation", why)
        claim = C("issue_compensation_certificate", user_id=p.user_code, reservation_code=x.code)
        return replace(draft, forbidden=(record_first(claim), "not_eligible_compensation"))
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
    gone = c.s.booking(
        p, [c.choose([f for f in c.net.future() if f.destination == dest])], "economy", bags=1
    )
    c.s.cancelled(gone)  # a trip there the member already cancelled: not a trip any more
    history.append(gone)
    elsewhere = [f for f in c.net.future() if f.destination != dest]
    for _ in range(rng.randint(3, 6)):
        history.append(c.s.booking(p, [c.choose(elsewhere)], "economy", bags=0, days_ago=9))
    rng.shuffle(history)
    # The answer is the gift card's balance after those fees: it varies with the world.
    balance = round(total + rng.uniform(5, 400), 2)
    c.s.method(p, "gift_card", "gift_card", balance)
    prompt = (
        f"{hello(p)} I'm planning to bring {extra} more checked bag(s) per reservation on "
        f"every confirmed trip of mine to {CITY[dest]} ({dest}) that hasn't flown yet, paying "
        "the bag fees with my gift card. Don't add anything yet: what would be left on my gift "
        "card afterwards?"
    )
    gold = [C("get_user_details", user_id=p.user_code)]
    gold += [C("get_reservation_details", reservation_code=b.code) for b in history]
    return asked("hard_bag_fee_quote", prompt, gold, "amount", money(balance - total))


def refund_then_bags(c: Ctx) -> Draft:
    """Cancel the one upcoming trip to a city (its fare and insurance paid by gift card, its bag
    fee by Visa), then add bags to another trip on the gift card only if a floor stays on it;
    the cancel's refund (or its refusal at the 24-hour boundary) decides which card pays."""
    rng = c.s.rng
    by = ("id", "email")[c.k]
    p = c.member(c.choose(["regular", "silver", "gold"]))
    gift = c.s.method(p, "gift_card", "gift_card", 0.0)
    future = c.net.future()
    dest = c.choose(sorted({f.destination for f in future}))
    ok = c.coin()
    fare, days, ins = cancellable(c) if ok else not_cancellable(c)
    n_a = rng.randint(1, 2)
    fa = c.choose([f for f in future if f.destination == dest and c.s.seats_left(f, fare) >= 2])
    a_bags = FREE_BAGS[p.tier][fare] * n_a + rng.randint(1, 2)  # some bags paid for
    a = c.s.booking(
        p, [fa], fare, travellers=n_a, days_ago=days, insurance=ins, bags=a_bags, pay=gift
    )
    visa_id = next(m["id"] for m in c.s.rows["payment_methods"] if m["code"] == p.methods["visa"])
    to_gift = 0.0
    for row in c.s.rows["payments"]:
        if row["reservation_id"] != a.id:
            continue
        if row["purpose"] == "baggage":
            row["payment_method_id"] = visa_id  # the bag fee went on the card
        else:
            to_gift += row["amount"]
    refund = to_gift if ok else 0.0
    # The trip that gets the bags: elsewhere, with its free allowance partly used.
    others = [f for f in future if f.destination != dest]
    b_fare, n_b = c.choose(["economy", "business"]), rng.randint(1, 2)
    fb = c.choose([f for f in others if c.s.seats_left(f, b_fare) >= 2])
    allowance = FREE_BAGS[p.tier][b_fare] * n_b
    extra = rng.randint(2, 3)
    b_bags = max(0, min(allowance - rng.randint(0, 1), MAX_BAGS_PER_PASSENGER * n_b - extra))
    fee = BAG_FEE * (max(0, b_bags + extra - allowance) - max(0, b_bags - allowance))
    b = c.s.booking(p, [fb], b_fare, travellers=n_b, days_ago=rng.uniform(3, 30), bags=b_bags)
    # The gift card's balance is drawn so that the order of the steps decides.
    # The floor, high enough that the balance it implies is positive whatever the refund.
    floor = float(c.choose([100, 150, 200]) + 50 * math.ceil(refund / 50))
    if ok:
        needs_refund = c.coin()
        if needs_refund:  # enough only once the refund is back (exactly the floor, or above)
            delta = 0.0 if c.coin() else round(rng.uniform(0.01, refund - 0.01), 2)
        else:  # short of the floor by a little, even with the refund
            delta = -round(rng.uniform(0.01, 5), 2)
        balance = round(floor + fee - refund + delta, 2)
        pays_gift = needs_refund
    else:
        pays_gift = c.coin()
        delta = (0.0 if c.coin() else rng.uniform(0.01, 40)) if pays_gift else -rng.uniform(0.01, 5)
        balance = round(floor + fee + delta, 2)
    if balance < 1:
        raise ValueError("the refund outweighs the floor")  # the draw is dropped
    next(m for m in c.s.rows["payment_methods"] if m["code"] == gift)["balance"] = balance
    # Look-alikes: flown trips to the city, one the member cancelled, trips elsewhere.
    history = [a, b]
    past = [f for f in c.net.departed() if f.destination == dest] or c.net.departed()
    for _ in range(rng.randint(2, 4)):
        history.append(c.s.booking(p, [c.choose(past)], "economy", days_ago=rng.uniform(30, 90)))
    gone = c.s.booking(p, [c.choose([f for f in future if f.destination == dest])], "economy")
    c.s.cancelled(gone)
    history.append(gone)
    for _ in range(rng.randint(4, 7)):
        f = c.choose([x for x in others if x.destination != fb.destination])
        fare_x, days_x, ins_x = c.choose([cancellable, not_cancellable])(c)
        history.append(c.s.booking(p, [f], fare_x, days_ago=days_x, insurance=ins_x))
    rng.shuffle(history)

    card = c.s.last4(p.methods["visa"])
    prompt = (
        f"{hello(p, by)} I'd like to add {extra} checked bags to reservation {b.code}. Before "
        f"that, please cancel my upcoming trip to {CITY[dest]} ({dest}) with a refund. For the "
        f"bag fee, use my gift card if at least {money(floor)} stays on it after paying the fee "
        f"(exactly {money(floor)} is fine); otherwise charge my Visa ending in {card}. {GO}"
    )
    gold = [*ident(p, by), C("get_user_details", user_id=p.user_code)]
    gold += [C("get_reservation_details", reservation_code=h.code) for h in history]
    if ok:
        gold.append(cancel_call(p, a))
    method = gift if pays_gift else p.methods["visa"]
    gold.append(
        C(
            "add_baggage",
            user_id=p.user_code,
            reservation_code=b.code,
            extra_bags=extra,
            payment_method_id=method if fee else None,
        )
    )
    if ok:
        return Draft("hard_refund_then_bags", prompt, gold, True)
    why = f"{a.code}: booked more than 24 hours ago, {fare}, no insurance: it cannot be cancelled."
    draft = refused("hard_refund_then_bags", prompt, gold, "cancellation_not_allowed", why)
    return replace(draft, forbidden=(record_first(cancel_call(p, a)), "cancellation_not_allowed"))
