"""Conversational stories: the member is on the line (`Draft.user`), tells what the request
leaves out only when asked, and confirms (or corrects, or changes their mind about) the exact
change the agent proposes before it is made. Each has twins whose data forbid the change: the
gold then declines with the rule's code, proposes nothing and writes nothing.
"""

from __future__ import annotations

from app.sdk.taskgen import UserChange, UserFact, UserScript
from envs.airline.taskgen.kit import C, Ctx, Draft, FlightInfo, Person, hello, money
from envs.airline.taskgen.writes import later

# Phrases by which an honest agent asks which reservation the member means.
WHICH_RESERVATION = [
    "reservation code",
    "booking code",
    "confirmation code",
    "which reservation",
    "which booking",
    "which trip",
    "which one",
    "which flight",
]
YES = "Yes, please go ahead."


def _draft(family: str, prompt: str, gold: list, user: UserScript, writes: bool) -> Draft:
    return Draft(family, prompt, gold, writes, user=user)


def _declined(
    family: str, prompt: str, gold: list, user: UserScript, code: str, message: str
) -> Draft:
    """The twin whose data forbid the change: the gold declines (no proposal, no write)."""
    return Draft(family, prompt, gold, False, decline=code, decline_message=message, user=user)


def _card(c: Ctx, p: Person) -> tuple[str, str, list[str]]:
    """(the Visa's id, how a proposal names it, the look-alike card's ids)."""
    visa = p.methods["visa"]
    other = [code for label, code in p.methods.items() if label != "visa"]
    return visa, f"your Visa ending {c.s.last4(visa)} ({visa})", other


def talk_cancel(c: Ctx) -> Draft:
    """Facts revealed over turns: which reservation and why only when asked."""
    fare, ins, days_ago = (("economy", True, 15), ("business", False, 20), ("economy", False, 0.2))[
        c.k
    ]
    p = c.member()
    # The forbidden twin: the one fact that allowed it is not so (no insurance, an economy fare,
    # booked days ago).
    forbidden = c.coin()
    if forbidden:
        fare, ins, days_ago = (
            ("economy", False, 15),
            ("economy", False, 20),
            ("economy", False, 3.0),
        )[c.k]
    f = c.pick(c.net.future())
    other_flight = c.pick([x for x in c.net.future() if x.destination != f.destination])
    mine_first = c.coin()  # which of the two the member booked first (listed last)
    if not mine_first:
        other = c.s.booking(p, [other_flight], "economy", days_ago=40)
    b = c.s.booking(p, [f], fare, days_ago=days_ago, insurance=ins, bags=1)
    if mine_first:
        other = c.s.booking(p, [other_flight], "economy", days_ago=40)
    why = c.choose(["my plans changed", "my trip was called off", "I can't travel any more"])
    prompt = f"{hello(p)} I need to cancel one of my reservations."
    user = UserScript(
        goal=f"Cancel reservation {b.code} ({f.text()}) because {why}.",
        facts=[
            UserFact(
                key="reservation_code",
                value=b.code,
                asked_by=WHICH_RESERVATION,
                reply=f"It's reservation {b.code}, {f.origin} to {f.destination} on {f.date}.",
            ),
            UserFact(
                key="reason",
                value="change_of_plan",
                asked_by=["why", "reason"],
                reply=f"The reason: {why}.",
            ),
        ],
        changes=[
            UserChange(
                tools=["cancel_reservation"],
                identifiers=[b.code],
                wrong=[other.code],
                yes=YES,
                correction=f"No, not that one: I mean reservation {b.code}, on {f.date}.",
            )
        ],
        unclear="I'd like to cancel one of my reservations, please.",
    )
    gold = [
        C(
            "message_user",
            text="Which reservation would you like to cancel (the booking "
            "code), and what is the reason for the cancellation?",
        ),
        C("get_reservation_details", reservation_code=b.code),
    ]
    if forbidden:
        msg = f"Reservation {b.code} cannot be cancelled under our cancellation rules."
        return _declined("talk_cancel", prompt, gold, user, "cancellation_not_allowed", msg)
    gold += [
        C(
            "message_user",
            text=f"Reservation {b.code} ({f.number} from {f.origin} to {f.destination} on "
            f"{f.date}) can be cancelled; the refund goes back to the original payment. I "
            f"will cancel reservation {b.code} (reason: change of plan). Shall I proceed?",
        ),
        C(
            "cancel_reservation",
            user_id=p.user_code,
            reservation_code=b.code,
            reason="change_of_plan",
        ),
    ]
    return _draft("talk_cancel", prompt, gold, user, True)


def talk_add_bags(c: Ctx) -> Draft:
    """Confirm or correct: two trips to the same city; the member's date picks one."""
    tier, fare, n, bags, extra, fee = (
        ("silver", "economy", 1, 2, 1, 50.0),
        ("gold", "business", 1, 1, 2, 0.0),
        ("regular", "economy", 2, 1, 3, 100.0),
    )[c.k]
    p = c.member(tier)
    pairs = [(f, g) for f in c.net.future() for g in later(c, f, range(2, 6))]
    f, g = c.choose(pairs)
    mine, theirs = (f, g) if c.coin() else (g, f)
    # The forbidden twin: the bags already checked on the trip leave no room for more.
    over = c.coin()
    if over:
        bags = 5 * n - extra + c.s.rng.randint(1, extra)
    first = c.coin()
    if first:
        twin = c.s.booking(p, [theirs], fare, travellers=n, bags=1, days_ago=9)
    b = c.s.booking(p, [mine], fare, travellers=n, bags=bags, days_ago=7)
    if not first:
        twin = c.s.booking(p, [theirs], fare, travellers=n, bags=1, days_ago=9)
    visa, visa_text, cards = _card(c, p)
    prompt = (
        f"{hello(p)} Please add {extra} checked bag(s) to my trip to {mine.destination}. If "
        "there's a fee, put it on my Visa."
    )
    ids = [b.code, visa] if fee else [b.code]
    user = UserScript(
        goal=f"Add {extra} checked bag(s) to reservation {b.code} ({mine.text()}); any fee on "
        "the Visa.",
        facts=[
            UserFact(
                key="flight",
                value=mine.date,
                asked_by=[*WHICH_RESERVATION, "which date", "what date", "when"],
                reply=f"The one on {mine.date}, flight {mine.number}.",
            )
        ],
        changes=[
            UserChange(
                tools=["add_baggage"],
                identifiers=ids,
                wrong=[twin.code, *(cards if fee else [])],
                yes=YES,
                correction=f"No, that's not the one: my trip on {mine.date}, and the Visa.",
            )
        ],
        unclear=f"I need more checked bags on my trip to {mine.destination}.",
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=twin.code),
        C("get_reservation_details", reservation_code=b.code),
        C(
            "message_user",
            text=f"You have two trips to {mine.destination}: reservation {b.code} on "
            f"{mine.date} and reservation {twin.code} on {theirs.date}. Which one is it?",
        ),
    ]
    if over:
        msg = f"Reservation {b.code} already has the most checked bags allowed."
        return _declined("talk_add_bags", prompt, gold, user, "baggage_rules", msg)
    charge = f"the fee of {money(fee)} goes on {visa_text}" if fee else "there is no fee"
    gold += [
        C(
            "message_user",
            text=f"I will add {extra} checked bag(s) to reservation {b.code} ({mine.text()}); "
            f"{charge}. Shall I proceed?",
        ),
        C(
            "add_baggage",
            user_id=p.user_code,
            reservation_code=b.code,
            extra_bags=extra,
            payment_method_id=visa if fee else None,
        ),
    ]
    return _draft("talk_add_bags", prompt, gold, user, True)


def _upgrade_text(code: str, f: FlightInfo, old: str, new: str, diff: float, card: str) -> str:
    return (
        f"Changing reservation {code} ({f.text()}) from {old.replace('_', ' ')} to "
        f"{new.replace('_', ' ')} costs {money(diff)} in total, charged to {card}. Shall I "
        "proceed?"
    )


def talk_change_cabin(c: Ctx) -> Draft:
    """Change of mind: on the first right proposal the member wants their other trip upgraded."""
    old, new, n = (
        ("economy", "business", 1),
        ("economy", "business", 2),
        ("basic_economy", "economy", 1),
    )[c.k]
    p = c.member()
    options = [x for x in c.net.future() if x.cabins[new]["price"] > x.cabins[old]["price"]]
    f = c.pick([x for x in options if c.s.seats_left(x, new) >= n])
    g = c.pick([x for x in options if x.date != f.date and c.s.seats_left(x, new) >= n])
    a = c.s.booking(p, [f], old, travellers=n, days_ago=6)
    b = c.s.booking(p, [g], old, travellers=n, days_ago=11)
    # The forbidden twin: the trip the member finally wants has too few seats in the new cabin.
    full = c.coin()
    if c.s.b.world is None:  # the shipped set: both twins, the change made in two of three
        full = c.k == 1
    if full:
        c.s.set_left(g, new, n - 1)
    visa, visa_text, _ = _card(c, p)
    diff_a = (f.cabins[new]["price"] - f.cabins[old]["price"]) * n
    diff_b = (g.cabins[new]["price"] - g.cabins[old]["price"]) * n
    label = new.replace("_", " ")
    prompt = (
        f"{hello(p)} Please change reservation {a.code} to {label}; charge the difference to "
        "my Visa."
    )
    user = UserScript(
        goal=f"First {a.code} to {label}, then instead {b.code} ({g.text()}) to {label}, on "
        "the Visa.",
        changes=[
            UserChange(
                tools=["change_cabin"],
                identifiers=[a.code, visa],
                wrong=[b.code],
                yes=YES,
                correction=f"No: reservation {a.code}, on my Visa.",
                change_of_mind=f"Hmm, actually, leave {a.code} as it is. Please upgrade my other "
                f"trip instead, the {g.origin} to {g.destination} flight on {g.date}.",
            ),
            UserChange(
                tools=["change_cabin"],
                identifiers=[b.code, visa],
                wrong=[a.code],
                yes="Yes, that's the one. Go ahead.",
                correction=f"No, I changed my mind: my trip on {g.date} instead, on my Visa.",
            ),
        ],
        unclear=f"I'd like reservation {a.code} changed to {label}, on my Visa.",
    )
    gold = [
        C("get_user_details", user_id=p.user_code),
        C("get_reservation_details", reservation_code=a.code),
        C("search_flights", origin=f.origin, destination=f.destination, date=f.date),
        C("message_user", text=_upgrade_text(a.code, f, old, new, diff_a, visa_text)),
        C("get_reservation_details", reservation_code=b.code),
        C("search_flights", origin=g.origin, destination=g.destination, date=g.date),
    ]
    if full:
        msg = f"Not enough {label} seats are left on {g.text()} for reservation {b.code}."
        return _declined("talk_change_cabin", prompt, gold, user, "cabin_full", msg)
    gold += [
        C("message_user", text=_upgrade_text(b.code, g, old, new, diff_b, visa_text)),
        C(
            "change_cabin",
            user_id=p.user_code,
            reservation_code=b.code,
            fare_class=new,
            payment_method_id=visa,
        ),
    ]
    return _draft("talk_change_cabin", prompt, gold, user, True)


FAMILIES = (talk_cancel, talk_add_bags, talk_change_cabin)
