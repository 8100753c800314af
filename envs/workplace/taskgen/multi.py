"""Longer stories (4-8 gold calls) over several entities: inbox triage, handovers, a customer
call followed up across CRM, mail and calendar, a project kickoff."""

from __future__ import annotations

from datetime import timedelta

from envs.workplace.taskgen.kit import NOW, TUESDAY, C, Draft, Story, at, iso


def triage(s: Story, k: int) -> Draft:
    user, mate = s.user("Engineering"), s.person("Operations")
    cid, company, contacts = s.company()
    c = contacts[0]
    p1 = s.email(mate.email, [user], "Parking garage closed Friday", "Use the north lot.", 20)
    p2 = s.email(mate.email, [user], "Parking garage reopening", "Open again Monday.", 2)
    ren = s.email(c.email, [user], "Renewal terms for 2027", "Here are our terms.", 5)
    s.email(mate.email, [user], "Fire drill Wednesday", "At 11:00.", 1)
    prompt = (
        f"Inbox cleanup: archive both parking garage emails from {mate.name}, and label the "
        f"renewal terms email from {c.name} ({company}) as 'renewals'."
    )
    gold = [
        C("search_emails", query="parking garage"),
        C("archive_email", message_id=p1),
        C("archive_email", message_id=p2),
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
    d1 = s.deal(cid, user, "qualified", 30000.0)
    d2 = s.deal(cid2, user, "lead", None)
    s.deal(cid, user, "won", 12000.0, "Pilot")  # closed: stays with the user
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
        t1 = s.task(key, "Prepare renewal deck", user, "in_progress")
        s.task(key, "Close Q1 books", user, "done")
        prompt += " Also give them my unfinished tasks in the project tracker."
        gold += [
            C("list_tasks", assignee_email=user.email),
            C("reassign_task", code=t1, assignee_email=heir.email),
        ]
    return Draft("handover", prompt, gold, True)


def customer_call(s: Story, k: int) -> Draft:
    """k=0: log + stage + amount; k=1: + email; k=2: + follow-up task; k=3: + review meeting."""
    user, mate = s.user(), s.person()
    cid, company, contacts = s.company()
    c = contacts[0]
    code = s.deal(cid, user, "qualified", None)
    amount = (64000.0, 58000.0, 71500.0, 99000.0)[k]
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
        C("update_deal_stage", code=code, stage="proposal"),
        C("update_deal_amount", code=code, amount=amount),
    ]  # fmt: skip
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
        s.event(mate, "Interview", at(1, 9), 90, [mate])
        title = f"{company} proposal review"
        prompt += (
            f" Finally, book a 60-minute '{title}' with {mate.email} tomorrow at the first time "
            "we're both free."
        )
        gold += [
            C(
                "find_free_slot",
                attendee_emails=[mate.email],
                day=TUESDAY.isoformat(),
                duration_minutes=60,
            ),
            C(
                "create_event",
                title=title,
                start=iso(at(1, 10, 30)),
                end=iso(at(1, 11, 30)),
                attendee_emails=[mate.email],
            ),
        ]
    return Draft("customer_call", prompt, gold, True)


def kickoff(s: Story, k: int) -> Draft:
    """k=0: meeting + two tasks; k=1: + email to both; k=2: + close the charter task."""
    user, a, b = s.user("Engineering"), s.person("Engineering"), s.person("Engineering")
    key = s.project(user)
    charter = s.task(key, "Write project charter", user, "in_progress")
    s.event(a, "Dentist", at(1, 9), 60, [a])
    s.event(b, "Code review", at(1, 10), 60, [b])
    due_a = (NOW + timedelta(days=7)).date().isoformat()
    due_b = (NOW + timedelta(days=4)).date().isoformat()
    title = f"{key} kickoff"
    prompt = (
        f"Let's kick off project {key}. Book a 60-minute '{title}' with {a.name} and {b.name} "
        "tomorrow at the first time all three of us are free. Then create two tasks in "
        f"{key}: 'Draft project plan' for {a.first}, high priority, due {due_a}; and 'Set up "
        f"tracking board' for {b.first}, due {due_b}."
    )
    emails = [a.email, b.email]
    gold = [
        C("search_employees", query=a.name),
        C("search_employees", query=b.name),
        C("find_free_slot", attendee_emails=emails, day=TUESDAY.isoformat(), duration_minutes=60),
        C("create_event", title=title, start=iso(at(1, 11)), end=iso(at(1, 12)),
          attendee_emails=emails),
        C("create_task", project_key=key, title="Draft project plan", assignee_email=a.email,
          priority="high", due_date=due_a),
        C("create_task", project_key=key, title="Set up tracking board", assignee_email=b.email,
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
