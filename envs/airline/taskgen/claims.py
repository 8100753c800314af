"""The hard tier's bulk family: compensation for every reservation that qualifies.

`compensation_sweep`: 13-20 reservations, each judged on facts of two outputs: the flight's
status and scheduled departure, the fare, insurance and passengers (get_reservation_details)
against the member's tier and certificates (get_user_details). The rule (a cancelled or delayed
flight; tier, fare or insurance), its exception (a complaint is in time for 48 hours after the
scheduled departure, 72 for gold, to the minute) and its limit (three certificates, earliest
departures first) leave look-alikes failing one fact each. Records the member names that do not
qualify are declined in one decline naming each (a late one the tool would issue: only the
rule refuses it); the others are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from envs.airline.rules import (
    CLAIM_HOURS,
    COMPENSATION,
    MAX_CERTIFICATES_PER_CONVERSATION,
    RETURN_OF,
)
from envs.airline.taskgen.hard import record_first
from envs.airline.taskgen.kit import (
    GO,
    NOW,
    Booking,
    C,
    Ctx,
    Draft,
    FlightInfo,
    Person,
    hello,
    ident,
    money,
    refused,
)

# What happens to each reservation: issued, or skipped (and why), or declined when named.
VERDICTS = ("issue", "over_cap", "late", "not_eligible", "already", "not_disrupted")


@dataclass
class Record:
    booking: Booking
    verdict: str
    disrupted: FlightInfo | None = None
    what: str = ""  # cancelled or delayed
    amount: float = 0.0


def hours_ago(f: FlightInfo) -> float:
    return (NOW - f.departure).total_seconds() / 3600


class Sweep:
    """The story's flights: the disrupted ones are the story's own (distinct departures, no
    other reservation on them), so a status set on one decides exactly one record."""

    def __init__(self, c: Ctx, p: Person) -> None:
        self.c, self.p = c, p
        self.window = CLAIM_HOURS[p.tier]
        self.disrupted: set[int] = set()
        self.used: set[int] = set()
        self.times: set[Any] = set()

    def free(self, pool: list[FlightInfo], fare: str, n: int, hit: bool) -> list[FlightInfo]:
        """Flights of `pool` a booking of n in `fare` may take (a disrupted one: unused)."""
        s = self.c.s
        out = [f for f in pool if s.seats_left(f, fare) >= n + 1 and f.id not in self.disrupted]
        if hit:
            out = [f for f in out if f.id not in self.used and f.departure not in self.times]
        return sorted(out, key=lambda f: (f.date, f.number))

    def past(self, low: float, high: float) -> list[FlightInfo]:
        """Flown flights whose scheduled departure was more than `low` and at most `high`
        hours ago."""
        return [f for f in self.c.net.departed() if low < hours_ago(f) <= high]

    def book(self, flights: list[FlightInfo], fare: str, n: int, ins: bool) -> Booking:
        """The member's booking of `flights`, made 2-40 days before the first of them."""
        first = max(max(hours_ago(f) for f in flights), 0) / 24
        days = first + self.c.s.rng.uniform(2, 40)
        b = self.c.s.booking(self.p, flights, fare, travellers=n, days_ago=days, insurance=ins)
        self.used.update(f.id for f in flights)
        return b

    def other_leg(self, f: FlightInfo, fare: str, n: int) -> list[FlightInfo]:
        """f with the other leg of a round trip, when one fits: a flown outbound before a
        future f, or a future return after a flown f; else f alone."""
        back = RETURN_OF[f.number]
        if hours_ago(f) < 0:  # f is ahead: an outbound that has flown
            pool = [g for g in self.c.net.departed() if g.number == back and g.date < f.date]
            legs = self.free(pool, fare, n, False)
            return [self.c.choose(legs), f] if legs else [f]
        pool = [g for g in self.c.net.future() if g.number == back and g.date > f.date]
        legs = self.free(pool, fare, n, False)
        return [f, self.c.choose(legs)] if legs else [f]

    def hit(self, pools: list[list[FlightInfo]], fare: str, n: int, ins: bool, what: str) -> Record:
        """A reservation with one flight of the first pool that has a free flight disrupted
        (`what`), sometimes with a round trip's other leg; the verdict is set by the caller."""
        c = self.c
        f = next(
            (c.choose(free) for pool in pools if (free := self.free(pool, fare, n, True))), None
        )
        if f is None:
            raise ValueError("no free flight for a disrupted reservation")  # the draw is dropped
        self.disrupted.add(f.id)
        self.times.add(f.departure)
        legs = self.other_leg(f, fare, n) if c.coin() and c.coin() else [f]
        b = self.book(legs, fare, n, ins)
        return Record(b, "", f, what, COMPENSATION[what] * n)


def _eligible(c: Ctx, tier: str) -> tuple[str, bool]:
    """(fare, insurance) of a reservation the tier, fare or insurance makes eligible."""
    if tier == "regular":
        return c.choose([("business", False), ("economy", True), ("basic_economy", True)])
    fare = c.choose(["basic_economy", "economy", "economy", "business"])
    return fare, c.s.rng.random() < 0.2


def _qualifying(sw: Sweep) -> Record:
    """In time: a future flight, a flown one within the window (exactly at its edge, or between
    48 and 72 hours for a gold member), cancelled or delayed."""
    c, w = sw.c, sw.window
    fare, ins = _eligible(c, sw.p.tier)
    n = c.s.rng.randint(1, 3)
    where = c.choose(["future", "past", "edge", "tier" if w > 48 else "past"])
    edge = sw.past(w - 0.01, w)  # scheduled exactly w hours ago
    pools = {
        "future": [c.net.future()],
        "past": [sw.past(0, w), c.net.future()],
        "edge": [edge, sw.past(0, w), c.net.future()],
        "tier": [sw.past(48, w), c.net.future()],
    }[where]
    what = c.choose(["cancelled", "delayed"])
    r = sw.hit(pools, fare, n, ins, what)
    _disrupt(sw, r, c.s.rng.randrange(30, 300, 5))
    return r


def _late(sw: Sweep) -> Record:
    """Eligible but late: 30 minutes past the window, between 48 and 72 hours for a member who
    is not gold, long before, or late by the schedule though the delayed flight left in time."""
    c, w = sw.c, sw.window
    fare, ins = _eligible(c, sw.p.tier)
    n = c.s.rng.randint(1, 3)
    how = c.choose(["edge", "tier" if w < 72 else "edge", "delay", "far"])
    over = sw.past(w, w + 0.5)
    pools = {
        "edge": [over, sw.past(w, 1000)],
        "tier": [sw.past(w, 72), sw.past(w, 1000)],
        "delay": [sw.past(w, w + 4), sw.past(w, 1000)],
        "far": [sw.past(w, 1000)],
    }[how]
    what = "delayed" if how == "delay" else c.choose(["cancelled", "delayed"])
    r = sw.hit(pools, fare, n, ins, what)
    assert r.disrupted is not None
    late_by = hours_ago(r.disrupted) - w
    delay = c.s.rng.randrange(30, 300, 5)
    if how == "delay":  # it left within the window: the schedule, not the take-off, counts
        delay = min(300, 5 * int(late_by * 12) + c.choose([15, 30, 60]))
    _disrupt(sw, r, delay)
    r.verdict = "late"
    return r


def _not_eligible(sw: Sweep) -> Record:
    """A regular member's economy or basic economy trip without insurance, in time."""
    c = sw.c
    pools = c.choose([[c.net.future()], [sw.past(0, sw.window), c.net.future()]])
    r = sw.hit(
        pools,
        c.choose(["economy", "basic_economy"]),
        c.s.rng.randint(1, 3),
        False,
        c.choose(["cancelled", "delayed"]),
    )
    _disrupt(sw, r, c.s.rng.randrange(30, 300, 5))
    r.verdict = "not_eligible"
    return r


def _already(sw: Sweep) -> Record:
    """Qualifying but compensated before this conversation (its certificate is listed)."""
    r = _qualifying(sw)
    assert r.disrupted is not None
    since = max(hours_ago(r.disrupted), 0) / 24
    sw.c.s.certificate(sw.p, r.booking, r.what, r.amount, since * sw.c.s.rng.uniform(0.1, 0.9))
    r.verdict = "already"
    return r


def _disrupt(sw: Sweep, r: Record, delay: int) -> None:
    assert r.disrupted is not None
    sw.c.s.set_status(r.disrupted, r.what, delay if r.what == "delayed" else 0)


def _undisrupted(sw: Sweep) -> Record:
    """A trip that flew on time or is still scheduled (one way or a round trip), or one the
    member cancelled."""
    c = sw.c
    fare = c.choose(["basic_economy", "economy", "business"])
    n = c.s.rng.randint(1, 3)
    f = c.choose(sw.free(c.choose([c.net.departed(), c.net.future()]), fare, n, False))
    legs = sw.other_leg(f, fare, n) if c.coin() else [f]
    return Record(sw.book(legs, fare, n, c.s.rng.random() < 0.2), "not_disrupted")


def compensation_sweep(c: Ctx) -> Draft:
    rng = c.s.rng
    by = ("id", "email")[c.k]
    tier = c.choose(["regular", "silver", "gold"])
    p = c.member(tier)
    sw = Sweep(c, p)
    mode = c.choose(["mixed", "mixed", "mixed", "all", "none"])
    n_ok = {"none": 0, "all": rng.randint(1, 3), "mixed": rng.randint(2, 5)}[mode]
    n_bad = {"none": rng.randint(2, 4), "all": 0, "mixed": rng.randint(1, 3)}[mode]
    bad = [_late, _late, _already] + ([_not_eligible, _not_eligible] if tier == "regular" else [])
    records = [_qualifying(sw) for _ in range(n_ok)]
    records += [c.choose(bad)(sw) for _ in range(n_bad)]
    ok = sorted((r for r in records if not r.verdict), key=lambda r: _departure(r))
    for i, r in enumerate(ok):
        r.verdict = "issue" if i < MAX_CERTIFICATES_PER_CONVERSATION else "over_cap"
    total = rng.randint(13, 20)
    records += [_undisrupted(sw) for _ in range(max(total - len(records), 7))]
    gone = c.choose([r for r in records if r.verdict == "not_disrupted"])
    if all(hours_ago(f) < 0 for f in gone.booking.flights):
        c.s.cancelled(gone.booking)  # cancelled by the member earlier: nothing to compensate
    rng.shuffle(records)
    issued = [r for r in ok if r.verdict == "issue"]

    # The member may name some: a named one that does not qualify is declined, whether the
    # tool refuses it (no disruption, a regular member's plain fare) or would issue it though
    # the complaint is late (only the policy's window refuses it). Never one past the three:
    # no decline reason says so.
    named: list[Record] = []
    refusable = [r for r in records if r.verdict in ("not_eligible", "not_disrupted")]
    refusable = [r for r in refusable if r is not gone]
    late = [r for r in records if r.verdict == "late"]
    if c.coin():
        named = rng.sample(refusable, rng.randint(0, 2))
        if late and c.coin():
            named.append(c.choose(late))
        if issued and c.coin():
            named.append(c.choose(issued))
        rng.shuffle(named)
    refuse = [r for r in named if r.verdict != "issue"]
    ask = not refuse and (c.coin() or not issued)

    also = ""
    if named:
        codes = " and ".join(r.booking.code for r in named)
        also = f", including {codes}: I'm sure {'those were' if len(named) > 1 else 'it was'} hit"
    question = "When you're done, tell me the total value of the certificates you issued. "
    prompt = (
        f"{hello(p, by)} Storms and strikes have wrecked a lot of my travel lately: several of "
        f"my flights were cancelled or delayed. Please issue a compensation certificate for every "
        f"reservation of mine that qualifies{also}. {question if ask else ''}{GO}"
    )
    gold = [*ident(p, by), C("get_user_details", user_id=p.user_code)]
    gold += [C("get_reservation_details", reservation_code=r.booking.code) for r in records]
    gold += [_claim(p, r) for r in issued]
    family = "hard_compensation_sweep"
    if refuse:
        why = "; ".join(f"{r.booking.code}: {_why(r, sw.window)}" for r in refuse)
        draft = refused(family, prompt, gold, "not_eligible_compensation", why + ".")
        calls = [record_first(_claim(p, r)) for r in refuse]
        late_calls = [x for x, r in zip(calls, refuse, strict=True) if r.verdict == "late"]
        return replace(
            draft,
            forbidden=(calls[0], "not_eligible_compensation"),
            also_refused=tuple(calls[1:]),
            policy_refused=tuple(late_calls),
        )
    answer = ("amount", money(sum(r.amount for r in issued))) if ask else None
    return Draft(family, prompt, gold, bool(issued), answer=answer)


def _departure(r: Record) -> Any:
    assert r.disrupted is not None
    return r.disrupted.departure


def _claim(p: Person, r: Record) -> dict[str, Any]:
    return C("issue_compensation_certificate", user_id=p.user_code, reservation_code=r.booking.code)


def _why(r: Record, window: int) -> str:
    if r.verdict == "not_disrupted":
        return "no flight of it was cancelled or delayed"
    if r.verdict == "late":
        return f"the complaint comes more than {window} hours after the disrupted departure"
    return "a regular member's fare without business class or insurance"
