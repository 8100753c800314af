"""The hard return sweep: every verdict follows from the policy's words (an oracle that reads
only the seeded rows and the request agrees with the gold), every verdict kind occurs, the gold
earns 1 and a no-op 0, and a policy that decides each record from one fact earns 0 on some draws.
Drawn through the real generator (distractors and all), scored by replay as /verify scores."""

from __future__ import annotations

import re
from collections import Counter
from datetime import date, datetime
from functools import cache
from typing import Any

import pytest

from app.cli.audit import ReplayScore
from app.taskgen import draw as D
from envs.retail import ENVIRONMENT
from envs.retail.taskgen import TASKGEN, _catalog
from envs.retail.taskgen.details import ORDER_INSTEAD

# Sweeps over 60 generated draws of a hard family: `make test-slow` (CI runs it).
pytestmark = pytest.mark.slow

DRAWS = 60
RETURN = "return_delivered_order_items"
TODAY = date(2026, 3, 14)


@cache
def draws() -> list[dict[str, Any]]:
    """60 draws of the family, built on first use (not at collection, on every xdist worker)."""
    pool = D.choices(TASKGEN, "train", ["return_sweep"])
    tasks: list[dict[str, Any]] = []
    attempt = 0
    while len(tasks) < DRAWS:
        built = D.draw(TASKGEN, "train", 4242, attempt, pool).task
        attempt += 1
        if built is not None:
            tasks.append({**built, "task_id": f"retail-train-sweep-{attempt:05d}"})
    return tasks


def _category(rows: dict[str, list[dict[str, Any]]], variant_id: int) -> str:
    """A line's category: the story's own product, or the base catalogue's."""
    own = {v["id"]: v["product_id"] for v in rows.get("variants", [])}
    if variant_id in own:
        return str(next(p["category"] for p in rows["products"] if p["id"] == own[variant_id]))
    return str(next(v["category"] for v in _catalog().variants if v["id"] == variant_id))


def verdicts(task: dict[str, Any], rule: str = "policy") -> dict[str, tuple[str, list[int]]]:
    """Order number -> (verdict, the lines to return) under the policy's "Return window" as
    written, read from the seeded rows and the request only. `rule` plays a one-fact policy:
    `window` ignores the exception, `any_member` ignores the category, `any_item` the
    membership, `no_cap` the limit."""
    rows = task["seed"]["rows"]
    request = task["responses_create_params"]["input"][-1]["content"]
    customer_id = task["ground_truth"][1]["arguments"]["customer_id"]
    customer = next(c for c in rows["customers"] if c["id"] == customer_id)
    member = customer["membership"] in ("silver", "gold")
    out: dict[str, tuple[str, list[int]]] = {}
    used = 0
    orders = sorted(
        (o for o in rows["orders"] if o["customer_id"] == customer_id),
        key=lambda o: (o["created_at"], o["id"]),
        reverse=True,
    )
    named = set(re.findall(r"#W\d+", request))
    if any(w in request for ws in ORDER_INSTEAD.values() for w in ws):  # "my latest order"
        named.add(orders[0]["order_number"])
    for o in orders:
        lines = sorted(
            (i for i in rows["order_items"] if i["order_id"] == o["id"]), key=lambda i: i["line_no"]
        )
        active = [i for i in lines if i["status"] == "active"]
        age = (TODAY - datetime.fromisoformat(o["created_at"]).date()).days
        if o["status"] != "delivered":
            out[o["order_number"]] = ("not_delivered", [])
        elif age <= 365 or rule == "window" and age <= 365:
            kind = "window" if len(active) == len(lines) else "window_part"
            out[o["order_number"]] = (kind, [i["variant_id"] for i in active])
        elif rule == "window":
            out[o["order_number"]] = ("outside", [])
        elif age > 730:
            out[o["order_number"]] = ("expired", [])
        else:
            long_life = _category(rows, lines[0]["variant_id"]) in ("electronics", "audio")
            ok_member = member or rule == "any_item"
            ok_item = long_life or rule == "any_member"
            if not ok_member:
                verdict = "membership" if long_life else "category_regular"
            elif not ok_item:
                verdict = "category"
            elif used < 3 or rule == "no_cap":
                verdict, used = "extension", used + 1
            else:
                verdict = "cap"
            back = [i["variant_id"] for i in active] if verdict == "extension" else []
            out[o["order_number"]] = (verdict, back)
    for number in named:
        if number not in out or out[number][0] == "not_delivered":
            out[number] = ("declined", [])
    return out


def _sku(rows: dict[str, list[dict[str, Any]]], variant_id: int) -> str:
    own = {v["id"]: v["sku"] for v in rows.get("variants", [])}
    return own.get(variant_id) or next(
        v["sku"] for v in _catalog().variants if v["id"] == variant_id
    )


def returns_of(task: dict[str, Any], rule: str = "policy") -> dict[str, list[str]]:
    rows = task["seed"]["rows"]
    return {
        number: [_sku(rows, v) for v in back]  # in line order, as the gold sends them
        for number, (_, back) in verdicts(task, rule).items()
        if back
    }


def gold_returns(task: dict[str, Any]) -> dict[str, list[str]]:
    return {
        c["arguments"]["order_number"]: list(c["arguments"]["skus"])
        for c in task["ground_truth"]
        if c["name"] == RETURN
    }


def test_the_gold_does_what_the_policy_says_record_by_record() -> None:
    """An oracle reading only the rows and the policy's words returns exactly the gold's lines
    and declines exactly the named orders the gold declines."""
    for task in draws():
        assert returns_of(task) == gold_returns(task), task["task_id"]
        declined = {n for n, (v, _) in verdicts(task).items() if v == "declined"}
        decline = [c for c in task["ground_truth"] if c["name"] == "decline_request"]
        assert bool(declined) == bool(decline), task["task_id"]
        if declined:
            records = task.get("expected_decline_records") or [decline[0]["arguments"]["subject"]]
            assert set(records) == declined, task["task_id"]


def test_every_verdict_occurs_and_the_boundaries_are_drawn() -> None:
    """Each verdict kind across the draws, the day-365 / 366 / 730 / 731 boundaries, one over
    the cap, and twins where everything or nothing qualifies."""
    kinds: Counter[str] = Counter()
    ages: set[int] = set()
    shapes: Counter[str] = Counter()
    for task in draws():
        got = verdicts(task)
        kinds.update(v for v, _ in got.values())
        rows = task["seed"]["rows"]
        for o in rows["orders"]:
            ages.add((TODAY - datetime.fromisoformat(o["created_at"]).date()).days)
        delivered = [v for v, _ in got.values() if v != "not_delivered" and v != "declined"]
        shapes["all" if all(v in ("window", "extension") for v in delivered) else "some"] += 1
        if not any(back for _, back in got.values()):
            shapes["none"] += 1
    wanted = {
        "window", "window_part", "extension", "cap", "category", "category_regular",
        "membership", "expired", "not_delivered", "declined",
    }  # fmt: skip
    assert wanted <= set(kinds), kinds
    assert {365, 366, 730, 731} <= ages
    assert shapes["all"] >= 3 and shapes["none"] >= 3, shapes


def test_gold_lengths_stay_in_the_hard_range() -> None:
    lengths = [len(t["ground_truth"]) for t in draws()]
    assert min(lengths) >= 15 and max(lengths) <= 30, (min(lengths), max(lengths))
    assert all(t["difficulty"] in (4, 5) for t in draws())  # the hard tier


@pytest.fixture(scope="module")
def score(tmp_path_factory: pytest.TempPathFactory) -> ReplayScore:
    return ReplayScore(ENVIRONMENT, tmp_path_factory.mktemp("sweep"), capacity=DRAWS)


def _played(task: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    """The gold with its returns replaced by what a one-fact policy returns (reads and the
    decline kept): a careful agent with one rule of the policy missing."""
    rows = task["seed"]["rows"]
    customer_id = task["ground_truth"][1]["arguments"]["customer_id"]
    visa = next(m["code"] for m in rows["payment_methods"] if m["customer_id"] == customer_id)
    calls = [c for c in task["ground_truth"] if c["name"] != RETURN]
    tail = [c for c in calls if c["name"] == "decline_request"]
    calls = [c for c in calls if c["name"] != "decline_request"]
    for number, skus in returns_of(task, rule).items():
        arguments = {
            "order_number": number,
            "customer_id": customer_id,
            "skus": skus,
            "reason": "no_longer_needed",
            "refund_method_id": visa,
        }
        calls.append({"name": RETURN, "arguments": arguments})
    return calls + tail


def test_gold_earns_one_and_a_no_op_zero(score: ReplayScore) -> None:
    for task in draws()[:12]:
        assert score(task, task["ground_truth"]) == 1.0, task["task_id"]
        assert score(task, []) == 0.0, task["task_id"]


@pytest.mark.parametrize("rule", ["window", "any_member", "any_item", "no_cap"])
def test_a_policy_missing_one_fact_fails_some_draws(score: ReplayScore, rule: str) -> None:
    """Each one-fact policy returns another set of lines on some draws, and there earns 0;
    where it happens to agree with the policy it earns 1 (the replay plays it for real)."""
    differs = [t for t in draws() if returns_of(t, rule) != returns_of(t)]
    assert len(differs) >= 5, (rule, len(differs))
    for task in differs[:3]:
        assert score(task, _played(task, rule)) == 0.0, (rule, task["task_id"])
    same = next(t for t in draws() if returns_of(t, rule) == returns_of(t))
    assert score(same, _played(same, rule)) == 1.0, (rule, same["task_id"])


def test_the_exception_and_its_limit_decide_a_share_of_draws() -> None:
    """The exception changes the verdicts of a fair share of draws (a member's long-life item
    past 365 days), and the limit of three binds on some."""
    exception = [t for t in draws() if returns_of(t, "window") != returns_of(t)]
    binds = [t for t in draws() if returns_of(t, "no_cap") != returns_of(t)]
    assert len(exception) >= DRAWS // 5 and len(binds) >= DRAWS // 12, (len(exception), len(binds))
