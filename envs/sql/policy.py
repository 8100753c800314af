"""The data desk's policy: the system prompt every sql task starts with (policy.md beside this
module, its decline codes listed by the framework), the reason codes a refusal names (one per
company rule a request can break) and how an answer is submitted."""

from app.sdk.policy import policy_text

# One code per company rule a request can break (decline_request's `reason` enum).
DECLINE_REASONS: dict[str, str] = {
    "invoice_already_paid": "a paid invoice is locked: it and its timesheets cannot be changed, "
    "voided or deleted",
    "cannot_delete_employee": "employees are never deleted (but a hire who has not started yet); "
    "someone who leaves is offboarded",
    "cannot_delete_invoice": "invoices are never deleted (but a draft that bills no timesheets); "
    "a draft or sent invoice may be voided",
    "salary_rewrite_forbidden": "salary history is append-only: salary rows in effect are never "
    "changed or deleted",
    "raise_over_limit": "a raise of more than 10% over the current salary needs the CFO's approval",
    "timesheet_not_submitted": "only submitted timesheets can be approved or rejected",
    "cannot_archive_invoiced": "invoiced timesheets are never archived",
}

ANSWER_INSTRUCTIONS = (
    "Submit the answer to the colleague's question, once, after the queries that establish it: "
    "exactly one value as the database gives it (a person's full name, a customer name, a count "
    "such as 7, an amount such as 12480.00, a code such as E90190 or INV-2026-9120), or a list "
    "of such values when the question asks for several. Only the submitted value is scored; a "
    "second submission is refused."
)

POLICY = policy_text(__package__, DECLINE_REASONS, indent="  ", full_stop=True)
