"""Generated airline tasks teach reading the data: every draw is its own world (ids, codes and
flights from its seed), the same request is allowed in one world and forbidden in another (the
wording never predicts the outcome), and another task's gold replayed on a new task earns 0."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from app.authoring.taskgen import own_world
from app.taskgen.draw import STORY_INDEX
from envs.airline.taskgen import PLAN, build_task
from envs.airline.taskgen.kit import GO, NAMES

FAMILIES = {fn.__name__: fn for fn, _ in PLAN}
# Refusal families (allowed twins) and action families with a rule (forbidden twins).
TWINS = (
    "refuse_cancel refuse_basic_change refuse_departed refuse_compensation refuse_other_member "
    "refuse_seat_basic refuse_full_cabin book_one_way book_round_trip book_one_stop "
    "cancel_allowed change_flights change_cabin update_passengers add_baggage assign_seat "
    "compensation cancel_trips_to refund_then_bags talk_cancel talk_add_bags talk_change_cabin"
).split()
DRAWS = 10


def draw(family: str, n: int, k: int = 0) -> dict[str, Any]:
    """Draw n of a family as `tasks generate` does: its own world, its own story stream."""
    names = list(NAMES)
    random.Random(n).shuffle(names)
    with own_world(random.Random(f"{family}/{n}/world")):
        return build_task(STORY_INDEX, FAMILIES[family], k, random.Random(f"{family}/{n}"), names)


def declines(task: dict[str, Any]) -> bool:
    return task["ground_truth"][-1]["name"] == "decline_request"


def shape(task: dict[str, Any]) -> str:
    """The request with its world's particulars (names, numbers, codes, dates) masked."""
    text = task["responses_create_params"]["input"][-1]["content"]
    text = re.sub(r"\b[A-Z][a-z]+\b", "N", text)
    text = re.sub(r"\b[A-Z]{3}\b", "A", text)  # airport codes
    return re.sub(r"[A-Za-z0-9_.@-]*\d[A-Za-z0-9_.@-]*", "#", text)


@pytest.mark.parametrize("family", TWINS)
def test_the_data_decides_not_the_wording(family: str) -> None:
    tasks = [draw(family, n) for n in range(DRAWS)]
    outcomes = {declines(t) for t in tasks}
    assert outcomes == {True, False}, f"{family}: every draw ends the same way"
    allowed = {shape(t) for t in tasks if not declines(t)}
    forbidden = {shape(t) for t in tasks if declines(t)}
    assert allowed & forbidden, f"{family}: the wording tells the twins apart"


def test_every_draw_is_its_own_world() -> None:
    """No reservation code, user id or payment method recurs across draws of one family."""
    seen: dict[str, int] = {}
    for family in ("cancel_allowed", "add_baggage", "refuse_cancel", "compensation"):
        for n in range(DRAWS):
            rows = draw(family, n)["seed"]["rows"]
            values = {r["code"] for r in rows.get("reservations", [])}
            values |= {r["user_code"] for r in rows.get("users", [])}
            values |= {r["code"] for r in rows.get("payment_methods", [])}
            for v in values:
                seen[v] = seen.get(v, 0) + 1
    assert seen and max(seen.values()) == 1


def test_compensation_requests_carry_the_confirmation_the_policy_asks() -> None:
    """The policy asks for explicit confirmation before every change: a compensation request
    that the data allows states it, so an agent that would ask first is not scored 0."""
    for family in ("compensation", "refuse_compensation", "cancel_trips_to"):
        for n in range(4):
            task = draw(family, n)
            assert GO in task["responses_create_params"]["input"][-1]["content"]


def test_another_draws_gold_earns_nothing() -> None:
    """The shortcut a memorising policy takes: the gold of one draw replayed on another."""
    from app.authoring.replay import dump, open_task_db, replay
    from envs.airline import ENVIRONMENT

    for family in ("cancel_allowed", "add_baggage", "change_cabin"):
        tasks = [t for t in (draw(family, n) for n in range(DRAWS)) if not declines(t)][:2]
        a, b = tasks
        states = []
        for gold in (a["ground_truth"], b["ground_truth"]):
            db, now = open_task_db(ENVIRONMENT, a["seed"])
            try:
                for call in gold:  # as an agent would: a refused call changes nothing
                    try:
                        replay(db, ENVIRONMENT, [call], now)
                    except Exception:  # noqa: BLE001, S110 - the other world's ids fail here
                        pass
                states.append(dump(db, ENVIRONMENT))
            finally:
                db.close()
        assert states[0] != states[1], f"{family}: another draw's gold reached the same state"


def test_a_rows_kind_follows_its_outcome_not_its_family() -> None:
    """A forbidden twin of an action family is a refusal; an allowed twin of a refusal family
    is a write (the kind a generated row carries, app/taskgen/kit.py)."""
    from app.taskgen.kit import kind
    from envs.airline.taskgen import TASKGEN

    for family in ("cancel_allowed", "refuse_cancel"):
        tasks = [draw(family, n) for n in range(DRAWS)]
        kinds = {declines(t): kind(TASKGEN, t["ground_truth"], family) for t in tasks}
        assert kinds == {True: "refusal", False: "write"}, family
