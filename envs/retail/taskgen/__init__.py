"""The retail task generator: story families, the plan of how many of each, and the builder.

`TASKGEN` is what `stategym tasks generate --env retail` draws from (docs/generating_tasks.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

from app.sdk.replay import open_task_db
from app.sdk.taskgen import TaskGenerator, build_row
from envs.retail import ENVIRONMENT
from envs.retail.taskgen.clearout import clear_out
from envs.retail.taskgen.details import omissions
from envs.retail.taskgen.hard import account_cleanup, cancel_sweep
from envs.retail.taskgen.kit import (
    NAMES,
    NOW,
    PHRASING,
    SHIPPED_CITIES,
    Catalog,
    Ctx,
    Draft,
    Story,
)
from envs.retail.taskgen.multi import (
    cancel_and_return,
    cancel_one_of_two,
    cancel_two,
    exchange_and_cancel,
    move_everything,
    return_and_exchange,
    return_and_repay,
    rework_order,
)
from envs.retail.taskgen.products import OwnCatalog
from envs.retail.taskgen.reads import (
    lookup_catalog,
    lookup_gift_balance,
    lookup_order_total,
    lookup_price,
    lookup_spend,
    refuse_gift_balance,
    refuse_other_customer,
    refuse_out_of_stock,
    refuse_status,
    refuse_unauthenticated,
)
from envs.retail.taskgen.returnsweep import return_sweep
from envs.retail.taskgen.talk import talk_cancel, talk_return, talk_switch
from envs.retail.taskgen.writes import (
    cancel,
    exchange,
    modify_address,
    modify_items,
    modify_payment,
    return_items,
    update_default_address,
)

Family = Callable[[Ctx], Draft]
# (family, how many variants k = 0..n-1), in file order.
PLAN: list[tuple[Family, int]] = [
    (lookup_catalog, 2), (lookup_price, 2), (lookup_gift_balance, 2), (lookup_order_total, 2),
    (lookup_spend, 1), (refuse_unauthenticated, 1), (refuse_status, 4), (refuse_other_customer, 1),
    (refuse_out_of_stock, 1), (refuse_gift_balance, 1), (update_default_address, 2), (cancel, 4),
    (modify_address, 3), (modify_payment, 2), (modify_items, 4), (return_items, 3), (exchange, 4),
    (cancel_two, 1), (cancel_one_of_two, 1), (cancel_and_return, 1), (move_everything, 2),
    (exchange_and_cancel, 1), (rework_order, 1), (return_and_repay, 1), (return_and_exchange, 1),
    (account_cleanup, 2), (cancel_sweep, 2), (clear_out, 2),
    (talk_cancel, 2), (talk_return, 2), (talk_switch, 2), (return_sweep, 2),
]  # fmt: skip


@cache
def _catalog() -> Catalog:
    db, _ = open_task_db(ENVIRONMENT)
    try:
        return Catalog(db)
    finally:
        db.close()


def build_task(
    index: int, fn: Family, k: int, rng: random.Random, names: list[tuple[str, str]]
) -> dict[str, Any]:
    """One self-checked task: story `index` (its id block), variant k, names popped from `names`."""
    story = Story(index, NOW, rng)
    cat = _catalog()
    cat.prefer_fresh = story.b.world is None  # the shipped set: see Catalog.fresh
    if cat.prefer_fresh and index == 1:
        cat.stale.clear()
        cat.looked_up.clear()
        SHIPPED_CITIES.clear()
    draft = fn(Ctx(story, OwnCatalog(cat, story), k, names))
    if cat.prefer_fresh:
        cat.stale |= cat.named(draft.gold)
        cat.looked_up |= {
            c["arguments"]["product_id"]
            for c in draft.gold
            if isinstance(c["arguments"].get("product_id"), int)
        }
        SHIPPED_CITIES.update(
            c["arguments"]["city"] for c in draft.gold if c["arguments"].get("city")
        )
    seed = story.seed()
    draft = replace(draft, omissions=omissions(draft.prompt, draft.gold, seed))
    return build_row(ENVIRONMENT, index, draft, seed, after=_check_lookups)


def _check_lookups(task: dict[str, Any], results: list[Any]) -> None:
    """Name + zip lookups find exactly one account, except where the gold declines because
    none matches (the zip the customer gives is not theirs)."""
    for call_, result in zip(task["ground_truth"], results, strict=True):
        if call_["name"] == "find_customer_by_name_zip":
            want = 0 if task.get("expected_decline") == "not_authenticated" else 1
            assert len(result["matches"]) == want, (task["task_id"], result)


# The shared driver (stategym tasks generate) draws from these; the shipped set is every PLAN
# variant once (docs/generating_tasks.md).
TASKGEN = TaskGenerator(
    env=ENVIRONMENT, plan=PLAN, names=NAMES, build=build_task, phrasing=PHRASING
)
task_lines = TASKGEN.shipped
