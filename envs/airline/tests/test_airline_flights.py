"""Every generated airline story flies on numbers of its own: the base flights it names or
books are renamed (all their dates) to numbers drawn from its world (envs/airline/taskgen/
flights.py), so no flight number recurs across draws; a distractor's story keeps the base
numbers (it joins the task's seed only with rows of its own); the shipped set numbers each
story's flights by its index."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.sdk.taskgen import own_world
from app.taskgen import draw as D
from app.taskgen.distract import updates_base
from envs.airline.taskgen import PLAN, TASKGEN, build_task
from envs.airline.taskgen.flights import BASE_NUMBERS
from envs.airline.taskgen.kit import NAMES

FAMILIES = {fn.__name__: fn for fn, _ in PLAN}
FLIGHT_FAMILIES = ("lookup_flight_status", "lookup_connection", "change_flights",
                   "book_round_trip", "compensation", "trip_overhaul")  # fmt: skip
NUMBER = re.compile(r"\bSG\d{3,4}\b")
TASKS = Path(__file__).resolve().parents[1] / "tasks.jsonl"


def story(name: str, n: int, index: int = 1) -> dict[str, Any]:
    names = list(NAMES)
    random.Random(n).shuffle(names)
    with own_world(random.Random(f"f/{name}/{n}/world")):
        return build_task(index, FAMILIES[name], 0, random.Random(f"f/{name}/{n}"), names)


def named(task: dict[str, Any]) -> set[str]:
    """The flight numbers of the request, the gold and the expected answer."""
    request = task["responses_create_params"]["input"][-1]
    text = json.dumps([request, task["ground_truth"], task.get("expected_answer")])
    return set(NUMBER.findall(text))


def test_a_world_renames_every_flight_it_names() -> None:
    seen: Counter[str] = Counter()
    for name in FLIGHT_FAMILIES:
        for n in range(5):
            task = story(name, n)
            numbers = named(task)
            assert numbers and not numbers & set(BASE_NUMBERS), (name, numbers)
            rows = task["seed"]["rows"]["flights"]
            renamed = {r["flight_number"] for r in rows if "flight_number" in r}
            assert numbers <= renamed, (name, numbers - renamed)
            seen.update(numbers)
    # 9,000 four-digit numbers: two of 30 draws may meet by chance, a base number in all.
    assert seen.most_common(1)[0][1] <= 2, seen.most_common(3)


def test_a_distractors_story_keeps_the_base_numbers() -> None:
    task = story("book_one_way", 0, index=2)
    rows = task["seed"]["rows"].get("flights", [])
    assert not any("flight_number" in r for r in rows)
    assert named(task) & set(BASE_NUMBERS)


def test_no_two_shipped_stories_share_a_flight_number() -> None:
    seen: Counter[str] = Counter()
    for line in TASKS.read_text().splitlines():
        seen.update(named(json.loads(line)))
    assert seen and not set(seen) & set(BASE_NUMBERS)
    assert seen.most_common(1)[0][1] == 1, seen.most_common(3)


BOOKING = ("book_one_way", "book_round_trip", "book_one_stop")


@pytest.mark.parametrize("family", BOOKING)
def test_a_booking_familys_distractor_story_joins_the_seed(family: str) -> None:
    """A booking story's forbidden twin fills or cancels a base flight, a base-row update that
    keeps a distractor out: a distractor's story is the allowed twin, rows of its own only."""
    for n in range(8):
        other = story(family, n, index=2)
        assert not updates_base(other), (family, n)
        assert other["ground_truth"][-1]["name"] == "book_reservation", (family, n)


def test_most_generated_booking_draws_hold_a_distractor() -> None:
    """Every draw that tries a distractor (nine in ten) keeps one: its gold's results are the
    same with the namesake member in the seed."""
    pool = D.choices(TASKGEN, "train", list(BOOKING))
    built = [D.draw(TASKGEN, "train", 4242, attempt, pool).task for attempt in range(30)]
    tasks = [t for t in built if t is not None]
    with_one = sum(bool(t["distractors"]) for t in tasks)
    assert with_one >= 0.7 * len(tasks), (with_one, len(tasks))
