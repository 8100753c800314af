"""The reservation desk's policy: the system prompt every airline task starts with (policy.md
beside this module, its decline codes listed by the framework), and the reason codes a refusal
names (one per rule of the policy a request can break)."""

from app.sdk.policy import policy_text

# decline_request's `reason` enum: code -> the rule, one line (goes into the tool description).
DECLINE_REASONS: dict[str, str] = {
    "not_identified": "the member cannot be identified (no user id, or no member matches)",
    "other_member": "the reservation belongs to another member",
    "already_departed": "a flight of the reservation has already departed; nothing can change",
    "already_cancelled": "the reservation is already cancelled",
    "flight_not_bookable": "the flight is cancelled or has departed and cannot be booked",
    "cabin_full": "not enough seats are left in that fare class on a flight",
    "basic_economy_no_change": "the flights of a basic economy reservation cannot be changed",
    "itinerary_not_allowed": "new flights must keep the origin, destination, trip type and fare",
    "passenger_rules": "a reservation has 1 to 5 passengers; none can be added or removed",
    "baggage_rules": "bags can be added, never removed, and at most 5 per passenger",
    "seat_not_allowed": "basic economy seats cannot be chosen; a seat must be free and in the "
    "fare class's cabin",
    "payment_not_allowed": "the payment is not one the rules accept (not the member's own, more "
    "than one certificate, or a gift card without enough balance)",
    "cancellation_not_allowed": "the reservation is older than 24 hours, no flight was cancelled "
    "by the airline, the fare is not business and it has no insurance",
    "not_eligible_compensation": "compensation needs an airline-cancelled or delayed flight, a "
    "silver or gold member, a business fare or insurance, and a complaint in time",
    "compensation_already_issued": "a compensation certificate was already issued for the "
    "reservation",
    "unrelated_request": "the request has nothing to do with the airline",
}

# submit_answer's description: how an answer of this desk is written.
ANSWER_INSTRUCTIONS = (
    "Submit the answer to the member's question, once, when you know it: exactly one value (an "
    "amount such as 233.00, a date such as 2026-05-12, a time such as 14:35 UTC, a booking code, "
    "flight number, seat or airport code as shown by the tools), or a list of values when the "
    "question asks for several (every one of them, nothing else). Only the submitted value is "
    "scored; a second submission is refused."
)

POLICY = policy_text(__package__, DECLINE_REASONS)
