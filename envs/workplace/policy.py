"""The assistant's policy: the system prompt every workplace task starts with (policy.md beside
this module, its decline codes listed by the framework), the reason codes a refusal names (one
per rule a request can break) and how an answer is submitted."""

from app.sdk.policy import policy_text

# One code per rule a request can break (decline_request's `reason` enum); the tools refuse
# each of them with their own error code (named in brackets in the comments).
DECLINE_REASONS: dict[str, str] = {
    # deal_closed
    "deal_closed": "won and lost deals are closed and cannot change",
    # stage_order
    "cannot_skip_stage": "deals move lead -> qualified -> proposal -> won one stage forward at "
    "a time, never back",
    # amount_required
    "won_needs_amount": "a deal can only be won once it has an amount",
    # not_owner (reassign_deal)
    "not_owner": "only a deal's owner can reassign it",
    # not_organizer (reschedule_event, cancel_event)
    "not_organizer": "only an event's organizer can reschedule or cancel it",
    # inactive_employee
    "inactive_employee": "tasks, deals, invitations and email go only to active employees",
    # external_recipient
    "external_recipient": "external email may only go to contacts recorded in the CRM",
    # conflict
    "calendar_conflict": "an event may not overlap an event of the user or an attendee unless "
    "the user says to book it anyway",
    # task_closed
    "task_done": "done tasks cannot be reopened or reassigned",
    # project_inactive
    "project_frozen": "tasks of on-hold and closed projects cannot change",
    # in_the_past
    "in_the_past": "events and due dates cannot be in the past",
    # event_too_long (create_event, reschedule_event)
    "event_too_long": "events last at most 8 hours",
    # wrong_contact
    "wrong_contact": "a contact named on an activity must work at the deal's company",
    # not_found / wrong_folder (mailbox tools)
    "not_own_mailbox": "only emails in the user's own mailbox can be archived or labelled",
}

ANSWER_INSTRUCTIONS = (
    "Submit the answer to the user's question, once, after the lookups that establish it: "
    "exactly one value as the tools give it (a person's full name, a deal stage, an amount such "
    "as 48500.00, a date-time such as 2026-03-17T11:00, a code such as D-1042 or ATLAS-12), or a "
    "list of such values when the question asks for several. Only the submitted value is "
    "scored; a second submission is refused."
)

POLICY = policy_text(__package__, DECLINE_REASONS, indent="  ", full_stop=True)
