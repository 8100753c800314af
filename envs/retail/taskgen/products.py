"""A world's own products: the catalogue items a story orders, asks about or swaps, as its copies.

The base catalogue's 40 products would otherwise recur in many golds (a product id in 2.7 % of
300 tasks). Inside a world (every generated draw) each base product a story picks becomes its
own: a product row "<line> <base name>" ("Cobalt Yoga Mat": unique, so a lookup by name finds
one) and the base's variants (all where the agent reads the product, the ordered one for an
item nothing reads), with new ids and SKUs numbered from the task's seed ("YGM48213-PURP-4MM");
options, prices, stock and availability are the base's, the picks the story stream's as before.
Older settled orders (`background`) keep base products: no gold reads them, and copying them
doubled the seeds. Outside a world (the shipped set) the base products are used.
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
        self.heads: dict[int, tuple[int, str, str]] = {}  # base product -> (id, name, number)
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

    @property
    def looked_up(self) -> set[int]:
        return self.base.looked_up

    def named(self, gold: list[dict[str, Any]]) -> set[int]:
        return self.base.named(gold)

    def own(self, v: Variant, whole: bool = True) -> Variant:
        """The story's copy of base variant `v` (with every variant of its product, or with
        only the ones asked for when not `whole`), or `v` itself outside a world."""
        if self.world is None:
            return v
        for other in self.base.by_product[v["product_id"]] if whole else [v]:
            self._copy(other)
        return self.copies[v["product_id"]][v["id"]]

    def product(self, pid: int) -> list[Variant]:
        """Every variant of base product `pid`, as the story's own."""
        return [self.own(v) for v in self.base.by_product[pid]]

    def item(self, rng: random.Random, avoid: set[int]) -> Variant:
        """`Catalog.item`, made the story's own (`avoid` holds copies' and base products). An
        ordered item's product is copied with that variant only: nothing reads its others."""
        v = self.own(self.base.item(rng, self._base_ids(avoid)), whole=False)
        avoid.add(v["product_id"])
        return v

    def background(self, rng: random.Random, avoid: set[int]) -> Variant:
        """A base variant for an older, settled order no gold reads (no copy: smaller seeds)."""
        v = self.base.item(rng, self._base_ids(avoid))
        avoid.add(v["product_id"])
        return v

    def swap(
        self, rng: random.Random, avoid: set[int], price: str = "any"
    ) -> tuple[Variant, Variant]:
        """`Catalog.swap`, made the story's own (the whole product: the agent reads it)."""
        old, new = self.base.swap(rng, self._base_ids(avoid), price)
        old, new = self.own(old), self.own(new)
        avoid.add(old["product_id"])
        return old, new

    def _base_ids(self, avoid: set[int]) -> set[int]:
        return {self.origin.get(pid, pid) for pid in avoid}

    def _copy(self, v: Variant) -> None:
        """The story's rows of base variant `v`'s copy (its product's row first, once)."""
        assert self.world is not None
        pid = v["product_id"]
        if pid not in self.copies:
            lines = [line for line in PRODUCT_LINES if line not in self.lines]
            line = lines[self.world.randrange(len(lines))]
            self.lines.add(line)
            name = f"{line} {v['product']}"
            row = self.s.b.add(
                "products",
                name=name,
                slug=product_slug(name),
                category=v["category"],
                description=self.base.descriptions[pid],
            )
            self.copies[pid] = {}
            self.origin[row["id"]] = pid
            self.heads[pid] = (row["id"], name, self.s.b.code(5))
        if v["id"] in self.copies[pid]:
            return
        own_id, name, number = self.heads[pid]
        prefix, _, rest = v["sku"].partition("-")
        sku = f"{prefix}{number}-{rest}" if rest else f"{prefix}{number}"
        vid = self.s.b.add(
            "variants",
            product_id=own_id,
            sku=sku,
            options=v["options"],
            price=v["price"],
            stock=v["stock"],
            available=v["available"],
        )["id"]
        self.copies[pid][v["id"]] = {
            **v,
            "id": vid,
            "product_id": own_id,
            "sku": sku,
            "product": name,
        }
