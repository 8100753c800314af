"""Every generated retail story orders, prices and swaps products of its own (copies of base
products under new ids, SKUs and names, envs/retail/taskgen/products.py), so no product id or
SKU recurs across the golds of draws; the shipped set, built outside a world, keeps the base's."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

from app.sdk.taskgen import STORY_ID_FLOOR, own_world
from envs.retail.taskgen import NAMES, PLAN, build_task

FAMILIES = {fn.__name__: fn for fn, _ in PLAN}
# Families whose gold reads a product or passes SKUs (exchanges, item changes, lookups).
PRODUCT_FAMILIES = (("exchange", 0), ("modify_items", 0), ("lookup_price", 0),
                    ("lookup_catalog", 1), ("refuse_out_of_stock", 0))  # fmt: skip


def story(name: str, k: int, n: int, world: bool = True) -> dict[str, Any]:
    """Story n of family `name`, in its own world (as a generated draw) or outside one."""
    names = list(NAMES)
    random.Random(n).shuffle(names)
    rng = random.Random(f"p/{name}/{n}")
    if not world:
        return build_task(1, FAMILIES[name], k, rng, names)
    with own_world(random.Random(f"p/{name}/{k}/{n}/world")):
        return build_task(1, FAMILIES[name], k, rng, names)


def gold_products(task: dict[str, Any]) -> tuple[set[int], set[str]]:
    """The product ids and SKUs the gold names (arguments and the submitted answer)."""
    ids: set[int] = set()
    skus: set[str] = set()
    for call in task["ground_truth"]:
        args = call["arguments"]
        if isinstance(args.get("product_id"), int):
            ids.add(args["product_id"])
        for key in ("skus", "from_skus", "to_skus", "new_skus", "old_skus"):
            skus.update(args.get(key) or ())
    answer = (task.get("expected_answer") or {}).get("value")
    if isinstance(answer, list) and all(re.fullmatch(r"[A-Z]+\d*-.*", str(a)) for a in answer):
        skus.update(answer)
    return ids, skus


def test_a_worlds_products_are_its_own_rows() -> None:
    """Every product id and SKU a gold names is a row the task's seed adds (its own copy),
    named "<line> <base name>", with the base product's variants."""
    for name, k in PRODUCT_FAMILIES:
        for n in range(6):
            task = story(name, k, n)
            rows = task["seed"]["rows"]
            products = {r["id"]: r for r in rows.get("products", [])}
            variants = {r["sku"]: r for r in rows.get("variants", []) if "sku" in r}
            ids, skus = gold_products(task)
            assert ids and all(i >= STORY_ID_FLOOR and i in products for i in ids), (name, ids)
            assert skus <= set(variants), (name, skus - set(variants))
            for sku in skus:
                assert variants[sku]["product_id"] in products
            for p in products.values():
                assert p["name"].count(" ") >= 1 and p["slug"] == p["name"].lower().replace(
                    " ", "-"
                )


def test_no_product_recurs_across_draws() -> None:
    seen: Counter[str] = Counter()
    for name, k in PRODUCT_FAMILIES:
        for n in range(8):
            ids, skus = gold_products(story(name, k, n))
            seen.update({f"product_id={i}" for i in ids} | skus)
    assert seen and seen.most_common(1)[0][1] == 1, seen.most_common(3)


def test_outside_a_world_the_base_catalogue_is_used() -> None:
    """The shipped set's stories name base products (ids below the floor) and copy none."""
    task = story("exchange", 0, 1, world=False)
    ids, _ = gold_products(task)
    assert ids and all(i < STORY_ID_FLOOR for i in ids)
    assert "products" not in task["seed"]["rows"]
    assert json.dumps(task) == json.dumps(story("exchange", 0, 1, world=False))
