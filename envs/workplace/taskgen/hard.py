"""The hard tier (difficulty 5, 9-20 gold calls): requests of 3-5 intents that interact.

Each story composes an intent the data allows, one the data may forbid (a twin: drawn, the same
wording either way), one whose action depends on what the agent finds, a search through a
history of 10-30 deals or emails, and a computation (a quote's lines less a discount). Every
fact the gold relies on is in the request, the policy or a tool's answer, and every decision
is one rule of the policy: the task stays fair.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from envs.workplace.taskgen.kit import C, Draft, Story, at, first_free, iso

OPEN = ("lead", "qualified", "proposal")
DEAL_NAMES = ("Subscription", "Support plan", "Expansion", "Pilot", "Training", "Renewal",
              "Analytics add-on", "Onboarding", "Premium tier", "Data migration")  # fmt: skip


def _draft(
    family: str,
    prompt: str,
    gold: list[dict[str, Any]],
    forbidden: tuple[dict[str, Any], str, str, str] | None,
) -> Draft:
    """A write story; `forbidden` = (the refused call, its tool error, the decline code, why)."""
    if forbidden is None:
        return Draft(family, prompt, gold, True)
    call, error, reason, why = forbidden
    return Draft(
        family,
        prompt,
        gold,
        True,
        forbidden=(call, error),
        decline=reason,
        decline_message=why,
    )


def account_handover(s: Story, k: int) -> Draft:
    """Hand the user's open deals with one customer (among 10-24 deals of several customers and
    owners) to a colleague; a second customer's named deal too (a twin: the user's and open, or
    a colleague's or closed: declined); book a handover meeting at the hour asked if the
    colleague is free then, else at the first free hour that day; k=1: and a note on each deal
    handed over."""
    user, heir = s.user(), s.person()
    mates = [s.person() for _ in range(3)]
    cid, company, _ = s.company()
    cid2, company2, _ = s.company(1)
    cid3, _, _ = s.company(2)
    handed: list[str] = []
    # The history: the customer's deals (the user's open ones are handed over; closed ones and
    # the colleagues' stay), and deals of two other customers.
    for i in range(s.rng.randint(10, 24)):
        company_id = (cid, cid, cid2, cid3)[i % 4]
        owner = user if s.rng.random() < 0.55 else s.choose(*mates)
        stage = s.choose(*OPEN, "won", "lost")
        amount = s.amount() if stage == "won" or s.coin() else None
        code = s.deal(company_id, owner, stage, amount, DEAL_NAMES[i % len(DEAL_NAMES)])
        if company_id == cid and owner is user and stage in OPEN:
            handed.append(code)
    if not handed:  # at least one deal to hand over
        handed.append(s.deal(cid, user, "qualified", s.amount(), "Renewal"))
    ok = s.coin()
    why_not = "" if ok else s.choose("owner", "closed")
    extra = s.deal(
        cid2,
        s.choose(*mates) if why_not == "owner" else user,
        s.choose("won", "lost") if why_not == "closed" else s.choose(*OPEN),
        s.amount(),
        "Special project",
    )
    # The meeting: the colleague is busy at the hour asked, or free then (drawn).
    day, when = s.day()
    hour = s.rng.randint(10, 14)
    busy_then = s.coin()
    heir_start = at(day, hour, 30) if busy_then else at(day, hour - 1)
    heir_minutes = s.choose(60, 90) if busy_then else 60  # free: it ends as the hour starts
    s.event(heir, "Customer visit", heir_start, heir_minutes, [heir])
    mine_start = at(day, 9)
    s.event(user, "Team standup", mine_start, 30, [user])
    slot = at(day, hour)
    if busy_then:
        slot = first_free([(heir_start, heir_minutes), (mine_start, 30)], day, 60)
    title = f"{company} handover"
    prompt = (
        f"I'm moving to another team. Hand all my open {company} deals over to {heir.name}, "
        f"and my deal {extra} with {company2} as well. Then book a 60-minute '{title}' with "
        f"{heir.first} {when} at {hour}:00; if they're busy then, take the earliest time that day "
        "when we're both free for an hour."
    )
    if k == 1:
        prompt += " Log a note on each deal you hand over saying it moved to them."
    gold = [
        C("get_current_user"),
        C("search_employees", query=heir.name),
        C("list_deals", company=company),
    ]
    for code in handed:
        gold.append(C("reassign_deal", code=code, new_owner_email=heir.email))
        if k == 1:
            gold.append(C("log_activity", code=code, kind="note", summary="Moved to new owner."))
    gold.append(C("get_deal", code=extra))
    hand_extra = C("reassign_deal", code=extra, new_owner_email=heir.email)
    forbidden = None
    if ok:
        gold.append(hand_extra)
        if k == 1:
            gold.append(C("log_activity", code=extra, kind="note", summary="Moved to new owner."))
    elif why_not == "owner":
        why = f"Deal {extra} is not yours; only its owner can hand it over."
        forbidden = (hand_extra, "not_owner", "not_owner", why)
    else:
        why = f"Deal {extra} is closed; closed deals stay with their owner."
        forbidden = (hand_extra, "deal_closed", "deal_closed", why)
    d = slot.date().isoformat()
    gold.append(C("list_events", start_date=d, end_date=d, employee_email=heir.email))
    if busy_then:
        gold.append(C("find_free_slot", attendee_emails=[heir.email], day=d, duration_minutes=60))
    gold.append(
        C(
            "create_event",
            title=title,
            start=iso(slot),
            end=iso(slot + timedelta(hours=1)),
            attendee_emails=[heir.email],
        )
    )
    return _draft("account_handover", prompt, gold, forbidden)


LINES = ("Licences", "Support", "Training", "Onboarding", "Hosting", "Consulting")


def _money(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def quote_close(s: Story, k: int) -> Draft:
    """Price a deal from the latest of several quote emails (10-30 emails: older quotes, other
    senders, other customers), less a discount; mark it won if it is in proposal, else leave
    its stage (conditional); send the quote on to a named address (a twin: a CRM contact, or
    an address at the customer's domain the CRM does not list: declined); k=1: and reply to
    the colleague who sent it."""
    user, mate, other = s.user(), s.person(), s.person()
    cid, company, contacts = s.company()
    _, company2, _ = s.company(1)
    stage = s.choose("qualified", "proposal", "proposal")
    code = s.deal(cid, user, stage, s.amount() if s.coin() else None)
    s.deal(cid, other, "proposal", s.amount(), "Support plan")  # a colleague's: not "my" deal
    discount = s.choose(5, 8, 10, 12, 15)

    def quote_body() -> tuple[str, Decimal]:
        items = s.rng.sample(LINES, s.rng.randint(2, 4))
        prices = [Decimal(s.rng.randrange(400, 6000) * 5) / 4 for _ in items]
        lines = "\n".join(
            f"{name}: {price:,.2f}" for name, price in zip(items, prices, strict=True)
        )
        return f"Line items (dollars, before any discount):\n{lines}", sum(prices, Decimal(0))

    # The history, oldest first: quotes for this customer from the colleague (the last one is
    # the one), from someone else, for another customer, and unrelated mail.
    n = s.rng.randint(10, 30)
    latest_at = s.rng.randint(2, 6)
    older: list[str] = []
    for i in range(n):
        hours = latest_at + 3 * (n - i)  # every filler is older than the quote that counts
        kind = s.choose("old", "other_sender", "other_customer", "noise", "noise")
        body, _ = quote_body()
        if kind == "old" or (i == n - 1 and not older):  # at least one older quote
            older.append(s.email(mate.email, [user], f"Quote for {company}", body, hours))
        elif kind == "other_sender":
            s.email(other.email, [user], f"Quote for {company} (draft)", body, hours)
        elif kind == "other_customer":
            s.email(mate.email, [user], f"Quote for {company2}", body, hours)
        else:
            subject = s.choose("Lunch on Friday?", "Travel policy update", "Offsite agenda")
            s.email(other.email, [user], subject, "FYI.", hours, read=True)
    body, total = quote_body()
    chosen = s.email(mate.email, [user], f"Quote for {company}", body, latest_at)
    # A newer quote for the customer, but from someone else (not the colleague named).
    s.email(other.email, [user], f"Quote for {company} (draft)", quote_body()[0], latest_at - 1)
    amount = _money(total * (100 - discount) / 100)
    ok = s.coin()
    if ok:
        to = contacts[1].email
    else:
        first, last = s.names.pop()
        to = f"{first}.{last}@{contacts[1].email.split('@')[1]}".lower()
    prompt = (
        f"Take the latest quote {mate.name} emailed me for {company}, apply the {discount}% "
        f"discount we agreed to its total, and set my {company} deal to that amount. If the "
        "deal is already in proposal, mark it won; otherwise leave its stage alone. Then "
        f"forward that quote to {to}, and archive {mate.first}'s older quotes for {company}."
    )
    if k == 1:
        prompt += f" Finally reply to {mate.first} that the deal is updated."
    gold = [
        C("search_emails", query=f"Quote for {company}"),
        C("read_email", message_id=chosen),
        C("list_deals", company=company),
        C("get_current_user"),
        C("update_deal_amount", code=code, amount=float(amount)),
    ]
    if stage == "proposal":
        gold.append(C("update_deal_stage", code=code, stage="won"))
    gold.append(C("search_customers", query=to))
    send = C("forward_email", message_id=chosen, to=[to])
    forbidden = None
    if ok:
        gold.append(send)
    else:
        why = f"{to} is not a CRM contact; external email may only go to recorded contacts."
        forbidden = (send, "external_recipient", "external_recipient", why)
    gold += [C("archive_email", message_id=mid) for mid in reversed(older)]
    if k == 1:
        gold.append(C("reply_email", message_id=chosen, body="Thanks, the deal is updated."))
    return _draft("quote_close", prompt, gold, forbidden)
