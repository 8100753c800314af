"""Workplace's tools over the lean baseline's dicts (bench/lean_db.py): all 26 tools (the
workplace tasks' gold solutions call every one), each reading and writing the rows StateGym's tool
does (envs/workplace/: messages with their content-derived message_id and one mailbox item per
holder, labels and folders, events with their derived codes and attendees' responses, deals and
their stage history, activities, project tasks), with the main checks: the acting user
(assistant_profile), active employees, the recipient rule (internal = active employee, external =
CRM contact), duplicate mail and events, the mailbox's ownership, event times (order, 8 hours,
not in the past) and conflicts, the organizer rule, the deal pipeline order, won-needs-amount,
closed deals, deal ownership, the contact's company, inactive projects, done tasks.

Left out: argument schemas (a missing or mistyped argument is a KeyError/TypeError/ValueError,
reported as a tool error; no length limits on titles or summaries), the label syntax check, hints
and error codes, the CHECK constraints StateGym's database enforces, and LIKE's wildcards (a
query is a plain case-insensitive substring). The lean verify compares rows by id (bench/lean_db.py
`same_state`), not StateGym's natural keys, and includes free-text columns StateGym ignores
(message bodies, activity summaries) or compares loosely (titles): an agent that words a body
differently, or makes the same calls in another order, scores 0 here while StateGym may score 1;
the gold rollout, replayed verbatim, is scored alike.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from bench.lean_db import Db, Row, ToolFailed, cents
from envs.workplace.ops import addresses, is_internal, new_event_code, new_message_id

TABLES = (
    "employees assistant_profile companies contacts projects messages mailbox_items events "
    "event_attendees deals deal_stage_history activities tasks"
).split()
COMPARED = tuple(TABLES)
DEAL_STAGES = ("lead", "qualified", "proposal", "won", "lost")
OPEN_STAGES = ("lead", "qualified", "proposal")
MAX_LENGTH = timedelta(hours=8)
SLOT_STEP = timedelta(minutes=30)


def _dt(value: Any) -> datetime:
    """A stored datetime: the template's '2026-03-17 14:00:00.000000' or a seed's ISO text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def _iso(value: Any) -> str:
    return _dt(value).isoformat()


def _arg_time(value: str) -> datetime:
    """An argument's datetime as StateGym's validator leaves it: naive UTC, whole minutes."""
    at = datetime.fromisoformat(value)
    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return at.replace(second=0, microsecond=0)


def _me(db: Db) -> Row:
    profile = db.get("assistant_profile", 1)
    user = db.get("employees", profile["employee_id"]) if profile else None
    if user is None:
        raise ToolFailed("No user is configured for this assistant.")
    return user


def _employee(db: Db, email: str) -> Row:
    e = db.first("employees", "email", str(email).strip().lower())
    if e is None:
        raise ToolFailed(f"No employee has the email {email!r}.")
    return e


def _active(e: Row, doing: str) -> None:
    if not e["active"]:
        raise ToolFailed(f"{e['email']} is no longer an active employee; cannot {doing}.")


def _name(e: Row) -> str:
    return f"{e['first_name']} {e['last_name']}"


def _person(e: Row) -> dict[str, Any]:
    return {
        "name": _name(e),
        "email": e["email"],
        "department": e["department"],
        "title": e["title"],
        "active": bool(e["active"]),
    }


def _split(text: str | None) -> list[str]:
    return text.split(",") if text else []


# --- people and tasks ----------------------------------------------------------------------------
def get_current_user(db: Db, a: dict[str, Any], now: str) -> Any:
    return {**_person(_me(db)), "now": _iso(now)}


def search_employees(db: Db, a: dict[str, Any], now: str) -> Any:
    query, dept = (a.get("query") or "").lower(), (a.get("department") or "").lower()
    found = [
        e
        for e in db.scan("employees")
        if (not query or query in _name(e).lower() or query in e["email"].lower())
        and (not dept or e["department"].lower() == dept)
    ]
    found.sort(key=lambda e: (e["last_name"], e["first_name"], e["id"]))
    return {"employees": [_person(e) for e in found[:25]]}


def _project(db: Db, key: str) -> Row:
    p = db.first("projects", "key", str(key).strip().upper())
    if p is None:
        raise ToolFailed(f"No project has key {key!r}.")
    return p


def _writable(db: Db, project_id: int) -> None:
    p = db.get("projects", project_id)
    if p is None or p["status"] != "active":
        raise ToolFailed("The task's project is not active; its tasks cannot be changed.")


def _task_row(db: Db, code: str) -> Row:
    t = db.first("tasks", "code", str(code).strip().upper())
    if t is None:
        raise ToolFailed(f"No task has code {code!r}.")
    return t


def _task(db: Db, t: Row) -> dict[str, Any]:
    project = db.get("projects", t["project_id"])
    assignee = db.get("employees", t["assignee_id"]) if t["assignee_id"] else None
    return {
        "code": t["code"],
        "project": project and project["key"],
        "title": t["title"],
        "assignee": assignee and assignee["email"],
        "status": t["status"],
        "priority": t["priority"],
        "due_date": str(t["due_date"])[:10] if t["due_date"] else None,
    }


def list_tasks(db: Db, a: dict[str, Any], now: str) -> Any:
    tasks = db.scan("tasks")
    if a.get("project_key"):
        pid = _project(db, a["project_key"])["id"]
        tasks = [t for t in tasks if t["project_id"] == pid]
    if a.get("assignee_email"):
        eid = _employee(db, a["assignee_email"])["id"]
        tasks = [t for t in tasks if t["assignee_id"] == eid]
    if a.get("status"):
        tasks = [t for t in tasks if t["status"] == a["status"]]
    return {"tasks": [_task(db, t) for t in tasks[:50]]}


def create_task(db: Db, a: dict[str, Any], now: str) -> Any:
    project = _project(db, a["project_key"])
    _writable(db, project["id"])
    assignee = None
    if a.get("assignee_email"):
        assignee = _employee(db, a["assignee_email"])
        _active(assignee, "be assigned tasks")
    due = date.fromisoformat(a["due_date"]) if a.get("due_date") else None
    if due and due < _dt(now).date():
        raise ToolFailed(f"Due date {due} is in the past.")
    prefix = f"{project['key']}-"
    numbers = [t["code"][len(prefix) :] for t in db.where("tasks", "project_id", project["id"])]
    number = max((int(n) for n in numbers if n.isdigit()), default=0)
    t = db.insert(
        "tasks",
        {
            "code": f"{prefix}{number + 1}",
            "project_id": project["id"],
            "title": a["title"],
            "assignee_id": assignee["id"] if assignee else None,
            "status": "todo",
            "priority": a.get("priority") or "medium",
            "due_date": due.isoformat() if due else None,
            "created_by": _me(db)["id"],
        },
    )
    return _task(db, t)


def update_task_status(db: Db, a: dict[str, Any], now: str) -> Any:
    t = _task_row(db, a["code"])
    _writable(db, t["project_id"])
    if t["status"] == "done" or t["status"] == a["status"]:
        raise ToolFailed(f"Task {t['code']} is {t['status']}.")
    if a["status"] not in ("todo", "in_progress", "done"):
        raise ToolFailed(f"Unknown status {a['status']!r}.")
    t = db.mut("tasks", t["id"])
    t["status"] = a["status"]
    return _task(db, t)


def reassign_task(db: Db, a: dict[str, Any], now: str) -> Any:
    t = _task_row(db, a["code"])
    _writable(db, t["project_id"])
    if t["status"] == "done":
        raise ToolFailed(f"Task {t['code']} is done; it cannot be reassigned.")
    assignee = _employee(db, a["assignee_email"])
    _active(assignee, "be assigned tasks")
    if t["assignee_id"] == assignee["id"]:
        raise ToolFailed(f"Task {t['code']} is already assigned to {assignee['email']}.")
    t = db.mut("tasks", t["id"])
    t["assignee_id"] = assignee["id"]
    return _task(db, t)


# --- mail ----------------------------------------------------------------------------------------
def _summary(item: Row, msg: Row) -> dict[str, Any]:
    return {
        "message_id": msg["message_id"],
        "from": msg["sender"],
        "to": _split(msg["to_addresses"]),
        "cc": _split(msg["cc_addresses"]),
        "subject": msg["subject"],
        "sent_at": _iso(msg["sent_at"]),
        "folder": item["folder"],
        "is_read": bool(item["is_read"]),
        "labels": _split(item["labels"]),
    }


def _mailbox(db: Db, user: Row) -> list[tuple[Row, Row]]:
    out = []
    for item in db.where("mailbox_items", "employee_id", user["id"]):
        msg = db.get("messages", item["message_id"])
        assert msg is not None
        out.append((item, msg))
    return out


def search_emails(db: Db, a: dict[str, Any], now: str) -> Any:
    query, sender = (a.get("query") or "").lower(), (a.get("from_address") or "").lower()
    label = (a.get("label") or "").lower()
    rows = [
        (item, msg)
        for item, msg in _mailbox(db, _me(db))
        if (not query or query in msg["subject"].lower() or query in msg["body"].lower())
        and (not sender or msg["sender"].lower() == sender)
        and (not a.get("folder") or item["folder"] == a["folder"])
        and (not a.get("unread_only") or not item["is_read"])
        and (not label or label in _split(item["labels"]))
    ]
    rows.sort(key=lambda r: (_dt(r[1]["sent_at"]), r[1]["id"]), reverse=True)
    limit = a.get("limit") or 20
    return {"total": len(rows), "emails": [_summary(i, m) for i, m in rows[:limit]]}


def _my_item(db: Db, user: Row, message_id: str) -> tuple[Row, Row]:
    msg = db.first("messages", "message_id", str(message_id).strip())
    if msg is not None:
        for item in db.where("mailbox_items", "message_id", msg["id"]):
            if item["employee_id"] == user["id"]:
                return item, msg
    raise ToolFailed(f"No message {message_id!r} is in your mailbox.")


def read_email(db: Db, a: dict[str, Any], now: str) -> Any:
    item, msg = _my_item(db, _me(db), a["message_id"])
    return {**_summary(item, msg), "body": msg["body"], "in_reply_to": msg["in_reply_to"]}


def _deliver(
    db: Db,
    now: str,
    to: list[str],
    cc: list[str],
    subject: str,
    body: str,
    in_reply_to: str | None = None,
) -> dict[str, Any]:
    user = _me(db)
    to = addresses(to)
    cc = [x for x in addresses(cc) if x not in to]
    if not to:
        raise ToolFailed("Name at least one recipient in `to`.")
    recipients = []
    for address in [*to, *cc]:
        if is_internal(address):
            employee = _employee(db, address)
            _active(employee, "email them")
            recipients.append(employee)
        elif db.first("contacts", "email", address) is None:
            raise ToolFailed(f"{address} is an external address that is not a CRM contact.")
    at = _dt(now)
    mid = new_message_id(user["email"], to, cc, subject, at)
    if db.first("messages", "message_id", mid) is not None:
        raise ToolFailed("An identical email (same recipients and subject) was just sent.")
    msg = db.insert(
        "messages",
        {
            "message_id": mid,
            "sender": user["email"],
            "to_addresses": ",".join(to),
            "cc_addresses": ",".join(cc),
            "subject": subject,
            "body": body,
            "sent_at": at.isoformat(),
            "in_reply_to": in_reply_to,
        },
    )
    db.insert(
        "mailbox_items",
        {
            "employee_id": user["id"],
            "message_id": msg["id"],
            "folder": "sent",
            "is_read": True,
            "labels": "",
        },
    )
    for employee in {e["id"]: e for e in recipients if e["id"] != user["id"]}.values():
        db.insert(
            "mailbox_items",
            {
                "employee_id": employee["id"],
                "message_id": msg["id"],
                "folder": "inbox",
                "is_read": False,
                "labels": "",
            },
        )
    return {"message_id": mid, "to": to, "cc": cc, "subject": subject, "sent_at": at.isoformat()}


def send_email(db: Db, a: dict[str, Any], now: str) -> Any:
    if not a["subject"] or not a["body"]:
        raise ToolFailed("An email needs a subject and a body.")
    return _deliver(db, now, a["to"], a.get("cc") or [], a["subject"], a["body"])


def _prefixed(prefix: str, subject: str) -> str:
    return subject if subject.lower().startswith(prefix.lower()) else f"{prefix} {subject}"


def reply_email(db: Db, a: dict[str, Any], now: str) -> Any:
    user = _me(db)
    _item, original = _my_item(db, user, a["message_id"])
    to, cc = [original["sender"]], []
    if a.get("reply_all"):
        others = _split(original["to_addresses"]) + _split(original["cc_addresses"])
        cc = [x for x in others if x and x != user["email"]]
    if to == [user["email"]]:
        to = _split(original["to_addresses"])
    subject = _prefixed("Re:", original["subject"])
    return _deliver(db, now, to, cc, subject, a["body"], original["message_id"])


def forward_email(db: Db, a: dict[str, Any], now: str) -> Any:
    _item, original = _my_item(db, _me(db), a["message_id"])
    body = (
        f"{a.get('note') or ''}\n\n---------- Forwarded message ----------\n"
        f"From: {original['sender']}\nSubject: {original['subject']}\n\n{original['body']}"
    )
    return _deliver(db, now, a["to"], [], _prefixed("Fwd:", original["subject"]), body)


def archive_email(db: Db, a: dict[str, Any], now: str) -> Any:
    item, _msg = _my_item(db, _me(db), a["message_id"])
    if item["folder"] != "inbox":
        raise ToolFailed(f"Email {a['message_id']} is in {item['folder']}, not in the inbox.")
    item = db.mut("mailbox_items", item["id"])
    item["folder"], item["is_read"] = "archive", True
    return {"message_id": a["message_id"], "folder": "archive"}


def label_email(db: Db, a: dict[str, Any], now: str) -> Any:
    item, _msg = _my_item(db, _me(db), a["message_id"])
    add = [x.strip().lower() for x in a.get("add") or []]
    remove = {x.strip().lower() for x in a.get("remove") or []}
    if not add and not remove:
        raise ToolFailed("Name at least one label to add or remove.")
    current = set(_split(item["labels"]))
    if remove - current:
        raise ToolFailed(f"Email {a['message_id']} has no label(s) {sorted(remove - current)}.")
    labels = sorted((current | set(add)) - remove)
    db.mut("mailbox_items", item["id"])["labels"] = ",".join(labels)
    return {"message_id": a["message_id"], "labels": labels}


# --- calendar ------------------------------------------------------------------------------------
def _event_view(db: Db, ev: Row) -> dict[str, Any]:
    organizer = db.get("employees", ev["organizer_id"])
    attendees = []
    for x in db.where("event_attendees", "event_id", ev["id"]):
        e = db.get("employees", x["employee_id"])
        attendees.append({"email": e and e["email"], "response": x["response"]})
    return {
        "code": ev["code"],
        "title": ev["title"],
        "organizer": organizer and organizer["email"],
        "start": _iso(ev["start_at"]),
        "end": _iso(ev["end_at"]),
        "location": ev["location"],
        "status": ev["status"],
        "attendees": attendees,
    }


def _busy(
    db: Db, employee_ids: list[int], start: datetime, end: datetime, skip: int = 0
) -> list[tuple[Row, Row]]:
    """Confirmed events of these employees (not declined by them) overlapping [start, end)."""
    out = []
    for eid in employee_ids:
        for x in db.where("event_attendees", "employee_id", eid):
            ev = db.get("events", x["event_id"])
            if (
                ev is not None
                and x["response"] != "declined"
                and ev["status"] == "confirmed"
                and ev["id"] != skip
                and _dt(ev["start_at"]) < end
                and _dt(ev["end_at"]) > start
            ):
                out.append((db.get("employees", eid), ev))
    out.sort(key=lambda p: (_dt(p[1]["start_at"]), p[1]["id"]))
    return out  # type: ignore[return-value]


def list_events(db: Db, a: dict[str, Any], now: str) -> Any:
    who = _employee(db, a["employee_email"]) if a.get("employee_email") else _me(db)
    start = date.fromisoformat(a["start_date"])
    end = date.fromisoformat(a["end_date"]) if a.get("end_date") else start + timedelta(days=7)
    first, before = datetime.combine(start, time()), datetime.combine(end, time()) + timedelta(1)
    events = []
    for x in db.where("event_attendees", "employee_id", who["id"]):
        ev = db.get("events", x["event_id"])
        if (
            ev is not None
            and _dt(ev["start_at"]) < before
            and _dt(ev["end_at"]) > first
            and (a.get("include_cancelled") or ev["status"] == "confirmed")
        ):
            events.append(ev)
    events.sort(key=lambda ev: (_dt(ev["start_at"]), ev["id"]))
    return {"calendar_of": who["email"], "events": [_event_view(db, ev) for ev in events]}


def _people(db: Db, emails: list[str]) -> list[Row]:
    user = _me(db)
    people = {user["id"]: user}
    for address in emails:
        e = _employee(db, address)
        _active(e, "invite them")
        people[e["id"]] = e
    return list(people.values())


def _check_times(start: datetime, end: datetime, now: str) -> None:
    if end <= start or end - start > MAX_LENGTH:
        raise ToolFailed("An event must end after it starts and last at most 8 hours.")
    if start < _dt(now):
        raise ToolFailed(f"{start.isoformat()} is in the past.")


def _refuse_conflicts(
    db: Db, ids: list[int], start: datetime, end: datetime, skip: int = 0
) -> None:
    clashes = _busy(db, ids, start, end, skip)
    if clashes:
        listed = "; ".join(f"{_name(e)} has '{ev['title']}'" for e, ev in clashes)
        raise ToolFailed(f"Scheduling conflict: {listed}.")


def find_free_slot(db: Db, a: dict[str, Any], now: str) -> Any:
    people = _people(db, a["attendee_emails"])
    minutes = int(a["duration_minutes"])
    if not 15 <= minutes <= 480:
        raise ToolFailed("duration_minutes must be between 15 and 480.")
    length, day = timedelta(minutes=minutes), date.fromisoformat(a["day"])
    earliest = time.fromisoformat(a["earliest"]) if a.get("earliest") else time(9, 0)
    latest = time.fromisoformat(a["latest_end"]) if a.get("latest_end") else time(17, 0)
    start, stop = datetime.combine(day, earliest), datetime.combine(day, latest)
    spans = [
        (_dt(ev["start_at"]), _dt(ev["end_at"]))
        for _e, ev in _busy(db, [p["id"] for p in people], start, stop)
    ]
    at = _dt(now)
    while start + length <= stop:
        end = start + length
        if start >= at and not any(s < end and e > start for s, e in spans):
            return {
                "start": start.isoformat(),
                "end": end.isoformat(),
                "attendees": [p["email"] for p in people],
            }
        start += SLOT_STEP
    raise ToolFailed(f"No free {minutes}-minute slot for everyone on {day.isoformat()}.")


def create_event(db: Db, a: dict[str, Any], now: str) -> Any:
    start, end = _arg_time(a["start"]), _arg_time(a["end"])
    if not a["title"]:
        raise ToolFailed("An event needs a title.")
    _check_times(start, end, now)
    people = _people(db, a["attendee_emails"])
    if not a.get("allow_conflicts"):
        _refuse_conflicts(db, [p["id"] for p in people], start, end)
    user = people[0]
    code = new_event_code(user["email"], a["title"], start)
    if db.first("events", "code", code) is not None:
        raise ToolFailed("This event already exists (same title and start).")
    ev = db.insert(
        "events",
        {
            "code": code,
            "title": a["title"],
            "organizer_id": user["id"],
            "start_at": start.isoformat(),
            "end_at": end.isoformat(),
            "location": a.get("location") or "",
            "status": "confirmed",
        },
    )
    for p in people:
        response = "accepted" if p["id"] == user["id"] else "needs_action"
        db.insert(
            "event_attendees", {"event_id": ev["id"], "employee_id": p["id"], "response": response}
        )
    return _event_view(db, ev)


def _organized(db: Db, code: str) -> Row:
    ev = db.first("events", "code", str(code).strip().upper())
    if ev is None:
        raise ToolFailed(f"No event has code {code!r}.")
    if ev["organizer_id"] != _me(db)["id"]:
        raise ToolFailed(f"Only the organizer can change event {ev['code']}.")
    if ev["status"] != "confirmed":
        raise ToolFailed(f"Event {ev['code']} is already cancelled.")
    return db.mut("events", ev["id"])


def reschedule_event(db: Db, a: dict[str, Any], now: str) -> Any:
    ev = _organized(db, a["code"])
    start, end = _arg_time(a["new_start"]), _arg_time(a["new_end"])
    _check_times(start, end, now)
    invites = db.where("event_attendees", "event_id", ev["id"])
    if not a.get("allow_conflicts"):
        ids = [x["employee_id"] for x in invites if x["response"] != "declined"]
        _refuse_conflicts(db, ids, start, end, skip=ev["id"])
    ev["start_at"], ev["end_at"] = start.isoformat(), end.isoformat()
    for x in invites:
        if x["employee_id"] != ev["organizer_id"]:
            db.mut("event_attendees", x["id"])["response"] = "needs_action"
    return _event_view(db, ev)


def cancel_event(db: Db, a: dict[str, Any], now: str) -> Any:
    ev = _organized(db, a["code"])
    ev["status"] = "cancelled"
    return {"code": ev["code"], "status": "cancelled"}


def respond_to_event(db: Db, a: dict[str, Any], now: str) -> Any:
    if a["response"] not in ("accepted", "tentative", "declined"):
        raise ToolFailed(f"Unknown response {a['response']!r}.")
    ev = db.first("events", "code", str(a["code"]).strip().upper())
    if ev is None:
        raise ToolFailed(f"No event has code {a['code']!r}.")
    user = _me(db)
    invite = next(
        (
            x
            for x in db.where("event_attendees", "event_id", ev["id"])
            if x["employee_id"] == user["id"]
        ),
        None,
    )
    if invite is None or ev["organizer_id"] == user["id"]:
        raise ToolFailed(f"{user['email']} is not an invitee of event {ev['code']}.")
    if ev["status"] != "confirmed":
        raise ToolFailed(f"Event {ev['code']} is cancelled.")
    db.mut("event_attendees", invite["id"])["response"] = a["response"]
    return {"code": ev["code"], "response": a["response"]}


# --- CRM -----------------------------------------------------------------------------------------
def _contact(c: Row) -> dict[str, Any]:
    return {"name": _name(c), "email": c["email"], "title": c["title"], "phone": c["phone"]}


def search_customers(db: Db, a: dict[str, Any], now: str) -> Any:
    q = str(a["query"]).lower()
    if len(q) < 2:
        raise ToolFailed("The query needs at least 2 characters.")
    by_contact = {
        c["company_id"]
        for c in db.scan("contacts")
        if q in _name(c).lower() or q in c["email"].lower()
    }
    companies = sorted(
        (
            c
            for c in db.scan("companies")
            if q in c["name"].lower() or q in c["domain"].lower() or c["id"] in by_contact
        ),
        key=lambda c: c["name"],
    )[:10]
    out = [
        {
            **{k: c[k] for k in ("industry", "domain")},
            "company": c["name"],
            "contacts": [_contact(x) for x in db.where("contacts", "company_id", c["id"])],
        }
        for c in companies
    ]
    return {"companies": out}


def _deal_row(db: Db, code: str) -> Row:
    d = db.first("deals", "code", str(code).strip().upper())
    if d is None:
        raise ToolFailed(f"No deal has code {code!r}.")
    return d


def _deal(db: Db, d: Row, full: bool = False) -> dict[str, Any]:
    company, owner = db.get("companies", d["company_id"]), db.get("employees", d["owner_id"])
    view = {
        "code": d["code"],
        "name": d["name"],
        "company": company and company["name"],
        "owner": owner and owner["email"],
        "stage": d["stage"],
        "amount": None if d["amount"] is None else f"{d['amount']:,.2f}",
        "close_date": str(d["close_date"])[:10] if d["close_date"] else None,
    }
    if full:
        history = sorted(
            db.where("deal_stage_history", "deal_id", d["id"]),
            key=lambda h: (_dt(h["changed_at"]), h["id"]),
        )
        view["stage_history"] = [
            {"from": h["from_stage"], "to": h["to_stage"], "at": _iso(h["changed_at"])}
            for h in history
        ]
        acts = sorted(
            db.where("activities", "deal_id", d["id"]),
            key=lambda x: _dt(x["occurred_at"]),
            reverse=True,
        )
        view["activities"] = [
            {"kind": x["kind"], "summary": x["summary"], "at": _iso(x["occurred_at"])} for x in acts
        ]
    return view


def list_deals(db: Db, a: dict[str, Any], now: str) -> Any:
    deals = db.scan("deals")
    if a.get("company"):
        wanted = a["company"].lower()
        ids = {c["id"] for c in db.scan("companies") if c["name"].lower() == wanted}
        deals = [d for d in deals if d["company_id"] in ids]
    if a.get("owner_email"):
        owner = _employee(db, a["owner_email"])["id"]
        deals = [d for d in deals if d["owner_id"] == owner]
    if a.get("stage"):
        deals = [d for d in deals if d["stage"] == a["stage"]]
    deals.sort(key=lambda d: d["code"])
    return {"deals": [_deal(db, d) for d in deals[:50]]}


def get_deal(db: Db, a: dict[str, Any], now: str) -> Any:
    return _deal(db, _deal_row(db, a["code"]), full=True)


def _open_deal(db: Db, code: str) -> Row:
    d = _deal_row(db, code)
    if d["stage"] not in OPEN_STAGES:
        raise ToolFailed(f"Deal {d['code']} is closed ({d['stage']}).")
    return db.mut("deals", d["id"])


def update_deal_stage(db: Db, a: dict[str, Any], now: str) -> Any:
    d, stage = _open_deal(db, a["code"]), a["stage"]
    if stage not in DEAL_STAGES:
        raise ToolFailed(f"Unknown stage {stage!r}.")
    if stage != "lost" and DEAL_STAGES.index(stage) != DEAL_STAGES.index(d["stage"]) + 1:
        raise ToolFailed(f"Deal {d['code']} is in {d['stage']}; it cannot move to {stage}.")
    if stage == "won" and not d["amount"]:
        raise ToolFailed(f"Deal {d['code']} has no amount; a deal can only be won with one.")
    db.insert(
        "deal_stage_history",
        {
            "deal_id": d["id"],
            "from_stage": d["stage"],
            "to_stage": stage,
            "changed_by": _me(db)["id"],
            "changed_at": _iso(now),
        },
    )
    d["stage"] = stage
    return _deal(db, d)


def update_deal_amount(db: Db, a: dict[str, Any], now: str) -> Any:
    amount = float(a["amount"])
    if not 0 < amount <= 100_000_000:
        raise ToolFailed(f"Amount {amount} is out of range.")
    d = _open_deal(db, a["code"])
    d["amount"] = cents(amount)
    return _deal(db, d)


def reassign_deal(db: Db, a: dict[str, Any], now: str) -> Any:
    d = _deal_row(db, a["code"])
    if d["owner_id"] != _me(db)["id"]:
        raise ToolFailed(f"Only the owner of deal {d['code']} can reassign it.")
    d = _open_deal(db, a["code"])
    owner = _employee(db, a["new_owner_email"])
    _active(owner, "own deals")
    d["owner_id"] = owner["id"]
    return _deal(db, d)


def log_activity(db: Db, a: dict[str, Any], now: str) -> Any:
    if a["kind"] not in ("call", "meeting", "email", "note") or not a["summary"]:
        raise ToolFailed("An activity needs a known kind and a summary.")
    d = _deal_row(db, a["code"])
    contact_id = None
    if a.get("contact_email"):
        contact = db.first("contacts", "email", a["contact_email"].lower())
        if contact is None or contact["company_id"] != d["company_id"]:
            raise ToolFailed(f"{a['contact_email']} is not a contact of the deal's company.")
        contact_id = contact["id"]
    db.insert(
        "activities",
        {
            "deal_id": d["id"],
            "contact_id": contact_id,
            "employee_id": _me(db)["id"],
            "kind": a["kind"],
            "summary": a["summary"],
            "occurred_at": _iso(now),
        },
    )
    return {"deal": d["code"], "kind": a["kind"], "logged_at": _iso(now)}


TOOLS = {
    f.__name__: f
    for f in (
        get_current_user,
        search_employees,
        search_emails,
        read_email,
        send_email,
        reply_email,
        forward_email,
        archive_email,
        label_email,
        list_events,
        find_free_slot,
        create_event,
        reschedule_event,
        cancel_event,
        respond_to_event,
        search_customers,
        list_deals,
        get_deal,
        update_deal_stage,
        update_deal_amount,
        reassign_deal,
        log_activity,
        list_tasks,
        create_task,
        update_task_status,
        reassign_task,
    )
}
