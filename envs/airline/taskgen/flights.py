"""A world's own flight numbers: the base flights a story names or books, renumbered per task.

The base network's 18 numbers (`SG110`, ...) would otherwise be in the gold of 6-9 % of tasks,
so a policy could learn them. Inside a world (every generated draw) each base number the story
mentions (prompt, gold, answer, refusal) or seeds rows on (its bookings, a flight's status) is
renamed on all its dates to a number drawn from the task's seed: the route, schedule and
inventory stay the base's, the number is the task's own. The shipped set (built outside a
world) numbers each story's flights from its index, so its stories share none either.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any

from envs.airline.rules import ROUTES
from envs.airline.taskgen.kit import Draft, Network

BASE_NUMBERS = tuple(number for number, *_ in ROUTES)
_BASE = re.compile(r"\b(" + "|".join(BASE_NUMBERS) + r")\b")
# A world's numbers have four digits: never a base number's three (String(8) holds them).
_LOW, _HIGH = 1000, 10_000
# Outside a world, story `index` numbers its flights from _SHIPPED + _PER_STORY * index.
_SHIPPED, _PER_STORY = 2000, 20


def renumbered(
    draft: Draft, seed: dict[str, Any], net: Network, world: random.Random | None, index: int
) -> tuple[Draft, dict[str, Any]]:
    """`draft` and `seed` with the flights the story uses renumbered: drawn from `world`, or
    outside one (the shipped set) numbered by story `index`, so no two shipped stories share
    one. A distractor's story (in a world, an even `index`: the task's story is odd,
    app/taskgen/draw.py) keeps the base numbers: only its people and rows join the task's
    seed, and renaming base flights would be a base-row update, which keeps a distractor out."""
    if world is not None and index % 2 == 0:
        return draft, seed
    texts = [getattr(draft, f.name) for f in dataclasses.fields(draft)]
    named = set(_BASE.findall(json.dumps([t for t in texts if not callable(t)], default=str)))
    rows = seed.get("rows", {})
    seeded = [r["flight_id"] for r in rows.get("reservation_segments", ())]
    seeded += [r["id"] for r in rows.get("flights", ())]
    named.update(net.by_id[fid].number for fid in seeded if fid in net.by_id)
    if not named:
        return draft, seed
    if world is not None:
        drawn = world.sample(range(_LOW, _HIGH), len(named))
    else:
        if len(named) > _PER_STORY or _SHIPPED + _PER_STORY * (index + 1) > _HIGH:
            raise ValueError(f"shipped story {index} names {len(named)} flights: too many")
        drawn = [_SHIPPED + _PER_STORY * index + j for j in range(len(named))]
    new = {old: f"SG{n}" for old, n in zip(sorted(named), drawn, strict=True)}
    fields = {
        f.name: _sub(getattr(draft, f.name), new)
        for f in dataclasses.fields(draft)
        if not callable(getattr(draft, f.name))
    }
    return dataclasses.replace(draft, **fields), _renamed_seed(seed, net, new)


def _sub(value: Any, new: dict[str, str]) -> Any:
    """`value` with every renamed base number replaced (strings inside lists, dicts, tuples)."""
    if isinstance(value, str):
        return _BASE.sub(lambda m: new.get(m.group(0), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _sub(v, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_sub(v, new) for v in value]
    if isinstance(value, tuple):
        return tuple(_sub(v, new) for v in value)
    return value


def _renamed_seed(seed: dict[str, Any], net: Network, new: dict[str, str]) -> dict[str, Any]:
    """The seed with every date of each renamed number updated (merged into a flight's own
    update row, if the story has one: a seed never holds two rows of one key)."""
    rows = dict(seed.get("rows", {}))
    flights = [dict(r) for r in rows.get("flights", ())]
    by_id = {r["id"]: r for r in flights}
    for old in sorted(new):
        for fid in net.ids_of[old]:
            if fid in by_id:
                by_id[fid]["flight_number"] = new[old]
            else:
                by_id[fid] = {"id": fid, "flight_number": new[old]}
                flights.append(by_id[fid])
    rows["flights"] = flights
    # The seed's table order: flights stay first (SEED_TABLES), whatever was there before.
    ordered = {"flights": flights, **{t: r for t, r in rows.items() if t != "flights"}}
    return {**seed, "rows": ordered}
