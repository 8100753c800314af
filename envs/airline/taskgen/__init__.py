"""The airline task generator: story families, the plan of how many of each, and the builder.

`TASKGEN` is what `stategym tasks generate --env airline` draws from (docs/generating_tasks.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

from app.sdk.replay import open_task_db
from app.sdk.taskgen import TaskGenerator, build_row
from envs.airline import ENVIRONMENT
from envs.airline.taskgen.claims import compensation_sweep
from envs.airline.taskgen.details import omissions
from envs.airline.taskgen.flights import renumbered
from envs.airline.taskgen.hard import bag_fee_quote, cancel_trips_to, refund_then_bags
from envs.airline.taskgen.kit import NAMES, PHRASING, SHIPPED_NAMES, Ctx, Draft, Network, Story
from envs.airline.taskgen.multi import (
    book_with_seats,
    cancel_and_compensate,
    cancel_one_refuse_other,
    change_and_bags,
    compensate_and_rebook,
    fix_upgrade_seat,
    trip_overhaul,
    upgrade_and_seats,
)
from envs.airline.taskgen.reads import (
    lookup_airports,
    lookup_certificate,
    lookup_connection,
    lookup_fare,
    lookup_flight_status,
    lookup_paid_total,
    lookup_seat,
    refuse_basic_change,
    refuse_cancel,
    refuse_compensation,
    refuse_departed,
    refuse_full_cabin,
    refuse_other_member,
    refuse_seat_basic,
)
from envs.airline.taskgen.talk import talk_add_bags, talk_cancel, talk_change_cabin
from envs.airline.taskgen.writes import (
    add_baggage,
    assign_seat,
    book_one_stop,
    book_one_way,
    book_round_trip,
    cancel_allowed,
    change_cabin,
    change_flights,
    compensation,
    update_passengers,
)

Family = Callable[[Ctx], Draft]
# (family, how many variants k = 0..n-1), in file order.
PLAN: list[tuple[Family, int]] = [
    (lookup_flight_status, 3), (lookup_fare, 2), (lookup_airports, 1), (lookup_connection, 1),
    (lookup_paid_total, 1), (lookup_certificate, 1), (lookup_seat, 1),
    (refuse_cancel, 2), (refuse_basic_change, 1), (refuse_departed, 1), (refuse_compensation, 1),
    (refuse_other_member, 1), (refuse_seat_basic, 1), (refuse_full_cabin, 1),
    (book_one_way, 3), (book_round_trip, 2), (book_one_stop, 1), (cancel_allowed, 4),
    (change_flights, 3), (change_cabin, 3), (update_passengers, 2), (add_baggage, 3),
    (assign_seat, 2), (compensation, 3),
    (cancel_and_compensate, 1), (cancel_one_refuse_other, 1), (upgrade_and_seats, 2),
    (book_with_seats, 1), (change_and_bags, 1), (fix_upgrade_seat, 1), (trip_overhaul, 1),
    (compensate_and_rebook, 1), (cancel_trips_to, 2), (bag_fee_quote, 1), (refund_then_bags, 2),
    (talk_cancel, 3), (talk_add_bags, 3), (talk_change_cabin, 3), (compensation_sweep, 2),
]  # fmt: skip


@cache
def _network() -> Network:
    db, _ = open_task_db(ENVIRONMENT)
    try:
        return Network(db)
    finally:
        db.close()


def build_task(
    index: int, fn: Family, k: int, rng: random.Random, names: list[tuple[str, str]]
) -> dict[str, Any]:
    """One self-checked task: story `index` (its id block), variant k, names popped from `names`."""
    net = _network()
    story = Story(index, net, rng)
    draft = fn(Ctx(story, net, k, names))
    draft, seed = renumbered(draft, story.seed(), net, story.b.world, index)
    draft = replace(draft, omissions=omissions(draft.prompt, draft.gold, seed))
    return build_row(ENVIRONMENT, index, draft, seed)


# The shared driver (stategym tasks generate) draws from these; the shipped set is every PLAN
# variant once (docs/generating_tasks.md).
TASKGEN = TaskGenerator(
    env=ENVIRONMENT,
    plan=PLAN,
    names=NAMES,
    build=build_task,
    phrasing=PHRASING,
    shipped_names=SHIPPED_NAMES[::-1],
)
task_lines = TASKGEN.shipped
