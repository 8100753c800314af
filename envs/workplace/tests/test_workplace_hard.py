"""The hard tier's deciding facts are where the family says (generated rows, read from their
seeds): several refused deals named one by one, a meeting no earlier than the asked time when an
earlier hour is free, a discount tier the corrected quote decides, a close date of today."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from app.taskgen.draw import choices, draw
from app.taskgen.registry import load_generator

GEN = load_generator("workplace")


def _draws(family: str, n: int, seed: int = 5) -> list[dict[str, Any]]:
    pool = choices(GEN, "train", [family])
    return [t for i in range(n) if (t := draw(GEN, "train", seed, i, pool).task) is not None]


def _rows(t: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return list(t["seed"]["rows"].get(table, []))


def test_a_handover_refusing_several_deals_names_each_of_them() -> None:
    tasks = _draws("account_handover", 24)
    several = [t for t in tasks if len(t.get("expected_decline_records") or []) >= 2]
    assert several, "no draw refused two deals"
    for t in several:
        records = t["expected_decline_records"]
        decline = t["ground_truth"][-1]
        assert decline["name"] == "decline_request" and decline["arguments"]["subject"] == records
        handed = {c["arguments"]["code"] for c in t["ground_truth"] if c["name"] == "reassign_deal"}
        looked = {c["arguments"]["code"] for c in t["ground_truth"] if c["name"] == "get_deal"}
        assert set(records) <= looked and not set(records) & handed


def _busy(t: dict[str, Any], day: date, people: set[int]) -> list[tuple[datetime, datetime]]:
    ids = {a["event_id"] for a in _rows(t, "event_attendees") if a["employee_id"] in people}
    spans = []
    for ev in _rows(t, "events"):
        start, end = datetime.fromisoformat(ev["start_at"]), datetime.fromisoformat(ev["end_at"])
        if ev["id"] in ids and start.date() == day and ev["status"] == "confirmed":
            spans.append((start, end))
    return spans


def test_a_busy_handover_meeting_starts_no_earlier_than_asked_though_earlier_hours_are_free() -> (
    None
):
    tasks = [
        t
        for t in _draws("account_handover", 24)
        if any(c["name"] == "find_free_slot" for c in t["ground_truth"])
    ]
    assert tasks
    for t in tasks:
        find = next(c for c in t["ground_truth"] if c["name"] == "find_free_slot")
        book = next(c for c in t["ground_truth"] if c["name"] == "create_event")
        day = date.fromisoformat(find["arguments"]["day"])
        clock = datetime.strptime(find["arguments"]["earliest"], "%H:%M").time()
        earliest = datetime.combine(day, clock)
        start = datetime.fromisoformat(book["arguments"]["start"])
        assert start > earliest  # busy at the asked time, booked later
        emails = {e["email"]: e["id"] for e in _rows(t, "employees")}
        user = _rows(t, "assistant_profile")[0]["employee_id"]
        people = {emails[find["arguments"]["attendee_emails"][0]], user}
        spans = _busy(t, day, people)
        # The first free hour from 09:00 (what a slot finder without `earliest` answers).
        slot = datetime.combine(day, datetime.min.time()).replace(hour=9)
        while any(s < slot + timedelta(hours=1) and e > slot for s, e in spans):
            slot += timedelta(minutes=30)
        assert slot < earliest, t["task_id"]


_TIERS = re.compile(r"discount is (\d+)% when that total is \$([\d,.]+) or more and (\d+)%")
_LINE = re.compile(r"^(\w+): ([\d,]+\.\d\d)$", re.M)


def _corrected(items: dict[str, Decimal], text: str) -> None:
    if m := re.search(r"remove the (\w+) line", text):
        del items[m.group(1)]
    elif m := re.search(r"(\w+) should be ([\d,]+\.\d\d)", text):
        items[m.group(1)] = Decimal(m.group(2).replace(",", ""))


def test_the_discount_tier_follows_the_corrected_quote_not_the_original() -> None:
    flipped = 0
    tasks = _draws("quote_close", 30)
    assert tasks
    for t in tasks:
        mails = {m["message_id"]: m for m in _rows(t, "messages")}
        quote = mails[t["ground_truth"][1]["arguments"]["message_id"]]
        items = {k: Decimal(v.replace(",", "")) for k, v in _LINE.findall(quote["body"])}
        original = sum(items.values(), Decimal(0))
        replies = sorted(
            (m for m in mails.values() if m["in_reply_to"] == quote["message_id"]),
            key=lambda m: m["sent_at"],
        )
        for m in replies:
            if m["sender"] == quote["sender"]:
                _corrected(items, m["body"])
        total = sum(items.values(), Decimal(0))
        tiers = _TIERS.search(t["responses_create_params"]["input"][-1]["content"])
        assert tiers is not None, t["task_id"]
        high, threshold, low = tiers.groups()
        limit = Decimal(threshold.replace(",", ""))

        rate = {True: int(high), False: int(low)}
        exact = total * (100 - rate[total >= limit]) / 100
        priced = exact.quantize(Decimal("0.01"))
        assert priced == exact, t["task_id"]  # no half cent: no rounding rule to guess
        amount = next(c for c in t["ground_truth"] if c["name"] == "update_deal_amount")
        assert Decimal(str(amount["arguments"]["amount"])) == priced, t["task_id"]
        flipped += (original >= limit) != (total >= limit)
    assert flipped >= len(tasks) // 4  # the uncorrected quote often lands in the other tier


def test_a_deal_closing_today_is_lost_and_earlier_wins_count_in_the_total() -> None:
    for t in _draws("pipeline_review", 12):
        user = _rows(t, "assistant_profile")[0]["employee_id"]
        name = t["ground_truth"][1]["arguments"]["company"]
        company = next(c["id"] for c in _rows(t, "companies") if c["name"] == name)
        deals = {d["code"]: d for d in _rows(t, "deals") if d["company_id"] == company}
        today = [
            c
            for c, d in deals.items()
            if d["owner_id"] == user
            and d["close_date"] == "2026-03-16"
            and d["stage"] in ("lead", "qualified", "proposal")
        ]
        changes = {
            c["arguments"]["code"]: c["arguments"]["stage"]
            for c in t["ground_truth"]
            if c["name"] == "update_deal_stage"
        }
        assert today and all(changes.get(c) == "lost" for c in today), t["task_id"]
        newly = sum(Decimal(str(deals[c]["amount"])) for c, s in changes.items() if s == "won")
        assert Decimal(t["expected_answer"]["value"]) > newly, t["task_id"]
