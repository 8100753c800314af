"""The hard tier's refusals name every refused record, and its steps interact: in
`refund_then_bags` the cancel's refund decides which card pays the bags."""

from __future__ import annotations

import re
from typing import Any

from envs.airline.rules import BAG_FEE, FREE_BAGS
from envs.airline.tests.test_airline_worlds import declines, draw

DRAWS = 12


def _rows(task: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return list(task["seed"]["rows"].get(table, []))


def test_a_refusal_of_several_trips_names_each_and_only_them() -> None:
    """The decline's subject is every refused reservation, never the member's own id."""
    seen_several = False
    for n in range(DRAWS):
        task = draw("cancel_trips_to", n)
        if not declines(task) or task["expected_decline"] != "cancellation_not_allowed":
            continue
        records = task["expected_decline_records"]
        subject = task["ground_truth"][-1]["arguments"]["subject"]
        codes = {r["code"] for r in _rows(task, "reservations")}
        user = _rows(task, "users")[0]["user_code"]
        assert subject == records and set(records) <= codes and user not in records
        cancelled = {
            c["arguments"]["reservation_code"]
            for c in task["ground_truth"]
            if c["name"] == "cancel_reservation"
        }
        assert not cancelled & set(records)
        seen_several |= len(records) >= 2
    assert seen_several


def test_a_single_refusal_names_the_trip_not_the_member() -> None:
    for n in range(DRAWS):
        task = draw("refund_then_bags", n)
        if declines(task):
            subject = task["ground_truth"][-1]["arguments"]["subject"]
            codes = {r["code"] for r in _rows(task, "reservations")}
            assert subject in codes, subject


def _bags_decision(task: dict[str, Any]) -> tuple[float, float, float, float, bool]:
    """(gift card balance, refund to it, bag fee, floor, gift card pays) read from the seed."""
    gift = next(m for m in _rows(task, "payment_methods") if m["kind"] == "gift_card")
    tier = _rows(task, "users")[0]["membership"]
    by_code = {r["code"]: r for r in _rows(task, "reservations")}
    calls = {c["name"]: c["arguments"] for c in task["ground_truth"]}
    refund = 0.0
    if "cancel_reservation" in calls:
        rid = by_code[calls["cancel_reservation"]["reservation_code"]]["id"]
        refund = sum(
            p["amount"]
            for p in _rows(task, "payments")
            if p["reservation_id"] == rid and p["payment_method_id"] == gift["id"]
        )
    bags = calls["add_baggage"]
    r = by_code[bags["reservation_code"]]
    n = sum(1 for p in _rows(task, "passengers") if p["reservation_id"] == r["id"])
    before = next(b for b in _rows(task, "baggage") if b["reservation_id"] == r["id"])
    allowance = FREE_BAGS[tier][r["fare_class"]] * n
    total = before["checked_bags"] + bags["extra_bags"]
    fee = BAG_FEE * (max(0, total - allowance) - before["paid_bags"])
    found = re.search(
        r"at least (\d+\.\d\d) stays", task["responses_create_params"]["input"][-1]["content"]
    )
    assert found
    pays_gift = bags["payment_method_id"] == gift["code"]
    return gift["balance"], refund, fee, float(found.group(1)), pays_gift


def test_the_refund_decides_which_card_pays_the_bags() -> None:
    """The gift card pays exactly when the floor stays on it after the refund and the fee; in
    some draws it stays only because the refund came first (the other order picks the Visa)."""
    order_matters = exact = 0
    for n in range(DRAWS):
        task = draw("refund_then_bags", n)
        balance, refund, fee, floor, pays_gift = _bags_decision(task)
        after = round(balance + refund - fee, 2)
        assert pays_gift == (after >= floor), (task["task_id"], balance, refund, fee, floor)
        order_matters += pays_gift and round(balance - fee, 2) < floor
        exact += after == floor
    assert order_matters and exact
