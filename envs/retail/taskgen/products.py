"""A world's own products: the catalogue items a story orders, asks about or swaps, as its copies.

The base catalogue's 40 products would otherwise recur in the gold of many tasks (a product id
in 2.7 % of 300), so a policy could learn them. Inside a world (every generated draw) each base
product a story picks is copied into the story's seed as its own: a new product row named
"<line> <base name>" (e.g. "Cobalt Yoga Mat"; unique, so a lookup by name finds one), with every
variant of the base product under new ids and SKUs carrying a number from the task's seed
("YGM48213-PURP-4MM"); options, prices, stock and availability are the base's. The draw's
choices (which product, which variants) come from the story's stream as before; the copy's
name and numbers from the world. Outside a world (the shipped set) the base products are used.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from envs.retail.data import product_slug

if TYPE_CHECKING:  # kit builds its story context on this module (no import back at run time)
    from envs.retail.taskgen.kit import Catalog, Story

Variant = dict[str, Any]
# Product lines: a story's copies ("Cobalt Yoga Mat") and new arrivals ("Cobalt Tent", kit.py).
PRODUCT_LINES = (
    "Alpine", "Coastal", "Nordic", "Summit", "Meadow", "Cobalt", "Amber", "Juniper", "Granite",
    "Harbor", "Willow", "Cedar", "Aurora", "Canyon", "Orchid", "Falcon", "Maple", "Sierra",
)  # fmt: skip


class OwnCatalog:
    """The catalogue as one story sees it: the base's, with the products it picks made its own
    (in a world)."""

    def __init__(self, base: Catalog, story: Story) -> None:
        self.base, self.s = base, story
        self.world: random.Random | None = story.b.world
        self.copies: dict[int, dict[int, Variant]] = {}  # base product -> base variant -> copy
        self.origin: dict[int, int] = {}  # a copy's product id -> its base product id
        self.lines: set[str] = set()

    # What families read as on the base catalogue.
    @property
    def variants(self) -> list[Variant]:
        return self.base.variants

    @property
    def by_product(self) -> dict[int, list[Variant]]:
        return self.base.by_product

    @property
    def categories(self) -> dict[str, list[str]]:
        return self.base.categories

    @property
    def prefer_fresh(self) -> bool:
        return self.base.prefer_fresh

    @property
    def stale(self) -> set[int]:
        return self.base.stale

    def named(self, gold: list[dict[str, Any]]) -> set[int]:
        return self.base.named(gold)

    def own(self, v: Variant) -> Variant:
        """The story's copy of base variant `v` (its product copied on first use), or `v`
        itself outside a world."""
        if self.world is None:
            return v
        pid = v["product_id"]
        if pid not in self.copies:
            self.copies[pid] = self._copy(pid)
        return self.copies[pid][v["id"]]

    def product(self, pid: int) -> list[Variant]:
        """Every variant of base product `pid`, as the story's own."""
        return [self.own(v) for v in self.base.by_product[pid]]

    def item(self, rng: random.Random, avoid: set[int]) -> Variant:
        """`Catalog.item`, made the story's own (`avoid` holds copies' and base products)."""
        base_avoid = self._base_ids(avoid)
        v = self.own(self.base.item(rng, base_avoid))
        avoid.add(v["product_id"])
        return v

    def swap(
        self, rng: random.Random, avoid: set[int], price: str = "any"
    ) -> tuple[Variant, Variant]:
        """`Catalog.swap`, made the story's own."""
        old, new = self.base.swap(rng, self._base_ids(avoid), price)
        old, new = self.own(old), self.own(new)
        avoid.add(old["product_id"])
        return old, new

    def _base_ids(self, avoid: set[int]) -> set[int]:
        return {self.origin.get(pid, pid) for pid in avoid}

    def _copy(self, pid: int) -> dict[int, Variant]:
        """The story's rows of a copy of base product `pid`: the product, then its variants."""
        assert self.world is not None
        variants = self.base.by_product[pid]
        name = variants[0]["product"]
        lines = [line for line in PRODUCT_LINES if line not in self.lines]
        line = lines[self.world.randrange(len(lines))]
        self.lines.add(line)
        own_name = f"{line} {name}"
        row = self.s.b.add(
            "products",
            name=own_name,
            slug=product_slug(own_name),
            category=variants[0]["category"],
            description=self.base.descriptions[pid],
        )
        self.origin[row["id"]] = pid
        number = self.s.b.code(5)
        copies: dict[int, Variant] = {}
        for v in variants:
            prefix, _, rest = v["sku"].partition("-")
            sku = f"{prefix}{number}-{rest}" if rest else f"{prefix}{number}"
            vid = self.s.b.add(
                "variants",
                product_id=row["id"],
                sku=sku,
                options=v["options"],
                price=v["price"],
                stock=v["stock"],
                available=v["available"],
            )["id"]
            copies[v["id"]] = {
                **v,
                "id": vid,
                "product_id": row["id"],
                "sku": sku,
                "product": own_name,
            }
        return copies
