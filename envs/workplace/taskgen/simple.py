"""Short stories (1-4 gold calls): one lookup and its answer, one change, or one request the
rules refuse (declined with the rule's code).

Twins: a family with a rule draws (`Story.coin`) whether the data permits the request or a rule
forbids it, with the same wording either way; the gold looks the fact up first, then acts or
declines. Distractors: look-alike rows (a namesake in another department, another deal of the
same customer, an email on the same subject) the gold's lookup tells apart.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from envs.workplace.taskgen.kit import C, Draft, Person, Story, at, first_free, iso

STAGES = ("lead", "qualified", "proposal", "won")


def refusal(
    family: str,
    prompt: str,
    gold: list[dict[str, Any]],
    forbidden: dict[str, Any],
    error: str,
    reason: str,
    why: str,
    writes: bool = False,
) -> Draft:
    """A request the data forbids: the gold looks it up (and does any allowed part), then
    declines with `reason`; `forbidden` must be refused by the tools with `error`."""
    return Draft(
        family,
        prompt,
        gold,
        writes,
        forbidden=(forbidden, error),
        decline=reason,
        decline_message=why,
    )


def namesake(s: Story, p: Person, dept: str, active: bool = True) -> Person:
    """Another colleague with `p`'s name in another department (told apart by department)."""
    return s.person(dept, active=active, name=(p.first, p.last))


NOTES = ("they asked for a revised timeline", "legal is reviewing the contract",
         "budget approved for next quarter", "they want a second demo")  # fmt: skip


def with_note(s: Story, code: str, prompt: str, gold: list[dict[str, Any]]) -> tuple[str, bool]:
    """Most draws (7 in 10) also ask for a note on the deal (allowed in both twins: notes may go on
    any deal), appended to `gold`; returns the prompt and whether the note was asked for."""
    if s.rng.random() >= 0.7:
        return prompt, False
    note = s.choose(*NOTES)
    gold.append(C("log_activity", code=code, kind="note", summary=note.capitalize() + "."))
    return f"{prompt} Also log a note on it: {note}.", True


FOLLOW_UPS = ("Write handover notes", "Update the runbook", "Book a retro",
              "Check test coverage", "Clean up old branches")  # fmt: skip


def with_new_task(s: Story, key: str, prompt: str, gold: list[dict[str, Any]]) -> tuple[str, bool]:
    """Half the draws also ask for a new task in the (active) project, allowed in both twins."""
    if not s.coin():
        return prompt, False
    title = s.choose(*FOLLOW_UPS)
    gold.append(C("create_task", project_key=key, title=title))
    return f"{prompt} Also add a task '{title}' to {key}.", True


def with_rsvp(
    s: Story, host: Person, user: Person, day: int, prompt: str, gold: list[dict[str, Any]]
) -> tuple[str, bool]:
    """Half the draws also answer an invitation of `host` that day, allowed in both twins."""
    if not s.coin():
        return prompt, False
    title = s.choose("Budget check-in", "Coffee chat", "Hiring debrief")
    response = s.choose("accepted", "declined")
    code = s.event(host, title, at(day, 16), 30, [host, user])
    gold.append(C("respond_to_event", code=code, response=response))
    verb = "accept" if response == "accepted" else "decline"
    return f"{prompt} Also {verb} the {title} invite that afternoon.", True


# ---- CRM ------------------------------------------------------------------------------------


def lookup_deal(s: Story, k: int) -> Draft:
    s.user()
    owner, other = s.person(), s.person()
    cid, company, _ = s.company()
    stage = s.choose("lead", "qualified", "proposal")
    code = s.deal(cid, owner, stage, s.amount())
    # Another deal, another owner and stage: the same customer's (the code tells them apart)
    # or another customer's (then the request may name the deal by its customer alone).
    where = cid if s.coin() else s.company(1)[0]
    s.deal(where, other, s.choose("lead", "qualified", "proposal"), s.amount(), "Support plan")
    if k == 0:
        prompt = f"Who owns deal {code} with {company}? I need to talk to them about it."
        answer = ("name", owner.name)
    else:
        prompt = f"Quick question: what stage is deal {code} ({company}) in right now?"
        answer = ("text", stage)
    return Draft("lookup_deal", prompt, [C("get_deal", code=code)], False, answer=answer)


def advance_deal(s: Story, k: int) -> Draft:
    """Twins: the deal is one stage behind the target (moved), or further back or closed."""
    user = s.user()
    cid, company, _ = s.company()
    target = ("qualified", "proposal", "lost")[k]
    ok = s.coin()
    if target == "lost":
        start = s.choose("lead", "qualified", "proposal") if ok else "won"
    elif ok:
        start = STAGES[STAGES.index(target) - 1]
    else:
        behind = [st for st in STAGES[: STAGES.index(target) - 1]]  # more than one stage back
        start = s.choose(*behind, "won", "lost")
    amount = s.amount() if start in ("won", "lost") or s.coin() else None
    code = s.deal(cid, user, start, amount)
    # Another deal one step short of the target: the customer's (the code tells them apart),
    # or another customer's (then the request may name the deal by its customer alone).
    other = cid if s.coin() else s.company(1)[0]
    s.deal(
        other,
        user,
        STAGES[STAGES.index(target) - 1] if target != "lost" else "lead",
        s.amount(),
        "Support plan",
    )
    why = " They went with a competitor." if target == "lost" else ""
    gold = [C("get_deal", code=code)]
    prompt, noted = with_note(
        s, code, f"Please move my deal {code} with {company} to {target}.{why}", gold
    )
    move = C("update_deal_stage", code=code, stage=target)
    if ok:
        return Draft("advance_deal", prompt, [*gold, move], True)
    if start in ("won", "lost"):
        why = f"Deal {code} is already {start}; closed deals cannot change."
        return refusal("advance_deal", prompt, gold, move, "deal_closed", "deal_closed", why, noted)
    why = f"Deal {code} is {start}; deals move one stage forward at a time."
    return refusal(
        "advance_deal", prompt, gold, move, "stage_order", "cannot_skip_stage", why, noted
    )


def refuse_skip_stage(s: Story, k: int) -> Draft:
    """Twins: the deal is in proposal with an amount (won), or still qualified (refused)."""
    user = s.user()
    cid, company, _ = s.company()
    ok = s.coin()
    stage = "proposal" if ok else s.choose("qualified", "qualified", "lost")
    code = s.deal(cid, user, stage, s.amount())
    s.deal(cid, user, "proposal" if not ok else "qualified", s.amount(), "Support plan")
    gold = [C("get_deal", code=code)]
    prompt = f"Great news, {company} said yes! Mark deal {code} as won right away."
    prompt, noted = with_note(s, code, prompt, gold)
    win = C("update_deal_stage", code=code, stage="won")
    if ok:
        return Draft("refuse_skip_stage", prompt, [*gold, win], True)
    if stage == "lost":
        why = f"Deal {code} is lost, and closed deals cannot change; I can open a new deal."
        return refusal(
            "refuse_skip_stage", prompt, gold, win, "deal_closed", "deal_closed", why, noted
        )
    why = f"Deal {code} is qualified; it must go to proposal before it can be won."
    return refusal(
        "refuse_skip_stage", prompt, gold, win, "stage_order", "cannot_skip_stage", why, noted
    )


def set_amount(s: Story, k: int) -> Draft:
    """Twins: the customer's one deal is open (amount set) or already closed (refused)."""
    user = s.user()
    cid, company, _ = s.company()
    ok = s.coin()
    stage = s.choose("qualified", "proposal") if ok else s.choose("won", "lost")
    before = s.amount() if (k or not ok) else None
    code = s.deal(cid, user, stage, before)
    amount = s.amount()
    gold = [C("list_deals", company=company)]
    prompt = f"Set the amount on my {company} deal to {amount:.2f} dollars, please."
    prompt, noted = with_note(s, code, prompt, gold)
    change = C("update_deal_amount", code=code, amount=amount)
    if ok:
        return Draft("set_amount", prompt, [*gold, change], True)
    why = f"Deal {code} is {stage}; closed deals cannot change."
    return refusal("set_amount", prompt, gold, change, "deal_closed", "deal_closed", why, noted)


def refuse_not_owner(s: Story, k: int) -> Draft:
    """Twins: the user owns the deal (handed over) or a colleague does (refused)."""
    user = s.user()
    ok = s.coin()
    # Forbidden twins: a colleague owns the deal, or the new owner has left (a third).
    gone = not ok and s.rng.random() < 0.35
    owner, other = s.person(), s.person(active=not gone)
    cid, company, _ = s.company()
    mine = ok or gone
    code = s.deal(cid, user if mine else owner, "proposal", s.amount())
    where = cid if s.coin() else s.company(1)[0]  # a look-alike: same customer, or another
    s.deal(where, owner if mine else user, "qualified", s.amount(), "Support plan")
    gold = [
        C("get_current_user"),
        C("get_deal", code=code),
        C("search_employees", query=other.name),
    ]
    prompt = f"Hand deal {code} ({company}) over to {other.name}, they know the customer best."
    prompt, noted = with_note(s, code, prompt, gold)
    hand = C("reassign_deal", code=code, new_owner_email=other.email)
    if ok:
        return Draft("refuse_not_owner", prompt, [*gold, hand], True)
    if gone:
        why = f"{other.name} is no longer an active employee, so deal {code} cannot go to them."
        return refusal(
            "refuse_not_owner",
            prompt,
            gold,
            hand,
            "inactive_employee",
            "inactive_employee",
            why,
            noted,
        )
    why = f"Only the owner of deal {code}, {owner.name}, can hand it over; please ask them."
    return refusal("refuse_not_owner", prompt, gold, hand, "not_owner", "not_owner", why, noted)


def win_deal(s: Story, k: int) -> Draft:
    """Twins: the deal is in proposal (amount set, then won) or still qualified (the amount is
    set, the win declined: the allowed part is done)."""
    user = s.user()
    cid, company, _ = s.company()
    ok = s.coin()
    code = s.deal(cid, user, "proposal" if ok else "qualified", None if k == 0 else s.amount())
    amount = s.amount()
    prompt = (
        f"We closed {company}! The final contract value is {amount:.2f} dollars. Please set that "
        "amount on my deal and mark it as won."
    )
    gold = [
        C("list_deals", company=company),
        C("update_deal_amount", code=code, amount=amount),
    ]
    win = C("update_deal_stage", code=code, stage="won")
    if ok:
        return Draft("win_deal", prompt, [*gold, win], True)
    why = f"I set the amount, but deal {code} is qualified; it must go to proposal before won."
    return refusal(
        "win_deal", prompt, gold, win, "stage_order", "cannot_skip_stage", why, writes=True
    )


# ---- tasks ----------------------------------------------------------------------------------


def task_status(s: Story, k: int) -> Draft:
    """Twins ("I've started on ..."): the task is to do (started) or already done (refused)."""
    user = s.user("Engineering")
    key = s.project(user)
    s.task(key, "Write project charter", user, "done")
    ok = k == 1 or s.coin()
    title = s.choose("Set up CI pipeline", "Review pricing page", "Plan load tests")
    code = s.task(key, title, user, ("todo" if ok else "done", "in_progress")[k])
    target = ("in_progress", "done")[k]
    prompt = f"I've {'started on' if k == 0 else 'finished'} {code}; please update its status."
    gold = [C("list_tasks", project_key=key)]
    prompt, extra = with_new_task(s, key, prompt, gold)
    change = C("update_task_status", code=code, status=target)
    if ok:
        return Draft("task_status", prompt, [*gold, change], True)
    why = f"Task {code} is done and cannot be reopened; I can create a new task instead."
    return refusal("task_status", prompt, gold, change, "task_closed", "task_done", why, extra)


def refuse_reopen(s: Story, k: int) -> Draft:
    """Twins: the task is done (refused) or still to do (set in progress)."""
    user = s.user("Engineering")
    key = s.project(user)
    topic = s.choose("billing report", "data export", "search index", "release notes")
    ok = s.coin()
    code = s.task(key, f"Migrate {topic}", user, "todo" if ok else "done")
    s.task(key, f"Review {topic}", user, "done" if ok else "todo")
    prompt = f"The {topic} migration in {key} needs more work: set it back to in progress."
    gold = [C("list_tasks", project_key=key)]
    prompt, extra = with_new_task(s, key, prompt, gold)
    change = C("update_task_status", code=code, status="in_progress")
    if ok:
        return Draft("refuse_reopen", prompt, [*gold, change], True)
    why = f"Task {code} is done and cannot be reopened; I can create a new task for the rest."
    return refusal("refuse_reopen", prompt, gold, change, "task_closed", "task_done", why, extra)


def reassign_task(s: Story, k: int) -> Draft:
    """Twins: the task is open (reassigned) or done (refused); a namesake in Sales."""
    ok = s.coin()
    gone = not ok and s.coin()  # forbidden twins: the colleague has left, or the task is done
    user, mate = s.user("Engineering"), s.person("Engineering", active=not gone)
    namesake(s, mate, "Sales")
    key = s.project(user)
    title = s.choose("Fix search index", "Document API limits", "Tune alerts", "Audit logs")
    code = s.task(key, title, user, s.choose("todo", "in_progress") if ok or gone else "done")
    prompt = f"Please give task {code} to {mate.name} in Engineering; I'm overloaded this week."
    gold = [C("list_tasks", project_key=key), C("search_employees", query=mate.name)]
    prompt, extra = with_new_task(s, key, prompt, gold)
    give = C("reassign_task", code=code, assignee_email=mate.email)
    if ok:
        return Draft("reassign_task", prompt, [*gold, give], True)
    if gone:
        why = f"{mate.name} (Engineering) has left the company, so {code} cannot go to them."
        return refusal(
            "reassign_task",
            prompt,
            gold,
            give,
            "inactive_employee",
            "inactive_employee",
            why,
            extra,
        )
    why = f"Task {code} is done; done tasks keep their assignee."
    return refusal("reassign_task", prompt, gold, give, "task_closed", "task_done", why, extra)


def refuse_inactive(s: Story, k: int) -> Draft:
    """Twins: the named Engineering colleague is active (assigned) or has left (refused); an
    active namesake works in Support."""
    user = s.user("Engineering")
    ok = s.coin()
    done = not ok and s.rng.random() < 0.35  # forbidden twins: the colleague left, or done
    mate = s.person("Engineering", active=ok or done)
    namesake(s, mate, "Support")
    key = s.project(user)
    title = s.choose("Test data export", "Port billing jobs")
    code = s.task(key, title, user, "done" if done else "todo")
    prompt = f"Assign {code} to {mate.name} from Engineering, they built the export originally."
    gold = [C("list_tasks", project_key=key), C("search_employees", query=mate.name)]
    prompt, extra = with_new_task(s, key, prompt, gold)
    give = C("reassign_task", code=code, assignee_email=mate.email)
    if ok:
        return Draft("refuse_inactive", prompt, [*gold, give], True)
    if done:
        why = f"Task {code} is done; done tasks keep their assignee."
        return refusal(
            "refuse_inactive", prompt, gold, give, "task_closed", "task_done", why, extra
        )
    why = f"{mate.name} (Engineering) is no longer an active employee, so {code} cannot go to them."
    return refusal(
        "refuse_inactive",
        prompt,
        gold,
        give,
        "inactive_employee",
        "inactive_employee",
        why,
        extra,
    )


# ---- mail -----------------------------------------------------------------------------------

MONTHS = ("January", "February", "March", "April")


def file_email(s: Story, k: int) -> Draft:
    """The invoice email of the named contact; another customer sent one with the same subject."""
    user, mate = s.user(), s.person()
    _, company, contacts = s.company()
    _, _, others = s.company(1)
    c = contacts[1]
    month = s.choose(*MONTHS)
    subject = f"Updated invoice for {month}"
    mid = s.email(c.email, [user], subject, "Please find the corrected invoice attached.", 5)
    s.email(others[1].email, [user], subject, "Our corrected invoice.", s.choose(2, 7, 9))
    s.email(mate.email, [user], "Lunch on Thursday?", "Are you in?", 3)
    s.email(c.email, [user], "Thanks for the demo", "Great session yesterday.", 30, read=True)
    gold = [C("search_emails", query="invoice")]
    if k == 0:
        prompt = f"Archive the email from {c.name} of {company} about the {month} invoice."
        gold.append(C("archive_email", message_id=mid))
    else:
        label = s.choose("finance", "billing", "invoices")
        prompt = f"Label the {month} invoice email from {c.name} as '{label}'."
        gold.append(C("label_email", message_id=mid, add=[label]))
    return Draft("file_email", prompt, gold, True)


def refuse_external(s: Story, k: int) -> Draft:
    """Twins: the address is a CRM contact (forwarded) or only looks like one: the customer's
    domain, but nobody the CRM lists (refused)."""
    user, mate = s.user(), s.person()
    _, _, contacts = s.company()
    topic = s.choose("draft pricing sheet", "renewal forecast", "discount matrix")
    mid = s.email(mate.email, [user], topic.capitalize(), "Internal only.", 2)
    ok = s.coin()
    if ok:
        outsider = contacts[0].email
    else:
        first, last = s.names.pop()
        outsider = f"{first}.{last}@{contacts[0].email.split('@')[1]}".lower()
    prompt = f"Forward the {topic} email to {outsider}, he's a friend who consults."
    gold = [C("search_emails", query=topic), C("search_customers", query=outsider)]
    labelled = s.coin()  # half the draws also ask for a label (allowed in both twins)
    if labelled:
        prompt += " And label that email 'follow-up'."
        gold.append(C("label_email", message_id=mid, add=["follow-up"]))
    send = C("forward_email", message_id=mid, to=[outsider])
    if ok:
        return Draft("refuse_external", prompt, [*gold, send], True)
    why = f"{outsider} is not a CRM contact; external email may only go to recorded contacts."
    return refusal(
        "refuse_external",
        prompt,
        gold,
        send,
        "external_recipient",
        "external_recipient",
        why,
        labelled,
    )


def reply(s: Story, k: int) -> Draft:
    user, a, b = s.user(), s.person(), s.person()
    to = [user, b] if k == 1 else [user]
    event = s.choose("offsite", "hackathon", "town hall", "training day")
    day = s.choose(6, 8, 10, 14, 21)
    mid = s.email(a.email, to, f"Team {event} on April {day}", f"Can you make the {event}?", 4)
    # The same topic from someone else: the sender tells them apart.
    s.email(b.email, [user], f"Re: {event} catering", "Any dietary needs?", 2)
    gold = [C("search_emails", query=event), C("read_email", message_id=mid)]
    body = "Yes, I'll be there."
    everyone = " Reply to everyone on it." if k == 1 else ""
    gold.append(C("reply_email", message_id=mid, body=body, reply_all=True if k == 1 else None))
    prompt = f"Reply to {a.name}'s email about the {event}: tell them I can attend.{everyone}"
    if k == 2:
        label = event.replace(" ", "-")
        gold.append(C("label_email", message_id=mid, add=[label]))
        prompt += f" Then label their email '{label}'."
    return Draft("reply", prompt, gold, True)


def forward_to_contact(s: Story, k: int) -> Draft:
    user, mate = s.user(), s.person()
    cid, company, contacts = s.company()
    code = s.deal(cid, user, "proposal", s.amount())
    s.deal(cid, mate, "qualified", s.amount(), "Support plan")
    c = contacts[0]
    mid = s.email(mate.email, [user], f"Quote for {company}", "Final quote attached.", 1)
    s.email(mate.email, [user], "Quote template update", "FYI.", 2)
    prompt = f"Forward {mate.first}'s quote for {company} to {c.name}, their procurement head."
    gold = [
        C("search_emails", query="quote"),
        C("search_customers", query=company),
        C("forward_email", message_id=mid, to=[c.email], note=None),
    ]
    if k == 1:
        prompt += " Then log it as an email activity on my deal with them, with them as contact."
        gold += [
            C("list_deals", company=company),
            C(
                "log_activity",
                code=code,
                kind="email",
                summary="Forwarded the final quote.",
                contact_email=c.email,
            ),
        ]
    return Draft("forward_to_contact", prompt, gold, True)


# ---- calendar -------------------------------------------------------------------------------

TITLES = ("Pricing sync", "Renewal prep", "Roadmap chat", "Budget review", "Launch plan",
          "Hiring debrief", "Pipeline check", "Vendor shortlist")  # fmt: skip


def schedule(s: Story, k: int) -> Draft:
    """k=0: colleague's email given; k=1,2: one name; k=3,4: two names."""
    user, a, b = s.user(), s.person(), s.person()
    day, when = s.day()
    busy = []
    for busy_one, title in ((a, "Hiring sync"), (user, "Focus time"), (b, "Vendor call")):
        start, minutes = at(day, s.rng.randint(9, 13), s.choose(0, 30)), s.choose(30, 60, 90)
        s.event(busy_one, title, start, minutes, [busy_one])
        if busy_one is user or busy_one is a or k >= 3:
            busy.append((start, minutes))
    people = [a, b] if k >= 3 else [a]
    start = first_free(busy, day, 30)
    title = s.choose(*TITLES)
    gold = [] if k == 0 else [C("search_employees", query=p.name) for p in people]
    emails = [p.email for p in people]
    gold += [
        C(
            "find_free_slot",
            attendee_emails=emails,
            day=at(day, 0).date().isoformat(),
            duration_minutes=30,
        ),
        C(
            "create_event",
            title=title,
            start=iso(start),
            end=iso(start + timedelta(minutes=30)),
            attendee_emails=emails,
        ),
    ]
    who = a.email if k == 0 else " and ".join(p.name for p in people)
    prompt = (
        f"Set up a 30-minute meeting called '{title}' with {who} {when}, at the first time "
        "we're all free."
    )
    return Draft("schedule", prompt, gold, True)


def conflict(s: Story, k: int) -> Draft:
    """k=0 twins: the colleague is busy then (refused) or free (booked); k=1: the user says
    to book anyway."""
    user = s.user()
    a = s.person()
    day, when = s.day()
    hour = s.rng.randint(10, 15)
    clash = k == 1 or not s.coin()
    # Their other event overlaps the hour, or ends just before it.
    other = at(day, hour, 30) if clash else at(day, hour - 1)
    s.event(a, "Quarterly planning", other, 60, [a])
    start, end = at(day, hour), at(day, hour + 1)
    title = s.choose("Contract review", "Deal review", "Forecast call")
    gold = [C("search_employees", query=a.name)]
    prompt = f"Book '{title}' with {a.name} {when} from {hour}:00 to {hour + 1}:00 UTC."
    book = C("create_event", title=title, start=iso(start), end=iso(end), attendee_emails=[a.email])
    if k == 1:
        prompt += " I know it clashes with something of theirs; book it anyway, they'll move it."
        book["arguments"]["allow_conflicts"] = True
        return Draft("book_anyway", prompt, [*gold, book], True)
    d = at(day, 0).date().isoformat()
    gold.append(C("list_events", start_date=d, end_date=d, employee_email=a.email))
    prompt, extra = with_rsvp(s, a, user, day, prompt, gold)
    if not clash:
        return Draft("conflict", prompt, [*gold, book], True)
    why = (
        f"{a.name} has Quarterly planning from {hour}:30 to {hour + 1}:30; I can find a free time."
    )
    return refusal("conflict", prompt, gold, book, "conflict", "calendar_conflict", why, extra)


def reschedule(s: Story, k: int) -> Draft:
    """Twins: the user organizes the review (moved) or only attends it (refused)."""
    user, a = s.user(), s.person()
    ok = s.coin()
    day, when = s.day(1, 3)
    hour = s.rng.randint(13, 15)
    organizer, guest = (user, a) if ok else (a, user)
    code = s.event(organizer, "Pipeline review", at(day, hour), 60, [guest])
    lunch = s.event(a, "Team lunch", at(day, 12), 60, [a, user])
    d = at(day, 0).date().isoformat()
    gold = [C("list_events", start_date=d, end_date=d)]
    rsvp = s.coin()  # half the draws also answer an invitation (allowed in both twins)
    if rsvp:
        gold.append(C("respond_to_event", code=lunch, response="accepted"))
        prompt = f"Move my Pipeline review {when} to the same time the next day."
        new = at(day + 1, hour)
        prompt += " And accept the Team lunch invite that day." if rsvp else ""
    else:
        minutes = s.choose(60, 120, 150)
        s.event(a, "Offsite prep", at(day + 1, 9), minutes, [a])
        prompt = (
            f"Move my Pipeline review {when} to the next day, at the first hour when everyone "
            "invited to it is free."
        )
        prompt += " And accept the Team lunch invite that day." if rsvp else ""
        new = first_free([(at(day + 1, 9), minutes)], day + 1, 60)
        gold.append(
            C(
                "find_free_slot",
                attendee_emails=[a.email],
                day=new.date().isoformat(),
                duration_minutes=60,
            )
        )
    move = C(
        "reschedule_event", code=code, new_start=iso(new), new_end=iso(new + timedelta(hours=1))
    )
    if ok:
        return Draft("reschedule", prompt, [*gold, move], True)
    if k == 1:
        gold.pop()  # no slot to look for: the move itself is not the user's to make
    why = f"Only the organizer, {a.name}, can move the Pipeline review ({code}); ask them."
    return refusal("reschedule", prompt, gold, move, "not_organizer", "not_organizer", why, rsvp)


def decline(s: Story, k: int) -> Draft:
    """The Vendor demo on the named day; another one on another day is not it."""
    user, a = s.user(), s.person()
    day, when = s.day(1, 3)
    code = s.event(a, "Vendor demo", at(day, s.rng.randint(13, 16)), 60, [a, user])
    s.event(a, "Vendor demo", at(day + 1, 15), 60, [a, user])
    s.event(a, "Standup", at(day, 9), 15, [a, user])
    d = at(day, 0).date().isoformat()
    prompt = f"Please decline the Vendor demo invitation I got for {when.removeprefix('on ')}."
    gold = [C("list_events", start_date=d, end_date=d),
            C("respond_to_event", code=code, response="declined")]  # fmt: skip
    return Draft("decline", prompt, gold, True)


def cancel_and_notify(s: Story, k: int) -> Draft:
    """Twins: the user organizes the review (cancelled, guests told) or a colleague does
    (refused: no cancellation, so no email either)."""
    user, a, b = s.user(), s.person(), s.person()
    ok = s.coin()
    day, when = s.day()
    title = s.choose("Design review", "Roadmap review", "Budget review")
    organizer, guests = (user, [a, b]) if ok else (a, [user, b])
    code = s.event(organizer, title, at(day, s.rng.randint(10, 15)), 60, guests)
    d = at(day, 0).date().isoformat()
    subject = f"{title} cancelled"
    prompt = (
        f"Cancel my {title} {when} and email everyone invited to it that it's cancelled, "
        f"with the subject '{subject}'."
    )
    gold = [C("list_events", start_date=d, end_date=d)]
    prompt, extra = with_rsvp(s, a, user, day, prompt, gold)
    cancel = C("cancel_event", code=code)
    if ok:
        gold += [
            cancel,
            C(
                "send_email",
                to=sorted([a.email, b.email]),
                subject=subject,
                body=f"The {title.lower()} is cancelled.",
            ),
        ]
        return Draft("cancel_and_notify", prompt, gold, True)
    why = f"Only the organizer, {a.name}, can cancel the {title} ({code}); ask them."
    return refusal(
        "cancel_and_notify", prompt, gold, cancel, "not_organizer", "not_organizer", why, extra
    )


# ---- answers that need a computation or a rule -------------------------------------------------


def lookup_pipeline(s: Story, k: int) -> Draft:
    user, mate = s.user(), s.person()
    cid, _, _ = s.company()
    cid2, _, _ = s.company(1)
    total = 0.0
    for i in range(s.rng.randint(2, 4)):
        amount = s.amount()
        s.deal(
            (cid, cid2)[i % 2],
            user,
            "proposal",
            amount,
            ("Subscription", "Support plan", "Expansion", "Training")[i],
        )
        total += amount
    s.deal(cid, user, "qualified", s.amount(), "Pilot")
    s.deal(cid2, mate, "proposal", s.amount())
    prompt = "What's the total amount of my deals that are currently in the proposal stage?"
    gold = [C("get_current_user"), C("list_deals", owner_email=user.email, stage="proposal")]
    return Draft("lookup_pipeline", prompt, gold, False, answer=("amount", f"{total:.2f}"))


def lookup_free_time(s: Story, k: int) -> Draft:
    user, a = s.user(), s.person()
    day, when = s.day()
    busy = []
    # Their morning starts busy (so the answer is not simply 09:00), then one of yours.
    first = s.choose(60, 90, 120, 150, 180)
    for who, title, start, minutes in (
        (a, "Hiring sync", at(day, 9), first),
        (user, "Focus time", at(day, 9) + timedelta(minutes=first + s.choose(0, 30, 60)), 60),
    ):
        s.event(who, title, start, minutes, [who])
        busy.append((start, minutes))
    prompt = (
        f"When is the first time {when} that {a.name} and I are both free for a full hour? "
        "Give me the date and time; don't book anything yet."
    )
    d = at(day, 0).date().isoformat()
    gold = [
        C("search_employees", query=a.name),
        C("find_free_slot", attendee_emails=[a.email], day=d, duration_minutes=60),
    ]
    return Draft(
        "lookup_free_time", prompt, gold, False, answer=("datetime", iso(first_free(busy, day, 60)))
    )


def refuse_won_without_amount(s: Story, k: int) -> Draft:
    """Twins: the deal has no amount (refused) or already has one (won)."""
    user = s.user()
    cid, company, _ = s.company()
    ok = s.coin()
    code = s.deal(cid, user, "proposal", s.amount() if ok else None)
    s.deal(cid, user, "proposal", None if ok else s.amount(), "Support plan")
    prompt = (
        f"{company} signed! Mark my deal {code} as won. I don't have the final number yet, "
        "so leave the amount as it is."
    )
    gold = [C("get_deal", code=code)]
    prompt, noted = with_note(s, code, prompt, gold)
    win = C("update_deal_stage", code=code, stage="won")
    if ok:
        return Draft("refuse_won_without_amount", prompt, [*gold, win], True)
    why = f"Deal {code} has no amount, and a deal can only be won with one; tell me the number."
    return refusal(
        "refuse_won_without_amount",
        prompt,
        gold,
        win,
        "amount_required",
        "won_needs_amount",
        why,
        noted,
    )


def lookup_open_deals(s: Story, k: int) -> Draft:
    """A list answer: the codes of the user's open deals (won and lost ones are closed)."""
    user, mate = s.user(), s.person()
    cid, _, _ = s.company()
    cid2, _, _ = s.company(1)
    codes = []
    names = ("Subscription", "Support plan", "Expansion", "Pilot", "Training", "Renewal")
    for i, name in enumerate(names):
        stage = s.choose(*STAGES, "lost") if i > 0 else s.choose("lead", "qualified")
        amount = s.amount() if stage == "won" or s.coin() else None
        code = s.deal((cid, cid2)[i % 2], user, stage, amount, name)
        if stage not in ("won", "lost"):
            codes.append(code)
    s.deal(cid2, mate, "proposal", s.amount())
    prompt = "Which of my deals are still open? Give me their codes."
    gold = [C("get_current_user"), C("list_deals", owner_email=user.email)]
    return Draft("lookup_open_deals", prompt, gold, False, answer=("id", codes))


def refuse_not_organizer(s: Story, k: int) -> Draft:
    """Twins: a colleague organizes the demo (refused) or the user does (moved)."""
    user, a = s.user(), s.person()
    ok = s.coin()
    day, when = s.day(1, 3)
    hour = s.rng.randint(13, 15)
    organizer, guest = (user, a) if ok else (a, user)
    title = s.choose("Vendor demo", "Partner briefing", "Product walkthrough")
    code = s.event(organizer, title, at(day, hour - 2), 60, [guest])
    d = at(day, 0).date().isoformat()
    prompt = f"Move the {title} {when} to {hour}:00, same length; that suits me better."
    gold = [C("list_events", start_date=d, end_date=d)]
    rsvp = s.coin()  # half the draws also answer an invitation (allowed in both twins)
    if rsvp:
        chat = s.event(a, "Coffee chat", at(day, 9), 30, [a, user])
        prompt += " Also accept the Coffee chat invite that morning."
        gold.append(C("respond_to_event", code=chat, response="accepted"))
    move = C(
        "reschedule_event", code=code, new_start=iso(at(day, hour)), new_end=iso(at(day, hour + 1))
    )
    if ok:
        return Draft("refuse_not_organizer", prompt, [*gold, move], True)
    why = f"Only the organizer, {a.name}, can move the {title} ({code}); you can ask them."
    return refusal(
        "refuse_not_organizer", prompt, gold, move, "not_organizer", "not_organizer", why, rsvp
    )


def refuse_closed_deal(s: Story, k: int) -> Draft:
    """Twins: the deal is lost (refused) or still open (amount set)."""
    user = s.user()
    cid, company, _ = s.company()
    ok = s.coin()
    code = s.deal(cid, user, s.choose("qualified", "proposal") if ok else "lost", s.amount())
    s.deal(cid, user, "lost" if ok else "qualified", s.amount(), "Support plan")
    amount = s.amount()
    prompt = (
        f"{company} came back after all: set the amount on my deal {code} to {amount:.2f} "
        "dollars, please."
    )
    gold = [C("get_deal", code=code)]
    prompt, noted = with_note(s, code, prompt, gold)
    change = C("update_deal_amount", code=code, amount=amount)
    if ok:
        return Draft("refuse_closed_deal", prompt, [*gold, change], True)
    why = f"Deal {code} is lost, and closed deals cannot change; I can open a new deal instead."
    return refusal(
        "refuse_closed_deal", prompt, gold, change, "deal_closed", "deal_closed", why, noted
    )
