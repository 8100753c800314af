"""Short stories (1-3 gold calls): one lookup and its answer, one change, or one request the
rules refuse (declined with the rule's code)."""

from __future__ import annotations

from datetime import timedelta

from envs.workplace.taskgen.kit import TUESDAY, C, Draft, Story, at, iso

# ---- CRM ------------------------------------------------------------------------------------


def lookup_deal(s: Story, k: int) -> Draft:
    s.user()
    owner = s.person()
    cid, company, _ = s.company()
    stage = ("proposal", "qualified")[k]
    code = s.deal(cid, owner, stage, 52000.0)
    if k == 0:
        prompt = f"Who owns deal {code} with {company}? I need to talk to them about it."
        answer = ("name", owner.name)
    else:
        prompt = f"Quick question: what stage is deal {code} ({company}) in right now?"
        answer = ("text", stage)
    return Draft("lookup_deal", prompt, [C("get_deal", code=code)], False, answer=answer)


def advance_deal(s: Story, k: int) -> Draft:
    user = s.user()
    cid, company, _ = s.company()
    start, target = (("lead", "qualified"), ("qualified", "proposal"), ("proposal", "lost"))[k]
    code = s.deal(cid, user, start, 30000.0 if k else None)
    why = " They went with a competitor." if target == "lost" else ""
    prompt = f"Please move my deal {code} with {company} to {target}.{why}"
    return Draft("advance_deal", prompt, [C("update_deal_stage", code=code, stage=target)], True)


def refuse_skip_stage(s: Story, k: int) -> Draft:
    user = s.user()
    cid, company, _ = s.company()
    code = s.deal(cid, user, "qualified", 75000.0)
    prompt = f"Great news, {company} said yes! Mark deal {code} as won right away."
    no = (C("update_deal_stage", code=code, stage="won"), "stage_order")
    why = (
        f"Deal {code} is qualified; it must go to proposal before it can "
        "be won. I can move it to proposal now."
    )
    gold = [C("get_deal", code=code)]
    return Draft(
        "refuse_skip_stage",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="cannot_skip_stage",
        decline_message=why,
    )


def set_amount(s: Story, k: int) -> Draft:
    user = s.user()
    cid, company, _ = s.company()
    code = s.deal(cid, user, ("qualified", "proposal")[k], 20000.0 if k else None)
    amount = (48500.0, 61250.5)[k]
    prompt = f"Set the amount on my {company} deal to {amount:.2f} dollars, please."
    gold = [C("list_deals", company=company), C("update_deal_amount", code=code, amount=amount)]
    return Draft("set_amount", prompt, gold, True)


def refuse_not_owner(s: Story, k: int) -> Draft:
    s.user()
    owner, other = s.person(), s.person()
    cid, company, _ = s.company()
    code = s.deal(cid, owner, "proposal", 90000.0)
    prompt = f"Hand deal {code} ({company}) over to {other.name}, they know the customer best."
    gold = [C("get_current_user"), C("get_deal", code=code)]
    no = (C("reassign_deal", code=code, new_owner_email=other.email), "forbidden")
    why = f"Only the owner of deal {code}, {owner.name}, can hand it over; please ask them."
    return Draft(
        "refuse_not_owner",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="not_owner",
        decline_message=why,
    )


def win_deal(s: Story, k: int) -> Draft:
    user = s.user()
    cid, company, _ = s.company()
    code = s.deal(cid, user, "proposal", None if k == 0 else 10000.0)
    amount = (120000.0, 87400.0)[k]
    prompt = (
        f"We closed {company}! The final contract value is {amount:.2f} dollars. Please set that "
        "amount on my deal and mark it as won."
    )
    gold = [
        C("list_deals", company=company),
        C("update_deal_amount", code=code, amount=amount),
        C("update_deal_stage", code=code, stage="won"),
    ]
    return Draft("win_deal", prompt, gold, True)


# ---- tasks ----------------------------------------------------------------------------------


def task_status(s: Story, k: int) -> Draft:
    user = s.user("Engineering")
    key = s.project(user)
    s.task(key, "Write project charter", user, "done")
    code = s.task(key, "Set up CI pipeline", user, ("todo", "in_progress")[k])
    target = ("in_progress", "done")[k]
    prompt = f"I've {'started on' if k == 0 else 'finished'} {code}; please update its status."
    return Draft("task_status", prompt, [C("update_task_status", code=code, status=target)], True)


def refuse_reopen(s: Story, k: int) -> Draft:
    user = s.user("Engineering")
    key = s.project(user)
    code = s.task(key, "Migrate billing report", user, "done")
    s.task(key, "Review pricing page", user, "todo")
    prompt = f"The billing report migration in {key} needs more work: set it back to in progress."
    no = (C("update_task_status", code=code, status="in_progress"), "task_closed")
    why = (
        f"Task {code} is done and cannot be reopened; I can create a new task "
        "for the remaining work."
    )
    gold = [C("list_tasks", project_key=key)]
    return Draft(
        "refuse_reopen", prompt, gold, False, forbidden=no, decline="task_done", decline_message=why
    )


def reassign_task(s: Story, k: int) -> Draft:
    user, mate = s.user("Engineering"), s.person("Engineering")
    key = s.project(user)
    code = s.task(key, ("Fix search index", "Document API limits")[k], user, "todo")
    prompt = f"Please give task {code} to {mate.name}; I'm overloaded this week."
    gold = [
        C("search_employees", query=mate.name),
        C("reassign_task", code=code, assignee_email=mate.email),
    ]
    return Draft("reassign_task", prompt, gold, True)


def refuse_inactive(s: Story, k: int) -> Draft:
    user, gone = s.user("Engineering"), s.person("Engineering", active=False)
    key = s.project(user)
    code = s.task(key, "Test data export", user, "todo")
    prompt = f"Assign {code} to {gone.name}, they built the export originally."
    no = (C("reassign_task", code=code, assignee_email=gone.email), "inactive_employee")
    gold = [C("search_employees", query=gone.name)]
    why = (
        f"{gone.name} is no longer an active employee, so {code} cannot "
        "be assigned to them; pick an active colleague."
    )
    return Draft(
        "refuse_inactive",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="inactive_employee",
        decline_message=why,
    )


# ---- mail -----------------------------------------------------------------------------------


def file_email(s: Story, k: int) -> Draft:
    user, mate = s.user(), s.person()
    cid, company, contacts = s.company()
    c = contacts[1]
    mid = s.email(
        c.email,
        [user],
        "Updated invoice for March",
        "Please find the corrected invoice attached.",
        5,
    )
    s.email(mate.email, [user], "Lunch on Thursday?", "Are you in?", 3)
    s.email(c.email, [user], "Thanks for the demo", "Great session yesterday.", 30, read=True)
    gold = [C("search_emails", query="invoice")]
    if k == 0:
        prompt = f"Archive the email from {c.name} of {company} about the March invoice."
        gold.append(C("archive_email", message_id=mid))
    else:
        prompt = f"Label the March invoice email from {c.name} as 'finance'."
        gold.append(C("label_email", message_id=mid, add=["finance"]))
    return Draft("file_email", prompt, gold, True)


def refuse_external(s: Story, k: int) -> Draft:
    user, mate = s.user(), s.person()
    s.company()
    mid = s.email(mate.email, [user], "Draft pricing sheet", "Internal only: the price list.", 2)
    outsider = "jake.morrow@gmail.com"
    prompt = f"Forward the draft pricing sheet email to {outsider}, he's a friend who consults."
    gold = [C("search_emails", query="pricing sheet"), C("search_customers", query=outsider)]
    no = (C("forward_email", message_id=mid, to=[outsider]), "external_recipient")
    why = (
        f"{outsider} is not a CRM contact; external email may only go "
        "to contacts recorded in the CRM."
    )
    return Draft(
        "refuse_external",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="external_recipient",
        decline_message=why,
    )


def reply(s: Story, k: int) -> Draft:
    user, a, b = s.user(), s.person(), s.person()
    to = [user, b] if k == 1 else [user]
    mid = s.email(a.email, to, "Team offsite on April 10", "Can you make it to the offsite?", 4)
    s.email(b.email, [user], "Quarterly numbers", "See attached.", 6)
    gold = [C("search_emails", query="offsite"), C("read_email", message_id=mid)]
    body = "Yes, I'll be there."
    everyone = " Reply to everyone on it." if k == 1 else ""
    gold.append(C("reply_email", message_id=mid, body=body, reply_all=True if k == 1 else None))
    prompt = f"Reply to {a.name}'s email about the offsite: tell them I can attend.{everyone}"
    if k == 2:
        gold.append(C("label_email", message_id=mid, add=["offsite"]))
        prompt += " Then label their email 'offsite'."
    return Draft("reply", prompt, gold, True)


def forward_to_contact(s: Story, k: int) -> Draft:
    user, mate = s.user(), s.person()
    cid, company, contacts = s.company()
    code = s.deal(cid, user, "proposal", 40000.0)
    c = contacts[0]
    mid = s.email(mate.email, [user], f"Quote for {company}", "Final quote: 40000.", 1)
    s.email(mate.email, [user], "Parking garage closed Friday", "FYI.", 2)
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


def schedule(s: Story, k: int) -> Draft:
    """k=0: colleague's email given; k=1,2: one name; k=3,4: two names."""
    user, a, b = s.user(), s.person(), s.person()
    s.event(a, "Hiring sync", at(1, 9), 60, [a])
    s.event(user, "Focus time", at(1, 10), 60, [user])
    s.event(b, "Vendor call", at(1, 11), 30, [b])
    people = [a, b] if k >= 3 else [a]
    start = at(1, 11, 30) if k >= 3 else at(1, 11)
    title = ("Pricing sync", "Renewal prep", "Roadmap chat", "Budget review", "Launch plan")[k]
    gold = [] if k == 0 else [C("search_employees", query=p.name) for p in people]
    gold += [
        C(
            "find_free_slot",
            attendee_emails=[p.email for p in people],
            day=TUESDAY.isoformat(),
            duration_minutes=30,
        ),
        C(
            "create_event",
            title=title,
            start=iso(start),
            end=iso(start + timedelta(minutes=30)),
            attendee_emails=[p.email for p in people],
        ),
    ]
    who = a.email if k == 0 else " and ".join(p.name for p in people)
    prompt = (
        f"Set up a 30-minute meeting called '{title}' with {who} tomorrow, at the first time "
        "we're all free."
    )
    return Draft("schedule", prompt, gold, True)


def conflict(s: Story, k: int) -> Draft:
    """k=0: the colleague is busy, so the booking is refused; k=1: the user says book anyway."""
    s.user()
    a = s.person()
    s.event(a, "Quarterly planning", at(1, 10, 30), 60, [a])
    start, end = at(1, 10), at(1, 11)
    gold = [C("search_employees", query=a.name)]
    prompt = f"Book 'Contract review' with {a.name} tomorrow from 10:00 to 11:00 UTC."
    if k == 0:
        gold.append(
            C(
                "list_events",
                start_date=TUESDAY.isoformat(),
                end_date=TUESDAY.isoformat(),
                employee_email=a.email,
            )
        )
        no = C(
            "create_event",
            title="Contract review",
            start=iso(start),
            end=iso(end),
            attendee_emails=[a.email],
        )
        why = (
            f"{a.name} has Quarterly planning from 10:30 to 11:30 "
            "tomorrow; I can find a time when you are both free."
        )
        return Draft(
            "refuse_conflict",
            prompt,
            gold,
            False,
            forbidden=(no, "conflict"),
            decline="calendar_conflict",
            decline_message=why,
        )
    prompt += " I know it clashes with something of theirs; book it anyway, they'll move it."
    gold.append(
        C(
            "create_event",
            title="Contract review",
            start=iso(start),
            end=iso(end),
            attendee_emails=[a.email],
            allow_conflicts=True,
        )
    )
    return Draft("book_anyway", prompt, gold, True)


def reschedule(s: Story, k: int) -> Draft:
    user, a = s.user(), s.person()
    code = s.event(user, "Pipeline review", at(1, 14), 60, [a])
    s.event(a, "Team lunch", at(1, 12), 60, [a, user])
    tue = TUESDAY.isoformat()
    gold = [C("list_events", start_date=tue, end_date=tue)]
    if k == 0:
        prompt = "Move my Pipeline review tomorrow to the same time on Wednesday."
        new = at(2, 14)
    else:
        s.event(a, "Offsite prep", at(2, 9), 120, [a])
        prompt = (
            "Move my Pipeline review tomorrow to Wednesday, at the first hour when everyone "
            "invited to it is free."
        )
        new = at(2, 11)
        gold.append(
            C(
                "find_free_slot",
                attendee_emails=[a.email],
                day=new.date().isoformat(),
                duration_minutes=60,
            )
        )
    gold.append(
        C(
            "reschedule_event",
            code=code,
            new_start=iso(new),
            new_end=iso(new.replace(hour=new.hour + 1)),
        )
    )
    return Draft("reschedule", prompt, gold, True)


def decline(s: Story, k: int) -> Draft:
    user, a = s.user(), s.person()
    code = s.event(a, "Vendor demo", at(1, 15), 60, [a, user])
    s.event(a, "Standup", at(1, 9), 15, [a, user])
    tue = TUESDAY.isoformat()
    prompt = "Please decline the Vendor demo invitation I got for tomorrow."
    gold = [C("list_events", start_date=tue, end_date=tue),
            C("respond_to_event", code=code, response="declined")]  # fmt: skip
    return Draft("decline", prompt, gold, True)


def cancel_and_notify(s: Story, k: int) -> Draft:
    user, a, b = s.user(), s.person(), s.person()
    code = s.event(user, "Design review", at(1, 15), 60, [a, b])
    tue = TUESDAY.isoformat()
    subject = "Design review cancelled"
    prompt = (
        "Cancel my Design review tomorrow and email everyone invited to it that it's cancelled, "
        f"with the subject '{subject}'."
    )
    gold = [
        C("list_events", start_date=tue, end_date=tue),
        C("cancel_event", code=code),
        C("send_email", to=[a.email, b.email], subject=subject,
          body="Tomorrow's design review is cancelled."),
    ]  # fmt: skip
    return Draft("cancel_and_notify", prompt, gold, True)


# ---- answers that need a computation or a rule -------------------------------------------------


def lookup_pipeline(s: Story, k: int) -> Draft:
    user, mate = s.user(), s.person()
    cid, company, _ = s.company()
    cid2, _, _ = s.company(1)
    s.deal(cid, user, "proposal", 40000.0)
    s.deal(cid2, user, "proposal", 35500.5, "Support plan")
    s.deal(cid, user, "qualified", 90000.0, "Expansion")
    s.deal(cid2, mate, "proposal", 12000.0)
    prompt = "What's the total amount of my deals that are currently in the proposal stage?"
    gold = [C("get_current_user"), C("list_deals", owner_email=user.email, stage="proposal")]
    return Draft("lookup_pipeline", prompt, gold, False, answer=("amount", "75500.50"))


def lookup_free_time(s: Story, k: int) -> Draft:
    user, a = s.user(), s.person()
    s.event(a, "Hiring sync", at(1, 9), 60, [a])
    s.event(user, "Focus time", at(1, 10), 60, [user])
    prompt = (
        f"When is the first time tomorrow that {a.name} and I are both free for a full hour? "
        "Give me the date and time; don't book anything yet."
    )
    gold = [
        C("search_employees", query=a.name),
        C("find_free_slot", attendee_emails=[a.email], day=TUESDAY.isoformat(),
          duration_minutes=60),
    ]  # fmt: skip
    answer = ("datetime", iso(at(1, 11)))
    return Draft("lookup_free_time", prompt, gold, False, answer=answer)


def refuse_won_without_amount(s: Story, k: int) -> Draft:
    user = s.user()
    cid, company, _ = s.company()
    code = s.deal(cid, user, "proposal", None)
    prompt = (
        f"{company} signed! Mark my deal {code} as won. I don't have the final number yet, "
        "so leave the amount for now."
    )
    no = (C("update_deal_stage", code=code, stage="won"), "amount_required")
    why = (
        f"Deal {code} has no amount, and a deal can only be won with one; "
        "tell me the final number and I will set it and mark the deal won."
    )
    gold = [C("get_deal", code=code)]
    return Draft(
        "refuse_won_without_amount",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="won_needs_amount",
        decline_message=why,
    )


def lookup_open_deals(s: Story, k: int) -> Draft:
    """A list answer: the codes of the user's open deals (won and lost ones are closed)."""
    user, mate = s.user(), s.person()
    cid, _, _ = s.company()
    cid2, _, _ = s.company(1)
    codes = [
        s.deal(cid, user, "lead", None),
        s.deal(cid2, user, "proposal", 18000.0, "Support plan"),
        s.deal(cid, user, "qualified", 42000.0, "Expansion"),
    ]
    s.deal(cid, user, "won", 9000.0, "Pilot")
    s.deal(cid2, user, "lost", 25000.0, "Training")
    s.deal(cid2, mate, "proposal", 12000.0)
    prompt = "Which of my deals are still open? Give me their codes."
    gold = [C("get_current_user"), C("list_deals", owner_email=user.email)]
    return Draft("lookup_open_deals", prompt, gold, False, answer=("id", codes))


def refuse_not_organizer(s: Story, k: int) -> Draft:
    user, a = s.user(), s.person()
    code = s.event(a, "Vendor demo", at(1, 15), 60, [a, user])
    tue = TUESDAY.isoformat()
    prompt = "Move the Vendor demo tomorrow to 16:00, same length; that suits me better."
    gold = [C("list_events", start_date=tue, end_date=tue)]
    no = (C("reschedule_event", code=code, new_start=iso(at(1, 16)), new_end=iso(at(1, 17))),
          "forbidden")  # fmt: skip
    why = (
        f"Only the organizer, {a.name}, can move the Vendor demo ({code}); "
        "you can ask them or decline the invitation."
    )
    return Draft(
        "refuse_not_organizer",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="not_organizer",
        decline_message=why,
    )


def refuse_closed_deal(s: Story, k: int) -> Draft:
    user = s.user()
    cid, company, _ = s.company()
    code = s.deal(cid, user, "lost", 30000.0)
    s.deal(cid, user, "qualified", 15000.0, "Support plan")
    prompt = (
        f"{company} came back after all: set the amount on my deal {code} to 32000.00 dollars, "
        "please."
    )
    no = (C("update_deal_amount", code=code, amount=32000.0), "deal_closed")
    why = f"Deal {code} is lost, and closed deals cannot change; I can open a new deal instead."
    gold = [C("get_deal", code=code)]
    return Draft(
        "refuse_closed_deal",
        prompt,
        gold,
        False,
        forbidden=no,
        decline="deal_closed",
        decline_message=why,
    )
