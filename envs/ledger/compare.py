"""How two ledger states are compared: natural keys, money columns, references, frozen tables."""

from app.sdk.compare_spec import CompareSpec, TableSpec

COMPARE = CompareSpec(
    tables={
        # No tool changes a customer's profile; any change is collateral damage.
        "customers": TableSpec(key=("email",), frozen=True),
        "accounts": TableSpec(
            key=("number",),
            money=("balance", "overdraft_limit", "daily_limit"),
            references={"customer_id": "customers"},
        ),
        # References are derived from each posting's content, so the same postings made in another
        # order still match. The memo is free text the agent may word as it likes.
        "transactions": TableSpec(
            key=("reference",), ignore=("memo",), references={"reverses_id": "transactions"}
        ),
        # Entries have no key of their own: matched by content, through their transaction's code.
        "entries": TableSpec(
            money=("amount",),
            references={"transaction_id": "transactions", "account_id": "accounts"},
        ),
        "holds": TableSpec(key=("code",), money=("amount",), references={"account_id": "accounts"}),
        "beneficiaries": TableSpec(
            key=("customer_id", "account_id"),
            text=("nickname",),
            references={"customer_id": "customers", "account_id": "accounts"},
        ),
    }
)
