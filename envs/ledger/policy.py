"""The bank's policy: the system prompt every ledger task starts with (policy.md beside this
module, its decline codes listed by the framework), and the reason codes a refusal names (one per
rule of the policy a request can break)."""

from app.sdk.policy import policy_text

# decline_request's `reason` enum: code -> the rule, one line (goes into the tool description).
DECLINE_REASONS: dict[str, str] = {
    "not_identified": "the customer's email and date of birth do not both match a customer",
    "other_customer": "the account belongs to another customer",
    "kyc_incomplete": "the customer's KYC is not verified: no transfers, withdrawals or new "
    "beneficiaries",
    "account_frozen": "the account is frozen or closed and accepts no postings",
    "currency_mismatch": "the two accounts have different currencies (no exchange)",
    "not_a_beneficiary": "the other customer's account is not a saved beneficiary",
    "insufficient_funds": "the available balance (and overdraft) does not cover the amount",
    "daily_limit": "the amount would exceed the account's daily limit for transfers and "
    "withdrawals",
    "loan_rules": "money never leaves a loan account, and a repayment is at most what is "
    "outstanding",
    "fee_not_allowed": "a fee is charged only for a service the customer asks for, per schedule",
    "already_reversed": "the transaction was already reversed, or is itself a reversal",
    "reversal_window": "the transaction is more than 30 days old",
    "reversal_not_allowed": "a transfer to another customer is never reversed",
    "freeze_not_liftable": "a suspected_fraud or legal_order freeze can only be lifted by the "
    "fraud or legal team",
    "balance_not_zero": "an account can be closed only with a balance of exactly 0.00",
    "active_holds": "an account with an active hold cannot be closed (whatever its balance)",
    "hold_not_expired": "a hold can be released only once it has expired",
    "unrelated_request": "the request has nothing to do with the customer's banking",
}

ANSWER_INSTRUCTIONS = (
    "Submit the answer to the customer's question, once, when you know it: exactly one value (an "
    "amount such as 233.00, without the currency; a transaction reference or an account number "
    "as the tools show it), or a list of values when the question asks for several (every one "
    "of them, nothing else). Only the submitted value is scored; a second submission is refused."
)

POLICY = policy_text(__package__, DECLINE_REASONS)
