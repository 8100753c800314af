"""Longer stories (4-8 gold calls) over several entities: inbox triage, handovers, a customer
call followed up across CRM, mail and calendar, a project kickoff."""

from __future__ import annotations

from datetime import timedelta

from envs.workplace.taskgen.kit import NOW, C, Draft, Story, at, first_free, iso


def triage(s: Story, k: int) -> Draft:
    user, mate = s.user("Engineering"), s.person("Operations")
    cid, company, contacts = s.company()
    c = contacts[0]
    _, _, others = s.company(1)
    topic = s.choose("parking garage", "fire drill", "office move", "badge reader")
    p1 = s.email(mate.email, [user], f"{topic.capitalize()} closed Friday", "Heads up.", 20)
    p2 = s.email(mate.email, [user], f"{topic.capitalize()} update", "Open again Monday.", 2)
    ren = s.email(c.email, [user], f"Renewal terms for {s.choose(2027, 2028)}", "Our terms.", 5)
    # Look-alikes: the same topic from another sender, renewal terms from another customer.
    s.email(others[0].email, [user], f"Re: {topic}", "Is it affecting deliveries?", 1)
    s.email(others[1].email, [user], "Renewal terms question", "A quick question.", 3)
    prompt = (
        f"Inbox cleanup: archive both {topic} emails from {mate.name}, and label the "
        f"renewal terms email from {c.name} ({company}) as 'renewals'."
    )
    gold = [
        C("search_emails", query=topic),
        C("archive_email", message_id=p2),
        C("archive_email", message_id=p1),
        C("search_emails", query="renewal"),
        C("label_email", message_id=ren, add=["renewals"]),
    ]
    if k == 1:
        key = s.project(user)
        code = s.task(key, "Sort inbox rules", user, "in_progress")
        prompt += f" Then mark my task {code} as done."
        gold.append(C("update_task_status", code=code, status="done"))
    return Draft("triage", prompt, gold, True)


def handover(s: Story, k: int) -> Draft:
    user, heir = s.user(), s.person()
    cid, company, _ = s.company()
    cid2, company2, _ = s.company(1)
    d1 = s.deal(cid, user, s.choose("qualified", "proposal"), s.amount())
    d2 = s.deal(cid2, user, "lead", None)
    s.deal(cid, user, s.choose("won", "lost"), s.amount(), "Pilot")  # closed: stays
    s.deal(cid2, heir, "qualified", s.amount(), "Expansion")  # already theirs
    prompt = f"I'm going on parental leave tomorrow. Hand all my open deals over to {heir.name}."
    gold = [
        C("get_current_user"),
        C("search_employees", query=heir.name),
        C("list_deals", owner_email=user.email),
        C("reassign_deal", code=d1, new_owner_email=heir.email),
        C("reassign_deal", code=d2, new_owner_email=heir.email),
    ]
    if k == 1:
        key = s.project(user)
        t1 = s.task(key, "Prepare renewal deck", user, s.choose("todo", "in_progress"))
        s.task(key, "Close Q1 books", user, "done")
        prompt += " Also give them my unfinished tasks in the project tracker."
        gold += [
            C("list_tasks", assignee_email=user.email),
            C("reassign_task", code=t1, assignee_email=heir.email),
        ]
    return Draft("handover", prompt, gold, True)


def customer_call(s: Story, k: int) -> Draft:
    """k=0: log + stage + amount; k=1: + email; k=2: + follow-up task; k=3: + review meeting.
    Twins: the deal is qualified (moved to proposal) or still a lead (the move is declined,
    everything else is done)."""
    user, mate = s.user(), s.person()
    cid, company, contacts = s.company()
    c = contacts[s.rng.randrange(2)]
    ok = s.coin()
    code = s.deal(cid, user, "qualified" if ok else "lead", None)
    amount = s.amount()
    prompt = (
        f"I just had a call with {c.name} from {company}: they want a proposal for "
        f"{amount:.2f} dollars. Log the call on my deal with them (with {c.first} as the "
        "contact), move the deal to proposal and set the amount."
    )
    gold = [
        C("list_deals", company=company),
        C("search_customers", query=company),
        C("log_activity", code=code, kind="call", summary="Customer asked for a proposal.",
          contact_email=c.email),
    ]  # fmt: skip
    stage = C("update_deal_stage", code=code, stage="proposal")
    gold += [stage] if ok else []
    gold.append(C("update_deal_amount", code=code, amount=amount))
    if k >= 1:
        subject = f"Proposal for {company}"
        prompt += f" Then email {c.first} that the proposal is coming, subject '{subject}'."
        gold.append(
            C(
                "send_email",
                to=[c.email],
                subject=subject,
                body="Thanks for the call; our proposal is on its way.",
            )
        )
    if k == 2:
        key = s.project(user)
        due = (NOW + timedelta(days=4)).date().isoformat()
        title = f"Prepare proposal for {company}"
        prompt += f" And create a high-priority task '{title}' in {key}, due {due}, unassigned."
        gold.append(C("create_task", project_key=key, title=title, priority="high", due_date=due))
    if k == 3:
        day, when = s.day()
        minutes = s.choose(60, 90, 120)
        s.event(mate, "Interview", at(day, 9), minutes, [mate])
        start = first_free([(at(day, 9), minutes)], day, 60)
        title = f"{company} proposal review"
        prompt += (
            f" Finally, book a 60-minute '{title}' with {mate.email} {when} at the first time "
            "we're both free."
        )
        gold += [
            C(
                "find_free_slot",
                attendee_emails=[mate.email],
                day=start.date().isoformat(),
                duration_minutes=60,
            ),
            C(
                "create_event",
                title=title,
                start=iso(start),
                end=iso(start + timedelta(hours=1)),
                attendee_emails=[mate.email],
            ),
        ]
    if ok:
        return Draft("customer_call", prompt, gold, True)
    why = f"Deal {code} is a lead; it must be qualified before it can go to proposal."
    return Draft(
        "customer_call",
        prompt,
        gold,
        True,
        forbidden=(stage, "stage_order"),
        decline="cannot_skip_stage",
        decline_message=why,
    )


KICKOFF_TASKS = ("Draft project plan", "Set up tracking board", "Write risk register",
                 "Collect requirements", "Plan first sprint", "Map stakeholders",
                 "Draft test strategy", "Book design review")  # fmt: skip


def kickoff(s: Story, k: int) -> Draft:
    """k=0: meeting + two tasks; k=1: + email to both; k=2: + close the charter task."""
    user, a, b = s.user("Engineering"), s.person("Engineering"), s.person("Engineering")
    key = s.project(user)
    charter = s.task(key, "Write project charter", user, "in_progress")
    day, when = s.day()
    busy = []
    for who, title in ((a, "Dentist"), (b, "Code review"), (user, "Focus time")):
        start, minutes = at(day, s.rng.randint(9, 12), s.choose(0, 30)), s.choose(30, 60, 90)
        s.event(who, title, start, minutes, [who])
        busy.append((start, minutes))
    slot = first_free(busy, day, 60)
    due_a = (NOW + timedelta(days=s.rng.randint(5, 20))).date().isoformat()
    due_b = (NOW + timedelta(days=s.rng.randint(3, 12))).date().isoformat()
    title = f"{key} kickoff"
    first, second = s.rng.sample(KICKOFF_TASKS, 2)
    prompt = (
        f"Let's kick off project {key}. Book a 60-minute '{title}' with {a.name} and {b.name} "
        f"{when} at the first time all three of us are free. Then create two tasks in "
        f"{key}: '{first}' for {a.first}, high priority, due {due_a}; and '{second}' for "
        f"{b.first}, due {due_b}."
    )
    emails = [a.email, b.email]
    gold = [
        C("search_employees", query=a.name),
        C("search_employees", query=b.name),
        C("find_free_slot", attendee_emails=emails, day=slot.date().isoformat(),
          duration_minutes=60),
        C("create_event", title=title, start=iso(slot), end=iso(slot + timedelta(hours=1)),
          attendee_emails=emails),
        C("create_task", project_key=key, title=first, assignee_email=a.email,
          priority="high", due_date=due_a),
        C("create_task", project_key=key, title=second, assignee_email=b.email,
          due_date=due_b),
    ]  # fmt: skip
    if k >= 1:
        subject = f"Welcome to {key}"
        prompt += f" Email them both a welcome note with the subject '{subject}'."
        gold.append(
            C(
                "send_email",
                to=emails,
                subject=subject,
                body="Welcome aboard! Kickoff invite is in your calendar.",
            )
        )
    if k == 2:
        prompt += f" Oh, and the charter is finished: mark {charter} as done."
        gold.append(C("update_task_status", code=charter, status="done"))
    return Draft("kickoff", prompt, gold, True)
