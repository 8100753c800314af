"""The ledger task generator: story families, the plan of how many of each, and the builder.

`TASKGEN` is what `stategym tasks generate --env ledger` draws from (docs/generating_tasks.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

from app.sdk.replay import open_task_db
from app.sdk.taskgen import TaskGenerator, build_row, name_grid
from envs.ledger import ENVIRONMENT
from envs.ledger.taskgen import hard, multi, reads, talk, wire, writes
from envs.ledger.taskgen.details import omissions
from envs.ledger.taskgen.kit import NAMES, PHRASING, Ctx, Draft, Internal, Story

Family = Callable[[Ctx], Draft]
# (family, how many variants k = 0..n-1), in file order: lookups, requests the data decides
# (allowed or refused by one of the family's rules: writes.py), multi-step, conversations with
# the customer (talk.py).
PLAN: list[tuple[Family, int]] = [
    (reads.lookup_balance, 2), (reads.lookup_available, 2), (reads.lookup_fees, 1),
    (reads.lookup_transfer, 1),
    (writes.deposit, 2), (writes.withdraw, 2), (writes.transfer_own, 3),
    (writes.send_money, 2), (writes.pay_beneficiary, 2), (writes.add_and_pay, 2),
    (writes.lost_card, 2), (writes.freeze, 2), (writes.unfreeze, 2), (writes.reverse_fee, 2),
    (writes.release_hold, 2), (writes.repay_loan, 2), (writes.close_loan, 2),
    (writes.reverse_transaction, 2),
    (multi.close_savings, 2), (multi.reverse_duplicate_transfer, 1), (multi.payoff_loan, 1),
    (multi.close_with_hold, 1), (multi.secure_and_replace, 2), (multi.travel_prep, 1),
    (multi.loan_from_savings, 1), (multi.consolidate, 1), (multi.month_end, 1),
    (multi.repay_refuse_close, 1),
    (hard.fee_cleanup, 1), (hard.move_out, 1), (hard.budget_day, 1),
    (talk.talk_transfer, 3), (talk.talk_fee, 4), (talk.talk_change_mind, 3),
    (wire.wire_fees, 1),
]  # fmt: skip


@cache
def _internal() -> Internal:
    db, _ = open_task_db(ENVIRONMENT)
    try:
        return Internal(db)
    finally:
        db.close()


def build_task(
    index: int, fn: Family, k: int, rng: random.Random, names: list[tuple[str, str]]
) -> dict[str, Any]:
    """One self-checked task (the seeded and final states keep every ledger invariant): story
    `index` (its id block), variant k, names popped from `names`."""
    story = Story(index, rng, _internal())
    draft = fn(Ctx(story, k, names))
    seed = story.seed()
    draft = replace(draft, omissions=omissions(draft.prompt, draft.gold, seed))
    return build_row(ENVIRONMENT, index, draft, seed, invariants=True)


# The shared driver (stategym tasks generate) draws from these; the shipped set is every PLAN
# variant once (docs/generating_tasks.md).
# The shipped set draws every story's people from one list: every pairing of the pool's first
# and last names (stories now hold households, payees and spouses: more than the pool).
SHIPPED_NAMES = name_grid(
    sorted({first for first, _ in NAMES}), sorted({last for _, last in NAMES}), shuffle="ledger"
)
TASKGEN = TaskGenerator(
    env=ENVIRONMENT,
    plan=PLAN,
    names=NAMES,
    build=build_task,
    phrasing=PHRASING,
    shipped_names=SHIPPED_NAMES,
)
task_lines = TASKGEN.shipped
