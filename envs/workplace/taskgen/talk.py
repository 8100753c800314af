"""Conversational stories: the user is on the line (`Draft.user`, app/core/conversation.py).

The request leaves out what picks the record (which deal, which task, who takes it); the user
tells each fact only when asked, corrects a proposal of a look-alike, or changes their mind once.
The gold asks, looks up, proposes the exact change naming its ids ("... Shall I proceed?") and
acts only after the yes. Twins: the data may forbid the change; then the gold declines with the
rule's code and asks for no yes (app/taskgen/conversation.py).
"""

from __future__ import annotations

from dataclasses import replace

from app.sdk.taskgen import UserChange, UserFact, UserScript
from envs.workplace.taskgen.kit import C, Draft, Person, Story
from envs.workplace.taskgen.simple import namesake, refusal

YES = ("Yes, please go ahead.", "Yes, that's right. Go ahead.", "Yes, do it please.")
CUSTOMER_ASKS = [
    "which deal", "which customer", "which company", "which account", "what customer",
    "what company", "customer", "company", "deal code", "deal number",
]  # fmt: skip
AMOUNT_ASKS = ["amount", "how much", "value", "figure", "price", "number"]
PROJECT_ASKS = [
    "which project", "what project", "project", "which one", "which task", "task code",
    "task number", "task id",
]  # fmt: skip
TITLES = (
    "Update the runbook", "Write handover notes", "Check test coverage", "Clean up old branches",
    "Review alert thresholds", "Draft the release notes", "Rotate service keys",
)  # fmt: skip


def talk_deal_amount(s: Story, k: int) -> Draft:
    """Facts over turns: which customer's deal and (k=0) the new amount are told when asked.
    Twins: the deal is open (amount set) or closed (declined: deal_closed)."""
    user = s.user()
    cid, company, _ = s.company()
    ok = s.coin()
    stage = s.choose("qualified", "proposal") if ok else s.choose("won", "lost")
    code = s.deal(cid, user, stage, s.amount() if (k or not ok) else None)
    # Look-alikes: the user's open deals with other customers (the customer tells them apart).
    others = [
        s.deal(s.company(1)[0], user, s.choose("lead", "qualified", "proposal"), s.amount(), n)
        for n in ("Support plan", "Annual subscription")
    ]
    amount = s.amount()
    value = f"{amount:.2f}"
    facts = [
        UserFact(
            key="company",
            value=company,
            asked_by=CUSTOMER_ASKS,
            reply=f"It's my deal with {company}.",
        )
    ]
    if k == 0:
        prompt = s.choose(
            "Please update the amount on one of my deals: the customer agreed a new figure.",
            "Please change the contract value on one of my deals, the customer renegotiated.",
        )
        facts.append(
            UserFact(
                key="amount",
                value=value,
                asked_by=AMOUNT_ASKS,
                reply=f"The new amount is {value} dollars.",
            )
        )
        unclear = "I need the amount on one of my deals updated; the customer agreed a new figure."
        ask = "Which customer is the deal with, and what is the new amount?"
    else:
        prompt = (
            f"Please set the amount on one of my deals to {value} dollars; the customer "
            "confirmed it this morning."
        )
        unclear = f"I need one of my deals set to {value} dollars; the customer confirmed it."
        ask = "Which customer is that deal with?"
    script = UserScript(
        goal=f"Set the amount of your deal with {company} ({code}) to {value} dollars.",
        facts=facts,
        changes=[
            UserChange(
                tools=["update_deal_amount"],
                identifiers=[code],
                wrong=others,
                yes=s.choose(*YES),
                correction=f"No, not that one: it's my deal with {company}.",
            )
        ],
        unclear=unclear,
    )
    gold = [
        C("message_user", text=ask),
        C("list_deals", company=company),
        C("get_deal", code=code),
    ]
    change = C("update_deal_amount", code=code, amount=amount)
    if ok:
        propose = (
            f"Your deal {code} with {company} is in {stage}. I will set its amount to {value} "
            "dollars. Shall I proceed?"
        )
        gold += [C("message_user", text=propose), change]
        return Draft("talk_deal_amount", prompt, gold, True, user=script)
    why = f"Deal {code} with {company} is already {stage}; closed deals cannot change."
    draft = refusal("talk_deal_amount", prompt, gold, change, "deal_closed", "deal_closed", why)
    return replace(draft, user=script)


def talk_task_pick(s: Story, k: int) -> Draft:
    """Confirm or correct: two of the user's tasks share a title in two projects; the user says
    which project when asked, and corrects a proposal of the other one. Twins: the right task is
    open (set in progress) or done (declined: task_done)."""
    user = s.user("Engineering")
    keys = [s.project(user), s.project(user)]
    right_key, other_key = keys if s.rng.random() < 0.5 else keys[::-1]
    ok = s.coin()
    title = s.choose(*TITLES)
    right = s.task(right_key, title, user, "todo" if ok else "done")
    other = s.task(other_key, title, user, "todo")
    s.task(right_key, s.choose("Plan load tests", "Tune dashboards"), user, "in_progress")
    if k == 0:
        prompt = f"I've started on my '{title}' task; please set it to in progress."
    else:
        prompt = f"Please move my '{title}' task to in progress, I picked it up this morning."
    script = UserScript(
        goal=f"Set your task {right} ('{title}', project {right_key}) to in progress.",
        facts=[
            UserFact(
                key="project",
                value=right_key,
                asked_by=PROJECT_ASKS,
                reply=f"The one in the {right_key} project.",
            )
        ],
        changes=[
            UserChange(
                tools=["update_task_status"],
                identifiers=[right],
                wrong=[other],
                yes=s.choose(*YES),
                correction=f"No, not that one: the '{title}' task in the {right_key} project.",
            )
        ],
        unclear=f"I need my '{title}' task set to in progress, I've started on it.",
    )
    listed = ", ".join(f"{c} in {p}" for c, p in sorted([(right, right_key), (other, other_key)]))
    gold = [
        C("get_current_user"),
        C("list_tasks", assignee_email=user.email),
        C("message_user", text=f"You have two tasks titled '{title}': {listed}. Which project?"),
        C("list_tasks", project_key=right_key),
    ]
    change = C("update_task_status", code=right, status="in_progress")
    if ok:
        propose = f"I will set task {right} ({right_key}) to in progress. Shall I proceed?"
        gold += [C("message_user", text=propose), change]
        return Draft("talk_task_pick", prompt, gold, True, user=script)
    why = f"Task {right} is done and cannot be reopened; I can create a new task instead."
    draft = refusal("talk_task_pick", prompt, gold, change, "task_closed", "task_done", why)
    return replace(draft, user=script)


def talk_reassign_mind(s: Story, k: int) -> Draft:
    """Change of mind: the user asks to hand a task to one colleague, then, on the proposal, to
    another (who has a namesake in Sales). Twins: the second colleague is active (reassigned)
    or has left (declined: inactive_employee)."""
    user = s.user("Engineering")
    first = s.person("Engineering")
    ok = s.coin()
    final = s.person("Engineering", active=ok)
    twin: Person = namesake(s, final, "Sales")
    key = s.project(user)
    title = s.choose(*TITLES)
    code = s.task(key, title, user, s.choose("todo", "in_progress"))
    s.task(key, s.choose("Plan load tests", "Tune dashboards"), user, "todo")
    if k == 0:
        prompt = f"Please hand my task {code} over to {first.name}; I'm overloaded this week."
    else:
        prompt = f"I can't get to {code} this sprint. Please give it to {first.name}."
    later = s.choose("is away next week", "is already on two launches", "just went on leave")
    script = UserScript(
        goal=(
            f"Hand task {code} to {first.name} at first; when asked to confirm, change your mind: "
            f"{final.name} of Engineering ({final.email}) should take it."
        ),
        changes=[
            UserChange(
                tools=["reassign_task"],
                identifiers=[code, first.email],
                yes=s.choose(*YES),
                correction=f"No, I mean {first.name}.",
                change_of_mind=(
                    f"Hmm, wait: {first.first} {later}. Please give {code} to {final.name} in "
                    "Engineering instead."
                ),
            ),
            UserChange(
                tools=["reassign_task"],
                identifiers=[code, final.email],
                wrong=[first.email, twin.email],
                yes=s.choose(*YES),
                correction=f"No: {final.name} from Engineering, please.",
            ),
        ],
        unclear=f"I need task {code} handed over, I'm overloaded.",
    )
    gold = [
        C("list_tasks", project_key=key),
        C("search_employees", query=first.name),
        C(
            "message_user",
            text=f"I will reassign task {code} to {first.name} ({first.email}). Shall I proceed?",
        ),
        C("search_employees", query=final.name),
    ]
    change = C("reassign_task", code=code, assignee_email=final.email)
    if ok:
        propose = (
            f"Understood. I will reassign task {code} to {final.name} of Engineering "
            f"({final.email}) instead. Shall I proceed?"
        )
        gold += [C("message_user", text=propose), change]
        return Draft("talk_reassign_mind", prompt, gold, True, user=script)
    why = (
        f"{final.name} (Engineering) is no longer an active employee, so {code} cannot go to them."
    )
    draft = refusal(
        "talk_reassign_mind", prompt, gold, change, "inactive_employee", "inactive_employee", why
    )
    return replace(draft, user=script)
