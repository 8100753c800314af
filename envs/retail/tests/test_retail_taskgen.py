"""Retail's generated stories teach: each is its own world, the data decides the outcome, the
hard tier is long and fair. Built through the real generator (gold replayed on real SQLite)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

import pytest

from app.authoring.taskgen import own_world
from envs.retail.policy import DECLINE_REASONS
from envs.retail.taskgen import NAMES, PLAN, build_task

FAMILIES = {fn.__name__: (fn, n) for fn, n in PLAN}
# Families whose request the data may permit or forbid (every single-request family).
TWINNED = [
    "refuse_unauthenticated", "refuse_status", "refuse_other_customer", "refuse_out_of_stock",
    "refuse_gift_balance", "cancel", "modify_address", "modify_payment", "modify_items",
    "return_items", "exchange", "account_cleanup", "cancel_two", "return_and_repay", "cancel_sweep",
]  # fmt: skip
IDS = re.compile(r"#W\d+|(?:gift_card|card|store_credit)_\d+|[\w.]+@[\w.]+")


def story(name: str, k: int, n: int) -> dict[str, Any]:
    """Story n of family `name`, variant k, in its own world (as every generated draw is)."""
    fn, _ = FAMILIES[name]
    names = list(NAMES)
    random.Random(n).shuffle(names)
    with own_world(random.Random(f"world/{name}/{k}/{n}")):
        return build_task(1, fn, k, random.Random(f"story/{name}/{k}/{n}"), names)


@pytest.mark.parametrize("name", TWINNED)
def test_the_data_decides_allowed_or_forbidden(name: str) -> None:
    """Each twinned family both acts and declines, about half and half, and its forbidden
    twins break more than one rule (the wording does not give the code away)."""
    outcomes: Counter[str | None] = Counter()
    for n in range(24):
        task = story(name, 0, n)
        code = task.get("expected_decline")
        outcomes[code] += 1
        if code is not None:
            assert code in DECLINE_REASONS
            assert task["ground_truth"][-1]["arguments"]["reason"] == code
    declined = sum(v for k, v in outcomes.items() if k is not None)
    assert 5 <= declined <= 19, outcomes
    if name not in (
        "cancel_two",
        "return_and_repay",
        "cancel_sweep",
    ):  # two requests, one rule each
        assert len([k for k in outcomes if k is not None]) >= 2, outcomes


def test_no_identifier_is_shared_between_stories() -> None:
    """Order numbers, payment codes and emails come from each story's world."""
    seen: Counter[str] = Counter()
    for name in ("cancel", "modify_payment", "return_items", "lookup_gift_balance"):
        for n in range(10):
            seen.update(set(IDS.findall(json.dumps(story(name, 0, n)["ground_truth"]))))
    assert seen and seen.most_common(1)[0][1] == 1, seen.most_common(3)


def test_lookup_answers_vary() -> None:
    """A replayed answer of another task is wrong: balances, prices, product lists differ."""
    for name, k in (("lookup_gift_balance", 0), ("lookup_price", 0), ("lookup_catalog", 1)):
        answers = {json.dumps(story(name, k, n)["expected_answer"]["value"]) for n in range(12)}
        assert len(answers) >= 10, (name, answers)


def test_requests_open_with_who_is_speaking_not_a_greeting() -> None:
    """The draw's voice adds greetings; a family's own "Hi, ..." made "Good morning. Hi, ...".
    Every family's request opens without one."""
    for name, (_fn, variants) in FAMILIES.items():
        for k in range(variants):
            prompt = story(name, k, 0)["responses_create_params"]["input"][-1]["content"]
            assert not re.match(r"(Hi|Hello|Hey|Good \w+|Quick \w+)\b", prompt), (name, prompt)


def test_hard_tier_is_long_and_its_condition_goes_both_ways() -> None:
    for name in ("account_cleanup", "cancel_sweep", "clear_out"):
        lengths: list[int] = []
        switched: Counter[bool] = Counter()
        declined = 0
        for k in (0, 1):
            for n in range(6):
                task = story(name, k, n)
                gold = task["ground_truth"]
                lengths.append(len(gold))
                switched[any(c["name"] == "modify_pending_order_payment" for c in gold)] += 1
                declined += "expected_decline" in task
                if name == "account_cleanup":  # the return is found among 25-40 orders
                    assert len(task["seed"]["rows"]["orders"]) >= 28
        assert min(lengths) >= 10 and max(lengths) <= 30, (name, lengths)
        assert switched[True] and switched[False], (name, switched)
        assert (0 < declined < 12) == (name != "clear_out"), (name, declined)


def test_hard_declines_name_the_refused_orders() -> None:
    """The decline's subject is the refused order (never the customer's own pending one), and a
    sweep that hits several shipped orders names each of them and nothing else."""
    for n in range(10):
        task = story("account_cleanup", 0, n)
        if "expected_decline" in task:
            cancel = next(
                c
                for c in task["ground_truth"]
                if c["name"] == "get_order_details"
                and c["arguments"]["order_number"]
                in task["responses_create_params"]["input"][-1]["content"].split(
                    "cancel my order "
                )[1][:10]
            )
            assert task["expected_decline_subject"] == [cancel["arguments"]["order_number"]]
    several = 0
    for n in range(16):
        task = story("cancel_sweep", 0, n)
        if "expected_decline" not in task:
            continue
        cancelled = {
            c["arguments"]["order_number"]
            for c in task["ground_truth"]
            if c["name"] == "cancel_pending_order"
        }
        refused = task.get("expected_decline_records") or task["expected_decline_subject"]
        orders = {o["order_number"]: o for o in task["seed"]["rows"]["orders"]}
        assert refused and all(orders[r]["status"] in ("processed", "shipped") for r in refused)
        assert not cancelled & set(refused)
        several += len(refused) > 1
    assert several


def test_cancel_sweep_spares_the_order_of_the_day_before() -> None:
    """The cutoff day is included, the day before is not: a pending order placed on March 8
    stays, every pending one from March 9 on is cancelled."""
    for n in range(6):
        task = story("cancel_sweep", 0, n)
        cancelled = {
            c["arguments"]["order_number"]
            for c in task["ground_truth"]
            if c["name"] == "cancel_pending_order"
        }
        pending = [o for o in task["seed"]["rows"]["orders"] if o["status"] == "pending"]
        for o in pending:
            assert (o["order_number"] in cancelled) == (o["created_at"] >= "2026-03-09"), o
        assert any(o["created_at"][:10] == "2026-03-08" for o in pending)


def test_clear_out_returns_the_month_only_and_sums_what_it_returned() -> None:
    """Orders minutes outside the month, a cancelled one and a line returned already give
    nothing back; each order's lines go back in one call; the answer is their sum."""
    for n in range(6):
        task = story("clear_out", n % 2, n)
        rows = task["seed"]["rows"]
        orders = {o["order_number"]: o for o in rows["orders"]}
        returns = [c["arguments"] for c in task["ground_truth"] if c["name"].startswith("return_")]
        months = {orders[r["order_number"]]["created_at"][:7] for r in returns}
        assert len(months) == 1 and len(returns) == len({r["order_number"] for r in returns})
        (month,) = months
        edges = [o for o in rows["orders"] if o["created_at"][:7] != month]
        assert any(o["created_at"].endswith("T00:05:00") for o in edges)
        lines = {(i["order_id"], i["variant_id"]): i for i in rows["order_items"]}
        skus = {v["id"]: v["sku"] for v in rows["variants"]}
        total = 0.0
        for r in returns:
            oid = orders[r["order_number"]]["id"]
            for (o, vid), line in lines.items():
                if o == oid and skus.get(vid) in r["skus"]:
                    assert line["status"] == "active"
                    total += line["unit_price"] * line["quantity"]
        assert task["expected_answer"]["value"] == f"{total:.2f}"
