"""The hard tier's many-decisions family: deals won on the customers' written acceptances.

Each of 12-19 acceptance emails is judged on facts from three tool outputs joined under the
policy's "Written acceptances" rule: the email (sender, sent date), the deal (owner, stage,
company, close date) and the CRM (the company's contacts and which one is CFO). The rule has an
exception (a CFO's acceptance counts up to 7 days late) with a limit (two late acceptances per
company per calendar month, the earliest first); a deal whose acceptance counts is won, every
other acceptance labelled 'follow-up' (one write per record). Look-alikes fail one condition;
boundaries sit on the day (the close date, the 7th and 8th day) and one over the limit; some
draws have every acceptance count, some none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from envs.workplace.taskgen.kit import NOW, C, Draft, Person, Story

DEAL_NAMES = ("Subscription", "Support plan", "Expansion", "Pilot", "Training", "Renewal",
              "Analytics add-on", "Onboarding", "Premium tier", "Data migration")  # fmt: skip
GRACE_DAYS = 7  # a CFO's acceptance counts this many days after the close date (inclusive)
LATE_LIMIT = 2  # late acceptances counted per company and calendar month of sending
FIRST_DAY = date(2026, 2, 9)  # acceptances were sent from this day to yesterday
# Kinds of acceptance the story draws: each wins, or fails exactly one condition.
WINNING = ("on_time", "late_ok")
FAILING = ("late_not_cfo", "too_late", "not_contact", "other_company", "not_mine", "not_open")
# A refused named deal: (decline reason, the tool's error code).
REFUSALS = {
    "deal_closed": "deal_closed",
    "cannot_skip_stage": "stage_order",
    "won_needs_amount": "amount_required",
}


@dataclass
class Acceptance:
    """One acceptance email and the deal it names, as seeded."""

    kind: str  # what the story drew; the verdict is computed from the data (`verdicts`)
    company: int  # index into the story's companies
    sender: str
    sent: datetime
    close: date
    owner: Person
    stage: str
    amount: float
    code: str = ""


@dataclass
class Customer:
    cid: int
    name: str
    domain: str
    contacts: list[Person]  # [Head of Procurement, CFO] (Story.company's titles)
    outsider: str  # an address at the company's domain that the CRM does not list

    @property
    def cfo(self) -> Person:
        return self.contacts[1]


def verdicts(accs: list[Acceptance], customers: list[Customer], user: Person) -> list[str]:
    """The policy applied to every acceptance: "won_on_time" / "won_late" or the one reason it
    does not count. Late acceptances that meet every other condition take up the monthly limit
    per company in the order they were sent."""
    out: list[str] = []
    for a in accs:
        c = customers[a.company]
        late = (a.sent.date() - a.close).days
        if a.owner.id != user.id:
            out.append("not_mine")
        elif a.stage != "proposal":
            out.append("not_open")
        elif a.sender not in {p.email for p in c.contacts}:
            other = any(a.sender in {p.email for p in o.contacts} for o in customers)
            out.append("other_company" if other else "not_contact")
        elif late <= 0:
            out.append("won_on_time")
        elif late > GRACE_DAYS:
            out.append("too_late")
        elif a.sender != c.cfo.email:
            out.append("late_not_cfo")
        else:
            out.append("late")
    taken: dict[tuple[int, int], int] = {}
    sent = [(accs[i].company, accs[i].sent) for i in range(len(accs)) if out[i] == "late"]
    assert len(set(sent)) == len(sent), "two late acceptances sent at once: no earliest"
    for i in sorted(range(len(accs)), key=lambda i: accs[i].sent):
        if out[i] == "late":
            key = (accs[i].company, accs[i].sent.month)
            taken[key] = taken.get(key, 0) + 1
            out[i] = "won_late" if taken[key] <= LATE_LIMIT else "over_limit"
    return out


def _sent_on(s: Story, day: date, edge: str = "") -> datetime:
    """A sending time on `day`: late in the evening, in the small hours, or any office hour."""
    if edge == "evening":
        hour, minute = s.rng.randint(20, 23), s.rng.randrange(0, 60, 5)
    elif edge == "night":
        hour, minute = s.rng.randint(0, 2), s.rng.randrange(0, 60, 5)
    else:
        hour, minute = s.rng.randint(8, 18), s.rng.randrange(0, 60, 5)
    return datetime.combine(day, datetime.min.time()).replace(hour=hour, minute=minute)


def _day(s: Story, first: date = FIRST_DAY, last: date | None = None) -> date:
    last = last or NOW.date() - timedelta(days=1)
    return first + timedelta(days=s.rng.randint(0, (last - first).days))


def _timing(s: Story, kind: str) -> tuple[datetime, date]:
    """(sent, close date) for a kind: on time on or before the close date (often on it, late in
    the evening), late by 1-7 days (often the first night or the 7th evening), or by 8 or more
    (often the 8th night)."""
    if kind == "late_ok" or kind == "late_not_cfo":
        late = s.choose(1, 1, GRACE_DAYS, s.rng.randint(2, GRACE_DAYS - 1))
        edge = {1: "night", GRACE_DAYS: "evening"}.get(late, "")
    elif kind == "too_late":
        late = s.choose(GRACE_DAYS + 1, GRACE_DAYS + 1, s.rng.randint(GRACE_DAYS + 2, 14))
        edge = "night" if late == GRACE_DAYS + 1 else ""
    else:
        late = s.choose(0, 0, -s.rng.randint(1, 20))
        edge = "evening" if late == 0 else ""
    day = _day(s, FIRST_DAY + timedelta(days=max(late, 0)))
    return _sent_on(s, day, edge), day - timedelta(days=late)


def _plan(s: Story, n_companies: int) -> tuple[str, list[tuple[str, int]]]:
    """The kinds of the acceptances and their companies: every acceptance counts, none does,
    or (mostly) a mix that holds each boundary, sometimes with a company's late acceptances
    clustered in one month around the limit."""
    mode = s.choose("all", "none", "mixed", "mixed", "mixed", "mixed", "mixed")
    if mode == "all":
        kinds = [s.choose("on_time", "on_time", "late_ok") for _ in range(s.rng.randint(12, 15))]
    elif mode == "none":
        kinds = list(FAILING) + [s.choose(*FAILING) for _ in range(s.rng.randint(7, 13))]
    else:
        kinds = ["on_time", "late_ok", "late_not_cfo", "too_late", s.choose(*FAILING[2:])]
        pool = (*WINNING, *WINNING, *FAILING)
        kinds += [s.choose(*pool) for _ in range(s.rng.randint(9, 14))]
    plan = [(kind, s.rng.randrange(n_companies)) for kind in kinds]
    if mode == "all":  # at most LATE_LIMIT late ones per company: all count
        late: dict[int, int] = {}
        for i, (kind, co) in enumerate(plan):
            late[co] = late.get(co, 0) + (kind == "late_ok")
            if kind == "late_ok" and late[co] > LATE_LIMIT:
                plan[i] = ("on_time", co)
    s.rng.shuffle(plan)
    return mode, plan


def _cluster(s: Story, co: int) -> list[tuple[str, datetime, int]]:
    """Three or four late CFO acceptances of one company sent in March (the limit's edge):
    as they are (one or two over it), one sent in February instead (all count), or one of
    the earliest two spoiled by another condition (it takes no place: the third counts).
    Returns (kind, sent, days late)."""
    twist = s.choose("plain", "plain", "february", "spoiled", "four")
    days = sorted(s.rng.sample(range(2, 16), 4 if twist == "four" else 3))
    out = []
    for i, d in enumerate(days):
        sent = _sent_on(s, date(2026, 3, d))
        kind = "late_ok"
        if twist == "february" and i == len(days) - 1:
            sent = _sent_on(s, date(2026, 2, s.rng.randint(20, 27)))
        if twist == "spoiled" and i == 0:
            kind = s.choose("not_mine", "not_open")
        out.append((kind, sent, s.rng.randint(1, GRACE_DAYS)))
    return out


def acceptance_sweep(s: Story, k: int) -> Draft:
    """Win each of the user's deals whose written acceptance counts and label every other
    acceptance 'follow-up' (12-19 acceptances, from 2-3 customers); k=0: 1-2 named deals won
    too (a twin: all allowed, or some refused for one reason, each named in the decline);
    k=1: the total amount won, submitted at the end."""
    ok = s.coin()  # the named deals' twin first (a shipped story keeps its family's outcome)
    user = s.user()
    mates = [s.person() for _ in range(2)]
    customers = []
    for i in range(s.rng.randint(2, 3)):
        cid, name, contacts = s.company(i)
        domain = contacts[0].email.split("@")[1]
        first, last = s.names.pop()
        customers.append(Customer(cid, name, domain, contacts, f"{first}.{last}@{domain}".lower()))
    accs: list[Acceptance] = []

    def add(kind: str, co: int, sent: datetime, close: date, cfo: bool = False) -> None:
        c = customers[co]
        sender = s.choose(*c.contacts).email
        if kind in ("late_ok", "too_late") or cfo:
            sender = c.cfo.email
        elif kind == "late_not_cfo":
            sender = c.contacts[0].email
        elif kind == "not_contact":
            sender = s.choose(c.outsider, c.outsider, s.choose(*mates).email)
        elif kind == "other_company":
            sender = s.choose(*customers[(co + 1) % len(customers)].contacts).email
        stage = s.choose("qualified", "won", "lost") if kind == "not_open" else "proposal"
        owner = s.choose(*mates) if kind == "not_mine" else user
        accs.append(Acceptance(kind, co, sender, sent, close, owner, stage, s.amount()))

    mode, plan = _plan(s, len(customers))
    for kind, co in plan:
        add(kind, co, *_timing(s, kind))
    if mode == "mixed" and len(accs) <= 15 and s.rng.random() < 0.6:
        co = s.rng.randrange(len(customers))
        for kind, sent, late in _cluster(s, co):
            add(kind, co, sent, sent.date() - timedelta(days=late), cfo=True)
    s.rng.shuffle(accs)
    for i, a in enumerate(accs):
        c = customers[a.company]
        close_days = (a.close - NOW.date()).days
        a.code = s.deal(c.cid, a.owner, a.stage, a.amount, DEAL_NAMES[i % 10], close_days)
    # The mailbox, in sending order: the acceptances, questions about deals, other mail.
    mail: list[tuple[datetime, str, str, str]] = []
    for a in accs:
        body = f"We accept your proposal for this deal ({a.code}) as quoted.\n\nBest regards"
        mail.append((a.sent, a.sender, f"Acceptance of {a.code}", body))
    for _ in range(s.rng.randint(3, 6)):
        a = s.choose(*accs)
        when = _sent_on(s, _day(s))
        mail.append((when, a.sender, f"Question about {a.code}", "Could you call me about it?"))
        mail.append((when, s.choose(*mates).email, "Team lunch on Friday?", "Who's in?"))
    mids = {
        subject: s.email(sender, [user], subject, body, (NOW - when).total_seconds() / 3600)
        for when, sender, subject, body in sorted(mail)
    }
    verdict = verdicts(accs, customers, user)
    won = sorted(a.code for a, v in zip(accs, verdict, strict=True) if v.startswith("won"))
    chase = sorted(mids[f"Acceptance of {a.code}"] for a in accs if a.code not in won)
    total = sum(
        (Decimal(str(a.amount)) for a, v in zip(accs, verdict, strict=True) if v.startswith("won")),
        Decimal(0),
    )
    # k=0: named deals of the user, won as asked (no acceptance needed) unless a rule refuses.
    named: list[tuple[str, bool]] = []
    reason = "" if ok else s.choose(*REFUSALS)
    if k == 0:
        count = s.rng.randint(1, 2)
        refused_n = 0 if ok else s.rng.randint(1, count)
        buyer = customers[s.rng.randrange(len(customers))]
        for i in range(count):
            bad = i >= count - refused_n
            stage, amount = "proposal", s.amount()
            price: float | None = amount
            if bad and reason == "deal_closed":
                stage = s.choose("won", "lost")
            elif bad and reason == "cannot_skip_stage":
                stage = s.choose("lead", "qualified")
            elif bad:
                price = None
            code = s.deal(buyer.cid, user, stage, price, "Special project", s.rng.randint(5, 40))
            named.append((code, not bad))
        s.rng.shuffle(named)
        codes = " and ".join(code for code, _ in named)
        them = "it" if count == 1 else "them"
        ending = (
            f" Also mark {codes} won: {buyer.name} sent me the signed contract for {them} by post."
        )
    else:
        ending = " When you're done, tell me the total amount of the deals you marked won."
    prompt = (
        "Customers have been emailing me their acceptances (subject 'Acceptance of' and the "
        "deal's code). Go through every acceptance in my inbox: mark won each of my deals "
        "whose acceptance counts under our rules, and label each acceptance that does not count "
        "'follow-up' so I can chase it, changing nothing else for those." + ending
    )
    gold = [
        C("get_current_user"),
        C("search_emails", query="Acceptance of", limit=50),
        C("list_deals", owner_email=user.email),
        *[C("search_customers", query=c.name) for c in customers],
        *[C("update_deal_stage", code=code, stage="won") for code in won],
        *[C("label_email", message_id=mid, add=["follow-up"]) for mid in chase],
    ]
    refused: list[dict[str, Any]] = []
    for code, allowed in named:
        gold.append(C("get_deal", code=code))
        win = C("update_deal_stage", code=code, stage="won")
        if allowed:
            gold.append(win)
        else:
            refused.append(win)
    writes = True  # every acceptance is either won or labelled
    family = "acceptance_sweep"
    if k == 1:
        return Draft(family, prompt, gold, writes, answer=("amount", f"{total:.2f}"))
    if not refused:
        return Draft(family, prompt, gold, writes)
    codes = ", ".join(c["arguments"]["code"] for c in refused)
    why = {
        "deal_closed": f"{codes}: already closed; won and lost deals cannot change.",
        "cannot_skip_stage": f"{codes}: not in proposal yet; deals move one stage at a time.",
        "won_needs_amount": f"{codes}: no amount; a deal can only be won with an amount.",
    }[reason]
    return Draft(
        family,
        prompt,
        gold,
        writes,
        forbidden=(refused[0], REFUSALS[reason]),
        also_refused=tuple(refused[1:]),
        decline=reason,
        decline_message=why,
    )
