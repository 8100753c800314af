"""The support desk's policy: the system prompt every retail task starts with (policy.md beside
this module, its decline codes listed by the framework), and the reason codes a request is
declined with (one per rule that can forbid one)."""

from app.sdk.policy import policy_text

# Code -> the rule it names: decline_request's `reason` enum, its description and the policy's.
DECLINE_REASONS: dict[str, str] = {
    "not_authenticated": "the customer cannot be authenticated (no single account matches their "
    "email, or their name and zip code)",
    "other_customer": "the order or data belongs to another customer than the authenticated one",
    "order_not_pending": "only pending orders can be cancelled or have their items, address or "
    "payment changed",
    "order_not_delivered": "only delivered orders can have items returned or exchanged",
    "different_product": "items can only be changed or exchanged for another variant of the same "
    "product",
    "out_of_stock": "the variant asked for is unavailable or out of stock",
    "insufficient_balance": "the gift card does not hold enough balance for the payment",
    "split_payment": "an order paid with several payment methods cannot switch payment method",
    "refund_method": "a refund goes only to the order's original payment method or to one of "
    "the customer's gift cards",
    "already_returned": "the item was already returned or exchanged (each item only once)",
    "unrelated_request": "the request has nothing to do with the shop",
}

ANSWER_INSTRUCTIONS = (
    "Submit the answer to the customer's question, once, when you know it: exactly the value "
    "asked for, as the tools show it (an amount as 233.00, a product name, an order number), or "
    "a list of values when the question asks for several (every one of them, nothing else). "
    "Only the submitted value is scored; a second submission (answer or decline) is refused."
)

POLICY = policy_text(__package__, DECLINE_REASONS, indent="  ")
