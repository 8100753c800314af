"""How two workplace states are compared: natural keys, references to rows made in a rollout."""

from app.sdk.compare_spec import CompareSpec, TableSpec

COMPARE = CompareSpec(
    tables={
        # Tools never change the directory, the CRM's companies/contacts or the projects.
        "employees": TableSpec(key=("email",), frozen=True, references={"manager_id": "employees"}),
        "assistant_profile": TableSpec(frozen=True, references={"employee_id": "employees"}),
        "companies": TableSpec(key=("name",), frozen=True),
        "contacts": TableSpec(key=("email",), frozen=True, references={"company_id": "companies"}),
        "projects": TableSpec(key=("key",), frozen=True, references={"owner_id": "employees"}),
        # Bodies are the agent's own words: compared are who, to whom, subject and thread.
        "messages": TableSpec(key=("message_id",), ignore=("body",), text=("subject",)),
        "mailbox_items": TableSpec(
            key=("employee_id", "message_id"),
            references={"employee_id": "employees", "message_id": "messages"},
        ),
        "events": TableSpec(
            key=("code",), text=("title", "location"), references={"organizer_id": "employees"}
        ),
        "event_attendees": TableSpec(
            key=("event_id", "employee_id"),
            references={"event_id": "events", "employee_id": "employees"},
        ),
        "deals": TableSpec(
            key=("code",),
            money=("amount",),
            references={"company_id": "companies", "owner_id": "employees"},
        ),
        "deal_stage_history": TableSpec(references={"deal_id": "deals", "changed_by": "employees"}),
        # The summary is free text: the kind, deal, contact and author are what must match.
        "activities": TableSpec(
            ignore=("summary",),
            references={"deal_id": "deals", "contact_id": "contacts", "employee_id": "employees"},
        ),
        # A new task's number depends on call order: tasks match by content, not code.
        "tasks": TableSpec(
            ignore=("code",),
            text=("title",),
            references={
                "project_id": "projects",
                "assignee_id": "employees",
                "created_by": "employees",
            },
        ),
    }
)
