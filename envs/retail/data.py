"""The deterministic base dataset: ~300 customers, 40 products / 195 variants, ~1000 orders.

Built with Core bulk inserts (explicit ids 1..N, so they are stable across builds; task seeds use
ids >= 100000). Everything random comes from the `rng` passed in, nothing from the wall clock.
"""

from __future__ import annotations

import itertools
import random
import re
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from envs.retail.catalog import CATALOG, ProductSpec
from envs.retail.models import (
    Address,
    AuditLog,
    Customer,
    Exchange,
    Order,
    OrderItem,
    Payment,
    PaymentMethod,
    Product,
    Return,
    ReturnItem,
    Variant,
)

N_CUSTOMERS = 300
N_ORDERS = 1000
# The base data describes the shop as of the environment's default clock.
AS_OF = datetime(2026, 3, 14, 10, 0)

FIRST_NAMES = (
    "Olivia Liam Emma Noah Ava Elijah Sophia James Isabella Lucas Mia Mason Amelia Ethan Harper "
    "Logan Evelyn Aiden Abigail Caleb Ella Owen Scarlett Daniel Grace Henry Chloe Jack Zoe Levi "
    "Lily Samuel Nora Wyatt Hannah Julian Aria Mateo Layla Ezra Riley Leo Camila Isaac Penelope "
    "Omar Priya Yuki Fatima Diego Amara Ravi Sofia Hugo Ingrid Kofi Mei Arjun Lucia Tomas"
).split()
LAST_NAMES = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill "
    "Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts"
).split()
CITIES = (
    ("Austin", "TX", "787"), ("Seattle", "WA", "981"), ("Denver", "CO", "802"),
    ("Boston", "MA", "021"), ("Chicago", "IL", "606"), ("Portland", "OR", "972"),
    ("Phoenix", "AZ", "850"), ("Atlanta", "GA", "303"), ("Miami", "FL", "331"),
    ("San Diego", "CA", "921"), ("Columbus", "OH", "432"), ("Nashville", "TN", "372"),
    ("Minneapolis", "MN", "554"), ("Philadelphia", "PA", "191"), ("Raleigh", "NC", "276"),
)  # fmt: skip
STREETS = (
    "Main St", "Oak Ave", "Maple Dr", "Cedar Ln", "Pine St", "Elm St", "Lake Rd", "Hill Ave",
    "Park Blvd", "River Rd", "Sunset Dr", "Highland Ave", "Washington St", "Spring St",
)  # fmt: skip
CARD_BRANDS = ("visa", "mastercard", "amex", "discover")
# (status, weight, min days old, max days old): the older an order, the further it got.
STATUS_PLAN = (
    ("pending", 20, 0, 3),
    ("processed", 12, 2, 6),
    ("shipped", 13, 4, 10),
    ("delivered", 35, 10, 190),
    ("cancelled", 8, 3, 190),
    ("returned", 6, 20, 190),
    ("exchanged", 6, 20, 190),
)


def variant_rows(spec: ProductSpec, product_id: int, first_id: int) -> list[dict[str, Any]]:
    """Every option combination of a product, with a deterministic SKU and price."""
    axes = [name for name, _ in spec.options]
    rows = []
    for n, combo in enumerate(itertools.product(*(range(len(v)) for _, v in spec.options))):
        values = [spec.options[a][1][i] for a, i in enumerate(combo)]
        # Colours cost about the same; bigger sizes, capacities and tiers cost more.
        step = sum(
            i * (3 if axes[a] == "color" else max(5, spec.base_price * 0.12))
            for a, i in enumerate(combo)
        )
        price = round(round(spec.base_price + step) - 0.01, 2) if step else spec.base_price
        codes = [re.sub(r"[^A-Za-z0-9]", "", v).upper()[:4] for v in values]
        rows.append(
            {
                "id": first_id + n,
                "product_id": product_id,
                "sku": "-".join([spec.sku_prefix, *codes]),
                "options": ";".join(f"{a}={v}" for a, v in zip(axes, values, strict=True)),
                "price": price,
            }
        )
    return rows


def product_slug(name: str) -> str:
    """Lower case, spaces to dashes: the same rule the slug migration applies in SQL."""
    return name.lower().replace(" ", "-")


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: dict[type, list[dict[str, Any]]] = {}

    def add(self, model: type, **row: Any) -> int:
        rows = self.rows.setdefault(model, [])
        row["id"] = len(rows) + 1
        rows.append(row)
        return row["id"]

    def ago(self, lo: float, hi: float) -> datetime:
        minutes = self.rng.randint(int(lo * 1440), int(hi * 1440))
        return AS_OF - timedelta(minutes=minutes)

    def catalogue(self) -> None:
        for pid, spec in enumerate(CATALOG, start=1):
            self.add(
                Product,
                name=spec.name,
                slug=product_slug(spec.name),
                category=spec.category,
                description=spec.description,
            )
            for row in variant_rows(spec, pid, len(self.rows.get(Variant, [])) + 1):
                out_of_stock = self.rng.random() < 0.12
                row["stock"] = 0 if out_of_stock else self.rng.randint(1, 40)
                row["available"] = self.rng.random() >= 0.05
                self.rows.setdefault(Variant, []).append(row)
        skus = [v["sku"] for v in self.rows[Variant]]
        assert len(skus) == len(set(skus)), "catalogue SKUs must be unique"

    def customers(self) -> None:
        rng = self.rng
        names = rng.sample(list(itertools.product(FIRST_NAMES, LAST_NAMES)), N_CUSTOMERS)
        codes = iter(rng.sample(range(1_000_000, 9_000_000), N_CUSTOMERS * 4))
        for first, last in names:
            cid = self.add(
                Customer,
                email=f"{first}.{last}{len(self.rows.get(Customer, [])) + 1}@example.com".lower(),
                first_name=first,
                last_name=last,
                phone=f"+1-{rng.randint(201, 989)}-555-{rng.randint(0, 9999):04d}",
                membership=rng.choices(("regular", "silver", "gold"), (6, 3, 1))[0],
                created_at=self.ago(200, 1500),
            )
            for default in (True, False) if rng.random() < 0.4 else (True,):
                city, state, zip3 = rng.choice(CITIES)
                self.add(
                    Address,
                    customer_id=cid,
                    line1=f"{rng.randint(10, 9999)} {rng.choice(STREETS)}",
                    line2=f"Apt {rng.randint(1, 40)}" if rng.random() < 0.3 else None,
                    city=city,
                    state=state,
                    zip=f"{zip3}{rng.randint(0, 99):02d}",
                    country="USA",
                    is_default=default,
                )
            kinds = ["card"] + [
                k
                for k, p in (("gift_card", 0.5), ("store_credit", 0.2), ("card", 0.25))
                if rng.random() < p
            ]
            for kind in kinds:
                card = kind == "card"
                self.add(
                    PaymentMethod,
                    code=f"{kind}_{next(codes)}",
                    customer_id=cid,
                    kind=kind,
                    brand=rng.choice(CARD_BRANDS) if card else None,
                    last4=f"{rng.randint(0, 9999):04d}" if card else None,
                    balance=None if card else round(rng.uniform(0, 300), 2),
                )

    def orders(self) -> None:
        rng = self.rng
        addresses = {a["customer_id"]: a for a in self.rows[Address] if a["is_default"]}
        methods: dict[int, list[dict[str, Any]]] = {}
        for m in self.rows[PaymentMethod]:
            methods.setdefault(m["customer_id"], []).append(m)
        variants = self.rows[Variant]
        by_product: dict[int, list[dict[str, Any]]] = {}
        for v in variants:
            by_product.setdefault(v["product_id"], []).append(v)
        numbers = rng.sample(range(1_000_000, 9_000_000), N_ORDERS)
        plan = [(s, lo, hi) for s, w, lo, hi in STATUS_PLAN for _ in range(w)]
        for number in numbers:
            status, lo, hi = rng.choice(plan)
            cid = rng.randint(1, N_CUSTOMERS)
            created = self.ago(lo, hi)
            addr = addresses[cid]
            picked = rng.sample(variants, rng.choice((1, 1, 2, 2, 3, 4)))
            lines = [(v, 2 if rng.random() < 0.1 else 1) for v in picked]
            total = round(sum(v["price"] * q for v, q in lines), 2)
            oid = self.add(
                Order,
                order_number=f"#W{number}",
                customer_id=cid,
                status=status,
                ship_line1=addr["line1"],
                ship_line2=addr["line2"],
                ship_city=addr["city"],
                ship_state=addr["state"],
                ship_zip=addr["zip"],
                ship_country=addr["country"],
                total=total,
                created_at=created,
            )
            item_status = {"cancelled": "cancelled", "returned": "returned"}.get(status, "active")
            item_ids = [
                self.add(
                    OrderItem,
                    order_id=oid,
                    line_no=n,
                    variant_id=v["id"],
                    quantity=q,
                    unit_price=v["price"],
                    status=item_status,
                )
                for n, (v, q) in enumerate(lines, start=1)
            ]
            own = methods[cid]
            gift = [m for m in own if m["kind"] == "gift_card"]
            payer = rng.choice(own)
            charges = [(payer["id"], total)]
            if gift and payer["kind"] == "card" and rng.random() < 0.2:
                part = round(total * 0.3, 2)
                charges = [(gift[0]["id"], part), (payer["id"], round(total - part, 2))]
            for mid, amount in charges:
                self.add(
                    Payment,
                    order_id=oid,
                    payment_method_id=mid,
                    kind="charge",
                    amount=amount,
                    created_at=created,
                )
            later = created + timedelta(days=rng.randint(1, 9))
            if status == "cancelled":
                for mid, amount in charges:
                    self.add(
                        Payment,
                        order_id=oid,
                        payment_method_id=mid,
                        kind="refund",
                        amount=amount,
                        created_at=later,
                    )
            elif status == "returned" or (status == "delivered" and rng.random() < 0.05):
                returned = item_ids if status == "returned" else item_ids[:1]
                amount = round(sum(v["price"] * q for v, q in lines[: len(returned)]), 2)
                if status == "delivered":
                    self.rows[OrderItem][returned[0] - 1]["status"] = "returned"
                rid = self.add(
                    Return,
                    code=f"RT-{number}-1",
                    order_id=oid,
                    reason=rng.choice(("defective", "wrong_item", "no_longer_needed")),
                    status="refunded",
                    refund_method_id=charges[-1][0],
                    refund_amount=amount,
                    created_at=later,
                )
                for item_id, (_, q) in zip(returned, lines, strict=False):
                    self.add(ReturnItem, return_id=rid, order_item_id=item_id, quantity=q)
                self.add(
                    Payment,
                    order_id=oid,
                    payment_method_id=charges[-1][0],
                    kind="refund",
                    amount=amount,
                    created_at=later,
                )
            elif status == "exchanged":
                for item_id, (v, q) in zip(item_ids, lines, strict=True):
                    self.rows[OrderItem][item_id - 1]["status"] = "exchanged"
                    to = rng.choice([o for o in by_product[v["product_id"]] if o["id"] != v["id"]])
                    diff = round((to["price"] - v["price"]) * q, 2)
                    line_no = self.rows[OrderItem][item_id - 1]["line_no"]
                    self.add(
                        Exchange,
                        code=f"EX-{number}-{line_no}",
                        order_id=oid,
                        order_item_id=item_id,
                        from_variant_id=v["id"],
                        to_variant_id=to["id"],
                        quantity=q,
                        price_difference=diff,
                        payment_method_id=charges[-1][0] if diff else None,
                        status="completed",
                        created_at=later,
                    )
                    if diff:
                        self.add(
                            Payment,
                            order_id=oid,
                            payment_method_id=charges[-1][0],
                            kind="charge" if diff > 0 else "refund",
                            amount=abs(diff),
                            created_at=later,
                        )


# Insert order: parents before children, so foreign keys hold at every step.
TABLE_ORDER = (Customer, Address, Product, Variant, PaymentMethod, Order, OrderItem, Payment,
               Return, ReturnItem, Exchange, AuditLog)  # fmt: skip


def build_base(db: Session, rng: random.Random) -> None:
    """Insert the base dataset into an empty schema (deterministic for a given `rng` seed)."""
    builder = _Builder(rng)
    builder.catalogue()
    builder.customers()
    builder.orders()
    for model in TABLE_ORDER:
        rows = builder.rows.get(model)
        if rows:
            db.execute(insert(model), rows)
