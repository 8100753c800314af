"""How two retail states are compared: natural keys, money and free-text columns, frozen tables."""

from app.sdk.compare_spec import CompareSpec, TableSpec

ADDRESS_TEXT = ("line1", "line2", "city", "state", "zip", "country")
SHIP_TEXT = tuple(f"ship_{c}" for c in ADDRESS_TEXT)

COMPARE = CompareSpec(
    tables={
        "customers": TableSpec(key=("email",), text=("first_name", "last_name")),
        # Addresses have no natural key: matched by content (an edited address shows as a change).
        "addresses": TableSpec(text=ADDRESS_TEXT, references={"customer_id": "customers"}),
        # No tool touches the catalogue's descriptions; any change is collateral damage.
        "products": TableSpec(key=("name",), frozen=True),
        "variants": TableSpec(
            key=("sku",), money=("price",), references={"product_id": "products"}
        ),
        "payment_methods": TableSpec(
            key=("code",), money=("balance",), references={"customer_id": "customers"}
        ),
        "orders": TableSpec(
            key=("order_number",),
            money=("total",),
            text=SHIP_TEXT,
            references={"customer_id": "customers"},
        ),
        "order_items": TableSpec(
            key=("order_id", "line_no"),
            money=("unit_price",),
            references={"order_id": "orders", "variant_id": "variants"},
        ),
        "payments": TableSpec(
            money=("amount",),
            references={"order_id": "orders", "payment_method_id": "payment_methods"},
        ),
        "returns": TableSpec(
            key=("code",),
            money=("refund_amount",),
            references={"order_id": "orders", "refund_method_id": "payment_methods"},
        ),
        # Return items point at a return the rollout created: match them through its code.
        "return_items": TableSpec(references={"return_id": "returns"}),
        "exchanges": TableSpec(
            key=("code",),
            money=("price_difference",),
            references={
                "order_id": "orders",
                "from_variant_id": "variants",
                "to_variant_id": "variants",
                "payment_method_id": "payment_methods",
            },
        ),
        # The clock is frozen and details are canonical JSON, so audit rows replay identically.
        "audit_log": TableSpec(text=("detail",), log=True),
    }
)
