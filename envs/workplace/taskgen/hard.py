"""The hard tier (difficulty 5, 10-30 gold calls): requests whose steps interact.

Each family hides its deciding facts in a history of 20-40 deals or emails and needs a step the
tools do not take for the agent: a threshold with an inclusive boundary, a time-zone conversion
and a "no earlier than" the slot finder only honours when asked, a quote's corrections in later
replies, a discount tier decided by the corrected total, a total that depends on the changes
made before it. Every fact is in the request, the policy or a tool's answer (the task stays
fair); twins (the data allows or forbids) and look-alikes (a namesake, a colleague's deals, a
suggestion from someone else) are drawn.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from envs.workplace.taskgen.kit import WEEKDAYS, C, Draft, Person, Story, at, iso

OPEN = ("lead", "qualified", "proposal")
DEAL_NAMES = ("Subscription", "Support plan", "Expansion", "Pilot", "Training", "Renewal",
              "Analytics add-on", "Onboarding", "Premium tier", "Data migration")  # fmt: skip
# Places without daylight saving time: (city, minutes ahead of UTC, how the request says it).
ZONES = (("Lagos", 60, "one hour"), ("Nairobi", 180, "three hours"),
         ("Dubai", 240, "four hours"), ("Bangalore", 330, "five and a half hours"))  # fmt: skip


def _money(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _dollars(value: float | Decimal) -> str:
    return f"${value:,.2f}".replace(".00", "")


def _day(s: Story) -> tuple[int, str]:
    """A working day of the next two weeks (Tuesday-Friday) and how a request names it."""
    offset = 7 * s.rng.randrange(2) + s.rng.randint(1, 4)
    when = at(offset, 0)
    if offset == 1:
        return offset, "tomorrow"
    if offset < 7:
        return offset, f"on {WEEKDAYS[offset]}"
    return offset, f"on {WEEKDAYS[offset % 7]} {when:%B} {when.day}"


def _first_free(busy: list[tuple[datetime, int]], start: datetime, minutes: int) -> datetime:
    """What find_free_slot answers from `start` on: the first half-hour step free of `busy`."""
    length = timedelta(minutes=minutes)
    stop = start.replace(hour=17, minute=0)
    while start + length <= stop:
        if not any(b < start + length and b + timedelta(minutes=m) > start for b, m in busy):
            return start
        start += timedelta(minutes=30)
    raise ValueError("no free slot")


def account_handover(s: Story, k: int) -> Draft:
    """Hand the user's open deals with one customer worth at least a threshold (inclusive; a
    deal exactly at it, one just under, some without an amount, a colleague's and closed ones
    among 20-34 deals) to a colleague a namesake in another department could be mistaken
    for; 1-3 named deals of a second customer too (a twin: all allowed, or some a colleague's
    or closed: each refused with one code); then a meeting at an hour of the colleague's time
    zone, or the first free hour from then on; k=1: a note on each deal handed over."""
    ok = s.coin()  # the twin's draw first (a shipped story keeps its family's outcome)
    user = s.user()
    heir = s.person("Sales")
    s.person("Support", name=(heir.first, heir.last))  # the namesake: another department
    mates = [s.person() for _ in range(3)]
    cid, company, _ = s.company()
    cid2, company2, _ = s.company(1)
    cid3, _, _ = s.company(2)
    threshold = s.choose(10_000, 15_000, 20_000, 25_000, 40_000)
    handed: list[str] = []

    def drawn(low: float, high: float) -> float:
        return s.amount(int(low), int(high))

    # The user's open deals with the customer: the deciding boundary, then a spread.
    mine: list[float | None] = []
    edge = s.choose("exact", "under", "both")
    if edge in ("exact", "both"):
        mine.append(float(threshold))
    if edge in ("under", "both"):
        mine.append(threshold - s.choose(0.25, 0.5, 50.0))
    mine += [None] + [drawn(threshold * 0.3, threshold * 2.5) for _ in range(s.rng.randint(2, 5))]
    for i, amount in enumerate(mine):
        code = s.deal(cid, user, s.choose(*OPEN), amount, DEAL_NAMES[i % len(DEAL_NAMES)])
        if amount is not None and amount >= threshold:
            handed.append(code)
    # At least three to hand over, so the gold is the hard tier's ten steps or more.
    for name in ("Renewal", "Upsell", "Add-on")[len(handed) :]:
        handed.append(s.deal(cid, user, "proposal", drawn(threshold, threshold * 2), name))
    # Look-alikes: the user's closed deals and colleagues' open ones with the customer, above
    # the threshold; other customers' deals of anyone.
    for _ in range(s.rng.randint(2, 3)):
        s.deal(cid, user, s.choose("won", "lost"), drawn(threshold, threshold * 3), "Expansion")
    for _ in range(s.rng.randint(2, 3)):
        s.deal(cid, s.choose(*mates), s.choose(*OPEN), drawn(threshold, threshold * 3), "Pilot")
    for i in range(s.rng.randint(8, 18)):
        owner = user if s.coin() else s.choose(*mates)
        s.deal(
            (cid2, cid3)[i % 2],
            owner,
            s.choose(*OPEN, "won", "lost"),
            s.amount(),
            DEAL_NAMES[i % len(DEAL_NAMES)],
        )
    # The named deals with the second customer: all allowed, or some refused for one reason.
    count = s.rng.randint(1, 3)
    why_not = "" if ok else s.choose("not_owner", "deal_closed")
    refused_n = 0 if ok else s.rng.randint(1, count)
    extras: list[tuple[str, bool]] = []
    for i in range(count):
        bad = i >= count - refused_n
        owner = s.choose(*mates) if bad and why_not == "not_owner" else user
        stage = s.choose("won", "lost") if bad and why_not == "deal_closed" else s.choose(*OPEN)
        extras.append((s.deal(cid2, owner, stage, s.amount(), "Special project"), not bad))
    s.rng.shuffle(extras)
    # The meeting, asked at an hour of the colleague's clock.
    city, ahead, ahead_words = s.choose(*ZONES)
    day, when = _day(s)
    # Asked by 13:30 UTC and 18:30 their time: a busy afternoon still leaves an hour by 17:00.
    asked = at(day, s.rng.randint(10, min(13, (18 * 60 - ahead) // 60)), s.choose(0, 0, 30))
    local = asked + timedelta(minutes=ahead)
    busy_then = s.coin()
    busy: list[tuple[datetime, int]] = [(at(day, 9), 30)]
    s.event(user, "Team standup", at(day, 9), 30, [user])
    if busy_then:
        heir_start, heir_minutes = asked + timedelta(minutes=30), s.choose(60, 90)
        mine_start = heir_start + timedelta(minutes=heir_minutes)
        s.event(heir, "Customer visit", heir_start, heir_minutes, [heir])
        s.event(user, "Pipeline review", mine_start, 30, [user])
        busy += [(heir_start, heir_minutes), (mine_start, 30)]
    else:  # it ends as the asked hour starts: no overlap
        s.event(heir, "Customer visit", asked - timedelta(minutes=60), 60, [heir])
    slot = _first_free(busy, asked, 60) if busy_then else asked
    title = f"{company} handover"
    named = ", ".join(code for code, _ in extras)
    prompt = (
        f"I'm moving to another team. Hand my open {company} deals worth {_dollars(threshold)} "
        f"or more over to {heir.name} in Sales; the smaller ones and any without "
        f"an amount stay with me. Also hand over my {company2} "
        f"{'deal' if count == 1 else 'deals'} {named}. Then book a 60-minute '{title}' with "
        f"{heir.first} {when} at {local:%H:%M} their time (they work from {city}, "
        f"{ahead_words} ahead of UTC); if either of us is busy then, take the earliest hour "
        "that day when we're both free that starts no earlier than that."
    )
    if k == 1:
        prompt += " Log a note on each deal you hand over saying it moved to them."
    gold = [
        C("get_current_user"),
        C("search_employees", query=heir.name),
        C("list_deals", company=company),
    ]
    for code in sorted(handed):
        gold.append(C("reassign_deal", code=code, new_owner_email=heir.email))
        if k == 1:
            gold.append(C("log_activity", code=code, kind="note", summary="Moved to new owner."))
    refused: list[dict[str, Any]] = []
    for code, allowed in extras:
        gold.append(C("get_deal", code=code))
        hand = C("reassign_deal", code=code, new_owner_email=heir.email)
        if not allowed:
            refused.append(hand)
            continue
        gold.append(hand)
        if k == 1:
            gold.append(C("log_activity", code=code, kind="note", summary="Moved to new owner."))
    d = asked.date().isoformat()
    gold.append(C("list_events", start_date=d, end_date=d, employee_email=heir.email))
    gold.append(C("list_events", start_date=d, end_date=d))
    if busy_then:
        gold.append(
            C(
                "find_free_slot",
                attendee_emails=[heir.email],
                day=d,
                duration_minutes=60,
                earliest=f"{asked:%H:%M}",
            )
        )
    gold.append(
        C(
            "create_event",
            title=title,
            start=iso(slot),
            end=iso(slot + timedelta(hours=1)),
            attendee_emails=[heir.email],
        )
    )
    if not refused:
        return Draft("account_handover", prompt, gold, True)
    codes = ", ".join(c["arguments"]["code"] for c in refused)
    why = (
        f"{codes}: not yours; only a deal's owner can hand it over."
        if why_not == "not_owner"
        else f"{codes}: closed; closed deals stay with their owner."
    )
    return Draft(
        "account_handover",
        prompt,
        gold,
        True,
        forbidden=(refused[0], why_not),
        also_refused=tuple(refused[1:]),
        decline=why_not,
        decline_message=why,
    )


LINES = ("Licences", "Support", "Training", "Onboarding", "Hosting", "Consulting")


def _price(s: Story) -> Decimal:
    """A line price in whole dollars: a discounted total then needs no rounding (a half cent
    would leave the rounding rule to guess)."""
    return Decimal(s.rng.randrange(100, 1500) * 5)


def _tiers(s: Story, original: Decimal, corrected: Decimal) -> tuple[Decimal, str]:
    """The volume-discount threshold: the corrected total itself (inclusive boundary), one
    between the original and the corrected totals (the uncorrected quote falls in the other
    tier), or a round figure away from both."""
    mode = s.choose("exact", "between", "between", "away")
    low, high = sorted((original, corrected))
    step = Decimal(500)
    between = (low // step + 1) * step
    if mode == "between" and between < high:
        return between, mode
    if mode == "exact" and corrected == corrected.to_integral_value():
        return corrected, mode
    away = (corrected // 5000 + s.choose(0, 1)) * 5000
    return max(away, Decimal(5000)), "away"


def quote_close(s: Story, k: int) -> Draft:
    """Price a deal from the latest of a colleague's quotes as corrected by their replies
    (a price changed, a line dropped, a later correction superseding an earlier one; 20-40
    emails: older quotes with their own corrections, drafts of others, a suggestion from
    someone else), at the discount tier the corrected total reaches (inclusive threshold);
    mark it won if it is in proposal (conditional); forward the original quote to a named
    address (a twin: a CRM contact, or an outsider at the customer's domain: declined); label
    the quote's thread (older quotes' corrections share its subject: only in_reply_to or the
    quote reference tells them apart); k=1: reply to the colleague's last correction."""
    ok = s.coin()  # the twin's draw first (a shipped story keeps its family's outcome)
    user, mate, other = s.user(), s.person(), s.person()
    cid, company, contacts = s.company()
    _, company2, _ = s.company(1)
    domain = contacts[0].email.split("@")[1]
    stage = s.choose("qualified", "proposal", "proposal")
    code = s.deal(cid, user, stage, s.amount() if s.coin() else None)
    s.deal(cid, other, "proposal", s.amount(), "Support plan")  # a colleague's: not "my" deal

    def quote(ref: str) -> tuple[str, dict[str, Decimal]]:
        items = {name: _price(s) for name in s.rng.sample(LINES, s.rng.randint(3, 4))}
        lines = "\n".join(f"{name}: {price:,.2f}" for name, price in items.items())
        return f"Quote {ref}. Line items (dollars, before any discount):\n{lines}", items

    def correct(ref: str, items: dict[str, Decimal], again: str | None) -> tuple[str, str]:
        """One correction of `items` (in place) and its text; `again`: the line re-corrected."""
        line = again or s.choose(*items)
        if again is None and len(items) > 2 and s.rng.random() < 0.35:
            del items[line]
            return f"Correction to quote {ref}: please remove the {line} line entirely.", line
        old, items[line] = items[line], _price(s)
        lead = "scratch my earlier correction: " if again else ""
        return (
            f"Correction to quote {ref}: {lead}{line} should be {items[line]:,.2f} "
            f"(not {old:,.2f}).",
            line,
        )

    # The history, oldest first (hours ago): fillers, an older quote of the colleague with
    # its correction, then the latest quote, its corrections and a suggestion by someone else.
    n = s.rng.randint(16, 32)
    latest_at = 3 * n + 30
    older: list[str] = []
    for i in range(n):
        hours = latest_at + 40 + 3 * (n - i)
        kind = s.choose("old", "other_sender", "other_customer", "noise", "noise")
        if kind == "old" or (i == n - 1 and not older):
            ref = f"Q-{s.b.code(6)}"
            body, items = quote(ref)
            older.append(s.email(mate.email, [user], f"Quote for {company}", body, hours))
            text, _ = correct(ref, items, None)
            s.email(
                mate.email,
                [user],
                f"Re: Quote for {company}",
                text,
                hours - 1,
                in_reply_to=older[-1],
            )
        elif kind == "other_sender":
            body, _ = quote(f"Q-{s.b.code(6)}")
            s.email(other.email, [user], f"Quote for {company} (draft)", body, hours)
        elif kind == "other_customer":
            body, _ = quote(f"Q-{s.b.code(6)}")
            s.email(mate.email, [user], f"Quote for {company2}", body, hours)
        else:
            subject = s.choose("Lunch on Friday?", "Travel policy update", "Offsite agenda")
            s.email(other.email, [user], subject, "FYI.", hours, read=True)
    ref = f"Q-{s.b.code(6)}"
    body, items = quote(ref)
    original = sum(items.values(), Decimal(0))
    chosen = s.email(mate.email, [user], f"Quote for {company}", body, latest_at)
    corrections: list[str] = []
    suggestion = ""
    line: str | None = None
    hours = latest_at
    for i in range(s.rng.randint(1, 2)):
        again = line if i == 1 and line in items and s.coin() else None
        text, line = correct(ref, items, again)
        hours -= s.rng.randint(5, 20)
        subject = f"Re: Quote for {company}"
        corrections.append(s.email(mate.email, [user], subject, text, hours, in_reply_to=chosen))
        if i == 0:  # someone else's suggestion in the thread (not a correction by the sender)
            hint = f"Could we bring {s.choose(*items)} down to {_price(s):,.2f}? Just a thought."
            suggestion = s.email(other.email, [user], subject, hint, hours - 2, in_reply_to=chosen)
    corrected = sum(items.values(), Decimal(0))
    threshold, _ = _tiers(s, original, corrected)
    low, high = s.choose((5, 10), (8, 12), (10, 15))
    discount = high if corrected >= threshold else low
    amount = _money(corrected * (100 - discount) / 100)
    first, last = s.names.pop()
    to = f"{first}.{last}{s.rng.randrange(2, 99)}@{domain}".lower()
    if ok:  # a contact whose address, like the outsider's, carries a number
        s.b.add(
            "contacts",
            company_id=cid,
            first_name=first,
            last_name=last,
            email=to,
            phone=None,
            title="Buyer",
        )
    prompt = (
        f"Take the latest quote {mate.name} emailed me for {company}, with the corrections "
        f"{mate.first} sent in reply to it, and price my {company} deal from its corrected "
        f"total: our volume discount is {high}% when that total is {_dollars(threshold)} or "
        f"more and {low}% below that; set the deal's amount to the discounted total. If the "
        "deal is already in proposal, mark it won; otherwise leave its stage alone. Then "
        f"forward {mate.first}'s original quote email to {to}, and label that quote and "
        "every reply to it already in my inbox 'quoted'."
    )
    if k == 1:
        prompt += f" Finally reply to {mate.first}'s last correction that the deal is updated."
    gold = [
        C("search_emails", query=f"Quote for {company}", limit=50),
        C("read_email", message_id=chosen),
        *[C("read_email", message_id=mid) for mid in corrections],
        C("read_email", message_id=suggestion),
        C("get_current_user"),
        C("list_deals", company=company),
        C("update_deal_amount", code=code, amount=float(amount)),
    ]
    if stage == "proposal":
        gold.append(C("update_deal_stage", code=code, stage="won"))
    gold.append(C("search_customers", query=to))
    send = C("forward_email", message_id=chosen, to=[to])
    if ok:
        gold.append(send)
    thread = sorted([chosen, *corrections, suggestion])
    gold += [C("label_email", message_id=mid, add=["quoted"]) for mid in thread]
    if k == 1:
        gold.append(
            C("reply_email", message_id=corrections[-1], body="Thanks, the deal is updated.")
        )
    if ok:
        return Draft("quote_close", prompt, gold, True)
    why = f"{to} is not a CRM contact; external email may only go to recorded contacts."
    return Draft(
        "quote_close",
        prompt,
        gold,
        True,
        forbidden=(send, "external_recipient"),
        decline="external_recipient",
        decline_message=why,
    )


def pipeline_review(s: Story, k: int) -> Draft:
    """Close out the user's pipeline with one customer among 25-43 deals: every open deal of
    theirs whose close date is today or past goes to lost (the boundary: one closing today),
    of the others those in proposal with an amount are won (a proposal past its date is lost,
    not won; one without an amount stays); then the total of their won deals with the
    customer, counted after the changes (earlier wins included); k=1: a note on each deal
    marked lost. Colleagues' deals and another customer's look alike."""
    user = s.user()
    mates = [s.person() for _ in range(2)]
    cid, company, _ = s.company()
    cid2, _, _ = s.company(1)
    lost: list[str] = []
    won: list[str] = []
    total = Decimal(0)

    def add(owner: Person, stage: str, amount: float | None, days: int, i: int) -> str:
        return s.deal(cid, owner, stage, amount, DEAL_NAMES[i % len(DEAL_NAMES)], days)

    # The user's deals with the customer: (stage, has an amount, days to the close date).
    plan: list[tuple[str, bool, int]] = [
        (s.choose(*OPEN), True, 0),  # closes today: lost
        ("proposal", True, -s.rng.randint(1, 20)),  # past its date: lost, not won
        ("proposal", True, s.rng.randint(1, 40)),  # won
        ("proposal", False, s.rng.randint(1, 40)),  # no amount: stays
        ("won", True, -s.rng.randint(5, 60)),  # won before: counts in the total
    ]
    # At least seven changes, so the gold is the hard tier's ten steps or more.
    plan += [(s.choose(*OPEN), True, -s.rng.randint(1, 30)) for _ in range(2)]
    plan += [("proposal", True, s.rng.randint(1, 40)) for _ in range(2)]
    for _ in range(s.rng.randint(6, 12)):
        plan.append(
            (
                s.choose(*OPEN, "proposal", "won", "lost"),
                s.rng.random() < 0.8,
                s.rng.randint(-15, 45),
            )
        )
    s.rng.shuffle(plan)
    for i, (stage, has_amount, days) in enumerate(plan):
        amount = s.amount() if has_amount or stage == "won" else None
        code = add(user, stage, amount, days, i)
        if stage in OPEN and days <= 0:
            lost.append(code)
        elif stage == "proposal" and amount is not None:
            won.append(code)
            total += Decimal(str(amount))
        elif stage == "won":
            total += Decimal(str(amount))
    # Look-alikes: colleagues' deals with the customer, and the user's with another one.
    for i in range(s.rng.randint(5, 10)):
        add(s.choose(*mates), s.choose(*OPEN, "won"), s.amount(), s.rng.randint(-10, 30), i)
    for i in range(s.rng.randint(5, 12)):
        s.deal(
            cid2,
            user,
            s.choose(*OPEN, "won"),
            s.amount(),
            DEAL_NAMES[i % 10],
            s.rng.randint(-10, 30),
        )
    prompt = (
        f"Let's close out my {company} pipeline. Every open {company} deal of mine whose close "
        "date is today or already past goes to lost; of the rest, those in proposal that have "
        "an amount are won, and everything else stays as it is. When you're done, tell me the "
        f"total amount of my won {company} deals, counting any I had won before."
    )
    if k == 1:
        prompt += " Log a note on each deal you mark lost saying the close date passed."
    gold = [C("get_current_user"), C("list_deals", company=company, owner_email=user.email)]
    for code in sorted(lost):
        gold.append(C("update_deal_stage", code=code, stage="lost"))
        if k == 1:
            gold.append(C("log_activity", code=code, kind="note", summary="Close date passed."))
    for code in sorted(won):
        gold.append(C("update_deal_stage", code=code, stage="won"))
    gold.append(C("list_deals", company=company, owner_email=user.email, stage="won"))
    answer = ("amount", f"{_money(total):.2f}")
    return Draft("pipeline_review", prompt, gold, True, answer=answer)
