"""The task file: well-formed rows, graded difficulty, a generator that reproduces the file byte
for byte, and verifier cases that point at real tasks (gold 1, no-op 0: envs check)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envs.airline import ENVIRONMENT
from envs.airline.policy import DECLINE_REASONS
from envs.airline.taskgen import task_lines

TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines()
]
# The airline's own writes; the framework's answer tools write only the answer row.
WRITE_TOOLS = {t.name for t in ENVIRONMENT.tools if not t.read_only and not t.framework}
SUBMIT_TOOLS = {"submit_answer", "decline_request"}
CASES = Path(__file__).resolve().parents[1] / "verifier_cases.jsonl"


def test_enough_tasks_with_unique_ids_and_every_difficulty() -> None:
    assert len(TASKS) >= 45
    ids = [t["task_id"] for t in TASKS]
    assert len(ids) == len(set(ids))
    assert ids == [f"airline-{n:03d}" for n in range(1, len(ids) + 1)]
    difficulties = {t["difficulty"] for t in TASKS}
    assert set(range(1, 9)) <= difficulties and max(difficulties) >= 12  # the hard tier
    for t in TASKS:
        assert t["env"] == "airline"
        # The steps of work: the closing submit_answer/decline_request is not one.
        work = [c for c in t["ground_truth"] if c["name"] not in SUBMIT_TOOLS]
        assert t["difficulty"] == len(work), t["task_id"]


def test_each_row_asks_in_one_user_message() -> None:
    # That rows offer the current tools and policy, and that every gold replays to reward 1 while a
    # no-op earns 0 (so a gold changes state iff it writes), are the contract's checks: envs check.
    for t in TASKS:
        _, user = t["responses_create_params"]["input"]
        assert user["role"] == "user" and len(user["content"]) > 40


def test_families_cover_every_kind_of_request() -> None:
    families = {t["family"] for t in TASKS}
    for needed in (
        "lookup",
        "book",
        "cancel",
        "change_flights",
        "change_cabin",
        "update_passengers",
        "add_baggage",
        "assign_seat",
        "compensation",
    ):
        assert needed in families
    assert sum(f.startswith("multi_") for f in families) >= 5
    assert sum(f.startswith("refuse_") for f in families) >= 5
    used = {c["name"] for t in TASKS for c in t["ground_truth"]}
    assert used == {t.name for t in ENVIRONMENT.tools}, "every tool appears in some gold"


def test_seeds_insert_only_task_range_ids() -> None:
    for t in TASKS:
        assert t["seed"]["now"] == "2026-05-10T12:00:00"
        for table, rows in t["seed"]["rows"].items():
            for row in rows:
                if table == "flight_cabins":  # inventory of base flights: updates only
                    assert set(row) == {"id", "seats_left"}
                elif table == "flights":  # this world's numbers, delays, cancellations of base
                    cols = set(row) - {"flight_number"}  # flights (taskgen/flights.py)
                    assert cols in ({"id"}, {"id", "status", "delay_minutes"}), row
                    assert row["id"] < 100_000
                elif table == "seats":  # seat assignments on base seat maps
                    assert set(row) == {"id", "passenger_id"} and row["passenger_id"] >= 100_000
                else:
                    assert row["id"] >= 100_000, (t["task_id"], table)


def test_questions_and_refusals_end_with_their_typed_submission() -> None:
    """A lookup's gold ends submitting its expected answer; a refusal's (and a partial
    refusal's, after its writes) ends declining with its expected code, one the airline declares;
    an action task submits nothing. No row keeps the text-matched expected_outputs. The data,
    not the family, decides: refusal families have allowed twins, action families forbidden ones."""
    partial = {"multi_partial_refusal", "hard_cancel_trips", "hard_refund_then_bags",
               "hard_compensation_sweep"}  # fmt: skip
    # A bulk change that may end answering the total of what it did.
    acts_then_answers = {"hard_compensation_sweep"}
    outcomes: dict[str, set[bool]] = {}
    for t in TASKS:
        assert "expected_outputs" not in t and "answer_kind" not in t, t["task_id"]
        last = t["ground_truth"][-1]
        asked = t["family"] in acts_then_answers and "expected_answer" in t
        want = "answer" if t["family"] in ("lookup", "hard_bag_fee_quote") or asked else None
        if "expected_decline" in t:
            want = "decline"
        writes = any(c["name"] in WRITE_TOOLS for c in t["ground_truth"])
        group = "refuse" if t["family"].startswith("refuse_") else "act"
        if t["family"] not in partial and want != "answer":
            outcomes.setdefault(group, set()).add(want == "decline")
        if want == "answer":
            assert "expected_decline" not in t, t["task_id"]
            assert not writes or t["family"] in acts_then_answers, t["task_id"]
            assert last == {
                "name": "submit_answer",
                "arguments": {"answer": t["expected_answer"]["value"]},
            }
        elif want == "decline":
            assert "expected_answer" not in t, t["task_id"]
            assert t["expected_decline"] in DECLINE_REASONS, t["task_id"]
            assert last["name"] == "decline_request", t["task_id"]
            assert last["arguments"]["reason"] == t["expected_decline"]
            assert writes <= (t["family"] in partial), t["task_id"]
        else:
            assert writes, t["task_id"]
            assert "expected_answer" not in t and "expected_decline" not in t, t["task_id"]
        submits = [c for c in t["ground_truth"] if c["name"] in SUBMIT_TOOLS]
        assert len(submits) == (want is not None), t["task_id"]
    assert outcomes == {"refuse": {True, False}, "act": {True, False}}  # twins both ways


def test_generator_reproduces_the_file() -> None:
    expected = "".join(line + "\n" for line in task_lines())
    assert ENVIRONMENT.tasks_path.read_text(encoding="utf-8") == expected


def test_verifier_cases_name_tasks_and_cover_every_kind() -> None:
    cases = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    ids = {t["task_id"] for t in TASKS}
    assert len(cases) >= 5 and all(c["task_id"] in ids for c in cases)
    names = " ".join(c["case"] for c in cases)
    for kind in ("full", "zero", "partial", "collateral", "malformed"):
        assert kind in names
