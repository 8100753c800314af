"""How two airline states are compared: natural keys, money and name columns, frozen tables."""

from app.sdk.compare_spec import CompareSpec, TableSpec

COMPARE = CompareSpec(
    tables={
        # No tool changes the network or the schedule: any change is collateral damage.
        "airports": TableSpec(key=("code",), frozen=True),
        "flights": TableSpec(
            key=("flight_number", "flight_date"),
            references={"origin_id": "airports", "destination_id": "airports"},
            frozen=True,
        ),
        "flight_cabins": TableSpec(
            key=("flight_id", "fare_class"), money=("price",), references={"flight_id": "flights"}
        ),
        "seats": TableSpec(
            key=("flight_id", "seat_no"),
            references={"flight_id": "flights", "passenger_id": "passengers"},
        ),
        "users": TableSpec(key=("user_code",), text=("first_name", "last_name")),
        "payment_methods": TableSpec(
            key=("code",), money=("balance",), references={"user_id": "users"}
        ),
        "reservations": TableSpec(
            key=("code",),
            references={
                "user_id": "users",
                "origin_id": "airports",
                "destination_id": "airports",
            },
        ),
        "reservation_segments": TableSpec(
            key=("reservation_id", "leg_no"),
            money=("price",),
            references={"reservation_id": "reservations", "flight_id": "flights"},
        ),
        # Ticket numbers derive from the booking code, so a rollout's booking matches the gold's.
        "passengers": TableSpec(
            key=("ticket_number",),
            text=("first_name", "last_name"),
            references={"reservation_id": "reservations"},
        ),
        # Charges and refunds have no natural key: matched by content (timestamps are frozen).
        "payments": TableSpec(
            money=("amount",),
            references={"reservation_id": "reservations", "payment_method_id": "payment_methods"},
        ),
        "refunds": TableSpec(
            money=("amount",),
            references={"reservation_id": "reservations", "payment_method_id": "payment_methods"},
        ),
        "baggage": TableSpec(
            key=("reservation_id",), references={"reservation_id": "reservations"}
        ),
        "certificates": TableSpec(
            key=("code",),
            money=("amount",),
            references={
                "user_id": "users",
                "reservation_id": "reservations",
                "payment_method_id": "payment_methods",
            },
        ),
    }
)
