"""Building blocks of the retail task generator: a seed builder per task story, a view of the
base catalogue, the story context and gold-call helpers (the rest is app/taskgen/kit.py).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.sdk.taskgen import (
    PEOPLE,
    STORY_ID_FLOOR,
    Phrasing,
    SeedBuilder,
    call,
    name_grid,
    sentence_starting,
    sentence_with,
)
from app.sdk.taskgen import Draft as Draft  # re-exported: what the families return
from envs.retail import ENVIRONMENT
from envs.retail.models import Product, Variant
from envs.retail.taskgen.products import PRODUCT_LINES, OwnCatalog

# The seed's table order (parents first; a variant's row is a stock update of a base row).
SEED_TABLES = (
    "products", "variants", "customers", "addresses", "payment_methods", "orders", "order_items",
    "payments", "returns", "return_items",
)  # fmt: skip
# Cities absent from the base data, so name + zip always identifies a task's customer.
TASK_CITIES = (
    ("New York", "NY", "100"), ("San Francisco", "CA", "941"), ("Los Angeles", "CA", "900"),
    ("Houston", "TX", "770"), ("Madison", "WI", "537"), ("Salt Lake City", "UT", "841"),
    ("Baltimore", "MD", "212"), ("Tucson", "AZ", "857"), ("Pittsburgh", "PA", "152"),
    ("Cleveland", "OH", "441"), ("Kansas City", "MO", "641"), ("Omaha", "NE", "681"),
    ("Albuquerque", "NM", "871"), ("Boise", "ID", "837"), ("Richmond", "VA", "232"),
    ("Louisville", "KY", "402"), ("Milwaukee", "WI", "532"), ("Sacramento", "CA", "958"),
    ("Anchorage", "AK", "995"), ("Honolulu", "HI", "968"), ("Buffalo", "NY", "142"),
    ("Spokane", "WA", "992"), ("Des Moines", "IA", "503"), ("Charleston", "SC", "294"),
    ("Savannah", "GA", "314"), ("Burlington", "VT", "054"), ("Bangor", "ME", "044"),
    ("Fargo", "ND", "581"), ("Reno", "NV", "895"), ("Tulsa", "OK", "741"),
)  # fmt: skip
# Street names x suffixes (360 streets), so no address is a recurring identifier.
STREET_NAMES = (
    "Bleecker", "Valencia", "Sunset", "Westheimer", "State", "Canal", "Maple", "Oak", "Pine",
    "Cedar", "Elm", "Harbor", "Lake", "Hill", "Birch", "Willow", "Chestnut", "Walnut", "Spruce",
    "Magnolia", "Juniper", "Aspen", "Poplar", "Laurel", "Hawthorne", "Sycamore", "Cypress",
    "Linden", "Alder", "Hickory", "Mulberry", "Dogwood", "Redwood", "Sequoia", "Beacon", "Summit",
    "Ridge", "Meadow", "Orchard", "Prospect",
)  # fmt: skip
STREETS = tuple(
    f"{name} {kind}"
    for name in STREET_NAMES
    for kind in ("St", "Ave", "Rd", "Blvd", "Ln", "Dr", "Way", "Ct", "Pl")
)
# New arrivals a story adds to a category: "<line> <kind>" (no base product is named so; the
# lines are PRODUCT_LINES, envs/retail/taskgen/products.py).
PRODUCT_KINDS = {
    "audio": ("Speaker", "Soundbar", "Earbuds", "Turntable"),
    "electronics": ("Tablet", "Charger", "Webcam", "Monitor"),
    "bags": ("Tote", "Duffel", "Satchel", "Sling"),
    "footwear": ("Sneakers", "Loafers", "Sandals", "Boots"),
    "apparel": ("Hoodie", "Parka", "Cardigan", "Vest"),
    "sports": ("Racket", "Kettlebell", "Jump Rope", "Foam Roller"),
    "outdoor": ("Lantern", "Hammock", "Tent", "Camp Stove"),
    "kitchen": ("Kettle", "Skillet", "Stand Mixer", "Toaster"),
    "home": ("Throw Blanket", "Floor Lamp", "Rug", "Planter"),
    "toys": ("Puzzle", "Kite", "Robot Kit", "Marble Run"),
}
# Cities the gold of earlier shipped stories named (the shipped set is built in one pass).
SHIPPED_CITIES: set[str] = set()
MAIL_DOMAINS = ("example.org", "example.net", "mail.example.com", "inbox.example.org")
# Order statuses that forbid what only pending (or only delivered) orders allow.
NOT_PENDING = ("processed", "shipped", "delivered")
NOT_DELIVERED = ("pending", "processed", "shipped")


def nice(options: str) -> str:
    """Turn "color=blue;size=M" into "color blue, size M", as a customer would say it."""
    return ", ".join(part.replace("=", " ") for part in options.split(";"))


def money(value: float) -> str:
    return f"{value:.2f}"


def number_only(order_number: str) -> str:
    """What any mention of the order contains, with or without the leading '#'."""
    return order_number.lstrip("#")


class Catalog:
    """The base data's products and variants, as plain dicts, to pick task items from."""

    def __init__(self, db: Session) -> None:
        names = {p.id: (p.name, p.category) for p in db.scalars(select(Product))}
        self.descriptions = {p.id: p.description for p in db.scalars(select(Product))}
        self.variants: list[dict[str, Any]] = []
        self.by_product: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for v in db.scalars(select(Variant).order_by(Variant.id)):
            row = {c: getattr(v, c) for c in ("id", "product_id", "sku", "options", "price")}
            row.update(stock=v.stock, available=v.available, product=names[v.product_id][0])
            row["category"] = names[v.product_id][1]
            self.variants.append(row)
            self.by_product[v.product_id].append(row)
        self.categories: dict[str, list[str]] = defaultdict(list)
        for pid in sorted(names):
            self.categories[names[pid][1]].append(names[pid][0])
        self.by_sku = {v["sku"]: v for v in self.variants}
        # The shipped set, built story after story outside a world, prefers products no earlier
        # shipped story's gold named (`prefer_fresh`), so its tasks share no product either.
        self.prefer_fresh = False
        self.stale: set[int] = set()
        # Of those, the ones a gold passed by id (a task's identifiers; a SKU is none): where no
        # fresh product is left, one outside these keeps the shipped tasks' identifiers apart.
        self.looked_up: set[int] = set()

    def fresh(self, pids: list[int]) -> list[int]:
        """`pids`, those no earlier shipped story named first (as they are, in a world)."""
        if not self.prefer_fresh:
            return pids
        return sorted(pids, key=lambda pid: pid in self.stale)

    def named(self, gold: list[dict[str, Any]]) -> set[int]:
        """The products a gold names (by id or by SKU)."""
        found: set[int] = set()
        for c in gold:
            args = c["arguments"]
            if isinstance(args.get("product_id"), int):
                found.add(args["product_id"])
            for key in ("skus", "from_skus", "to_skus"):
                found.update(self.by_sku[s]["product_id"] for s in args.get(key) or ())
        return found

    def item(self, rng: random.Random, avoid: set[int]) -> dict[str, Any]:
        """Any variant of a product not in `avoid` (ordered items need not be in stock now)."""
        choices = [v for v in self.variants if v["product_id"] not in avoid]
        if self.prefer_fresh:
            choices = [v for v in choices if v["product_id"] not in self.stale] or choices
        picked = rng.choice(choices)
        avoid.add(picked["product_id"])
        return picked

    def swap(
        self, rng: random.Random, avoid: set[int], price: str = "any"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(old, new) variants of one product; `new` available with stock; price up/down/any."""
        pids = sorted(p for p in self.by_product if p not in avoid)
        rng.shuffle(pids)
        for pid in self.fresh(pids):
            variants = self.by_product[pid]
            for old in rng.sample(variants, len(variants)):
                news = [
                    v
                    for v in variants
                    if v["id"] != old["id"]
                    and v["available"]
                    and v["stock"] >= 3
                    and (price == "any" or (v["price"] > old["price"]) == (price == "up"))
                    and v["price"] != old["price"]
                ]
                if news:
                    avoid.add(pid)
                    return old, rng.choice(news)
        raise LookupError("no variant pair fits")


@dataclass
class Person:
    """A story's customer: their id, name, email, default address, payment codes by label."""

    id: int
    first: str
    last: str
    email: str
    address: dict[str, Any]
    methods: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def zip(self) -> str:
        return str(self.address["zip"])


@dataclass
class OrderInfo:
    number: str
    total: float
    lines: list[tuple[dict[str, Any], int]]
    id: int


class Story:
    """The rows one task seeds on top of the base data (its `SeedBuilder`, id block `index`)."""

    def __init__(self, index: int, now: datetime, rng: random.Random) -> None:
        self.index, self.now, self.rng = index, now, rng
        self.b = SeedBuilder(index, SEED_TABLES, now)
        self.rows = self.b.rows
        # Products already in one of the story's orders: each product appears once per story, so
        # "the order with the Yoga Mat" is never ambiguous.
        self.used: set[int] = set()

    def _add(self, table: str, **row: Any) -> int:
        return int(self.b.add(table, **row)["id"])

    def _ts(self, days_ago: float) -> str:
        return (self.now - timedelta(days=days_ago)).isoformat()

    def new_address(self, city_index: int | None = None) -> dict[str, Any]:
        if city_index is None:
            cities = list(range(len(TASK_CITIES)))
            if self.b.world is None:  # the shipped set: a city no earlier story's gold named
                cities = [i for i in cities if TASK_CITIES[i][0] not in SHIPPED_CITIES] or cities
            city_index = cities[self.rng.randrange(len(cities))]
        city, state, zip3 = TASK_CITIES[city_index]
        return {
            "line1": f"{self.rng.randint(10, 999)} {self.rng.choice(STREETS)}",
            "line2": f"Apt {self.rng.randint(1, 30)}" if self.rng.random() < 0.4 else None,
            "city": city,
            "state": state,
            "zip": f"{zip3}{self.rng.randint(10, 99)}",
            "country": "USA",
        }

    def person(self, first: str, last: str, *, card: str = "visa") -> Person:
        # The email's number and domain come from the world, so no two tasks share an account.
        email = f"{first}.{last}{self.b.code(5)}@{self.rng.choice(MAIL_DOMAINS)}".lower()
        cid = self._add(
            "customers",
            email=email,
            first_name=first,
            last_name=last,
            phone=f"+1-415-555-{self.rng.randint(0, 9999):04d}",
            membership="regular",
            created_at=self._ts(400),
        )
        address = self.new_address()
        self._add("addresses", customer_id=cid, is_default=True, **address)
        p = Person(cid, first, last, email, address)
        self.card(p, card)
        return p

    def second_address(self, p: Person) -> dict[str, Any]:
        address = self.new_address()
        self._add("addresses", customer_id=p.id, is_default=False, **address)
        return address

    def _method(self, p: Person, kind: str, label: str, **cols: Any) -> str:
        code = f"{kind}_{self.b.code(8)}"  # 8 digits: never a base method's 7
        self._add("payment_methods", code=code, customer_id=p.id, kind=kind, **cols)
        p.methods[label] = code
        return code

    def card(self, p: Person, brand: str) -> str:
        last4 = f"{self.rng.randint(1000, 9999)}"
        return self._method(p, "card", brand, brand=brand, last4=last4, balance=None)

    def gift_card(self, p: Person, balance: float) -> str:
        return self._method(p, "gift_card", "gift_card", brand=None, last4=None, balance=balance)

    def store_credit(self, p: Person, balance: float) -> str:
        """A balance that is not a gift card's (what a lookup must not confuse with one)."""
        return self._method(
            p, "store_credit", "store_credit", brand=None, last4=None, balance=balance
        )

    def last4(self, code: str) -> str:
        return str(next(m["last4"] for m in self.rows["payment_methods"] if m["code"] == code))

    def order(
        self,
        p: Person,
        status: str,
        items: list[dict[str, Any]],
        pay: str | list[tuple[str, float]],
        days_ago: float = 1,
        qty: int = 1,
    ) -> OrderInfo:
        lines = [(v, qty if n == 0 else 1) for n, v in enumerate(items)]
        # Under a day, so "my most recent order" keeps meaning the same one.
        jitter = round(self.rng.uniform(0, 0.9), 3)
        self.used.update(v["product_id"] for v in items)
        total = round(sum(v["price"] * q for v, q in lines), 2)
        number = f"#W{self.b.code(8)}"  # 8 digits: never a base order's 7
        ship = {f"ship_{k}": v for k, v in p.address.items()}
        oid = self._add(
            "orders",
            order_number=number,
            customer_id=p.id,
            status=status,
            total=total,
            created_at=self._ts(days_ago + jitter),
            **ship,
        )
        for n, (v, q) in enumerate(lines, start=1):
            self._add(
                "order_items",
                order_id=oid,
                line_no=n,
                variant_id=v["id"],
                quantity=q,
                unit_price=v["price"],
                status="active",
            )
        if isinstance(pay, str):
            pay = [(pay, total)]
        else:  # split: the listed amounts, the last method pays the rest
            pay = [*pay[:-1], (pay[-1][0], round(total - sum(a for _, a in pay[:-1]), 2))]
        for code, amount in pay:
            mid = next(m["id"] for m in self.rows["payment_methods"] if m["code"] == code)
            self._add(
                "payments",
                order_id=oid,
                payment_method_id=mid,
                kind="charge",
                amount=amount,
                created_at=self._ts(days_ago + jitter),
            )
        return OrderInfo(number, total, lines, oid)

    def lookalike(self, p: Person, v: dict[str, Any], days_ago: float) -> None:
        """An older delivered order of `p` holding the same item `v`: acting on the order the
        request names needs the order list and its details, not a guess."""
        self.order(p, "delivered", [v], next(iter(p.methods.values())), days_ago)

    def namesake(self, p: Person) -> None:
        """Another customer with p's exact name in another city (another zip): a name alone,
        or a wrong zip, never identifies p."""
        others = [i for i, (_, _, z3) in enumerate(TASK_CITIES) if z3 != p.zip[:3]]
        address = self.new_address(self.rng.choice(others))
        email = f"{p.first}.{p.last}{self.b.code(5)}@example.net".lower()
        cid = self._add(
            "customers",
            email=email,
            first_name=p.first,
            last_name=p.last,
            phone=f"+1-212-555-{self.rng.randint(0, 9999):04d}",
            membership="regular",
            created_at=self._ts(700),
        )
        self._add("addresses", customer_id=cid, is_default=True, **address)

    def mark_returned(self, o: OrderInfo, line: int = 0) -> None:
        """Line `line` of the order was returned already (an item goes back only once), with
        the records a return leaves, as `return_delivered_order_items` writes them: the return
        (refunded to the order's first payment method), its item and the refund payment."""
        rows = self.rows["order_items"]
        row = next(r for r in rows if r["order_id"] == o.id and r["line_no"] == line + 1)
        row["status"] = "returned"
        charge = next(p for p in self.rows["payments"] if p["order_id"] == o.id)
        when = (datetime.fromisoformat(charge["created_at"]) + timedelta(days=7)).isoformat()
        amount = round(row["unit_price"] * row["quantity"], 2)
        done = sum(1 for r in self.rows["returns"] if r["order_id"] == o.id)
        return_id = self._add(
            "returns",
            code=f"RT-{o.number.lstrip('#')}-{done + 1}",
            order_id=o.id,
            reason="no_longer_needed",
            status="refunded",
            refund_method_id=charge["payment_method_id"],
            refund_amount=amount,
            created_at=when,
        )
        self._add(
            "return_items", return_id=return_id, order_item_id=row["id"], quantity=row["quantity"]
        )
        self._add(
            "payments",
            order_id=o.id,
            payment_method_id=charge["payment_method_id"],
            kind="refund",
            amount=amount,
            created_at=when,
        )

    def history(self, p: Person, catalog: OwnCatalog, n: int = 2) -> None:
        """Older, settled orders, so the customer's order list is not just the task's orders."""
        for k in range(n):
            items = [catalog.background(self.rng, self.used) for _ in range(self.rng.randint(1, 2))]
            self.order(p, "delivered", items, next(iter(p.methods.values())), 60 + 30 * k)

    def new_product(self, category: str, taken: set[str]) -> str:
        """A product the story adds to `category` (a new arrival, no variants yet): its name."""
        while True:
            kind = self.rng.choice(PRODUCT_KINDS.get(category, ("Gadget",)))
            name = f"{self.rng.choice(PRODUCT_LINES)} {kind}"
            if name not in taken:
                taken.add(name)
                break
        slug = name.lower().replace(" ", "-")
        self._add(
            "products",
            name=name,
            slug=slug,
            category=category,
            description=f"New in {category}: the {name}.",
        )
        return name

    def set_stock(self, variant: dict[str, Any], stock: int) -> None:
        self.set_variant(variant, stock=stock)

    def set_variant(self, variant: dict[str, Any], **columns: Any) -> None:
        """This world's `columns` of a variant: an update of a base variant, an edit of the
        story's own (envs/retail/taskgen/products.py)."""
        if variant["id"] < STORY_ID_FLOOR:
            self.b.update("variants", variant["id"], **columns)
            return
        row = next(r for r in self.rows["variants"] if r["id"] == variant["id"])
        row.update(columns)

    def seed(self) -> dict[str, Any]:
        return self.b.seed()


NOW = datetime(2026, 3, 14, 10, 0)
C = partial(call, ENVIRONMENT)
# Every first name with every last name (3,700 people), so a name is in few tasks' gold.
NAMES = name_grid([f for f, _ in PEOPLE], sorted({last for _, last in PEOPLE}), "retail-names")


@dataclass
class Ctx:
    """What a family function gets: its story (seed builder), the catalogue, its variant k."""

    s: Story
    cat: OwnCatalog  # the base catalogue as the story sees it
    k: int
    names: list[tuple[str, str]]

    def person(self, **kw: Any) -> Person:
        first, last = self.names.pop()
        return self.s.person(first, last, **kw)

    def maybe_namesake(self, p: Person, by: str) -> None:
        """Half the stories that authenticate by name and zip get p's namesake elsewhere."""
        if by == "zip" and self.s.rng.random() < 0.5:
            self.s.namesake(p)

    def allowed(self) -> bool:
        """The twin's coin: whether this story's data permits what the request asks (the same
        request, worded from the same pool, is forbidden by the data in the other twin). The
        shipped set (built outside a world) fixes it: even stories allowed, odd forbidden, so it
        holds both twins of the families with several variants, and stays stable."""
        if self.s.b.world is None:
            return self.s.index % 2 == 0
        return self.s.rng.random() < 0.5

    def rule(self, *rules: str) -> str:
        """The twin's coin, then which rule forbids it: "" (allowed) half the time, else one of
        `rules` (a rule listed twice is drawn twice as often). Several rules per request, so a
        policy that guesses a decline code from the wording is wrong most of the time."""
        return "" if self.allowed() else self.s.rng.choice(rules)

    def owner(self, p: Person, rule: str) -> Person:
        """Who owns the order the customer names: them, or (the `other_customer` twin) another
        customer, whose order number they gave."""
        return self.person() if rule == "other_customer" else p

    def wrong_zip(self, p: Person) -> str:
        """A zip of the customer's city that is not theirs: their name and it match no one."""
        while True:
            z = f"{p.zip[:3]}{self.s.rng.randint(10, 99)}"
            if z != p.zip:
                return z


def hello(p: Person, by: str, zip_code: str | None = None) -> str:
    """Who the customer says they are. No greeting word: the draw's voice adds the greeting
    ("Good morning. Hi, this is ..." was a seam)."""
    if by == "zip":
        return f"I'm {p.name}, zip code {zip_code or p.zip}."
    return f"I'm {p.name} ({p.email})."


def auth(p: Person, by: str) -> dict[str, Any]:
    if by == "zip":
        return C("find_customer_by_name_zip", first_name=p.first, last_name=p.last, zip=p.zip)
    return C("find_customer_by_email", email=p.email)


def addr_text(a: dict[str, Any]) -> str:
    line2 = f", {a['line2']}" if a["line2"] else ""
    return f"{a['line1']}{line2}, {a['city']}, {a['state']} {a['zip']}, {a['country']}"


def the(v: dict[str, Any]) -> str:
    return f"the {v['product']} ({nice(v['options'])})"


GO = "You have my confirmation, please go ahead."
# What a draw may reword (app/sdk/phrasing.py): the "Please ..." request (not the consent), the
# consent sentence, and the greeting saying who the customer is (`hello`, the catalogue question).
PHRASING = Phrasing(
    request=sentence_starting("Please"),
    keep_request=("go ahead", "confirm"),
    consent=sentence_with("confirmation"),
    greeting=re.compile(r"^(?P<who>I'm .*?)\.(?=\s+[A-Z]|$)"),
    closing=("confirm", "go ahead", "proceed"),
)
