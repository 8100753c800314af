"""The task file: well-formed rows, graded difficulty, gold solutions that replay, a generator
that reproduces the file byte for byte, and verifier cases that point at real tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.sdk.replay import dump, open_task_db, replay
from envs.airline import ENVIRONMENT
from envs.airline.policy import POLICY
from envs.airline.taskgen import task_lines

TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines()
]
WRITE_TOOLS = {t.name for t in ENVIRONMENT.tools if not t.read_only}
CASES = Path(__file__).resolve().parents[1] / "verifier_cases.jsonl"


def test_enough_tasks_with_unique_ids_and_every_difficulty() -> None:
    assert len(TASKS) >= 45
    ids = [t["task_id"] for t in TASKS]
    assert len(ids) == len(set(ids))
    assert ids == [f"airline-{n:03d}" for n in range(1, len(ids) + 1)]
    assert {t["difficulty"] for t in TASKS} == set(range(1, 9))
    for t in TASKS:
        assert t["env"] == "airline"
        assert t["difficulty"] == len(t["ground_truth"])


def test_rows_offer_exactly_the_tools_and_the_policy() -> None:
    schemas = ENVIRONMENT.tool_schemas()
    for t in TASKS:
        params = t["responses_create_params"]
        assert params["tools"] == schemas
        system, user = params["input"]
        assert system == {"role": "system", "content": POLICY}
        assert user["role"] == "user" and len(user["content"]) > 40


def test_families_cover_every_kind_of_request() -> None:
    families = {t["family"] for t in TASKS}
    for needed in ("lookup", "book", "cancel", "change_flights", "change_cabin",
                   "update_passengers", "add_baggage", "assign_seat", "compensation"):  # fmt: skip
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
                elif table == "seats":  # seat assignments on base seat maps
                    assert set(row) == {"id", "passenger_id"} and row["passenger_id"] >= 100_000
                else:
                    assert row["id"] >= 100_000, (t["task_id"], table)


def test_read_only_tasks_check_the_answer() -> None:
    for t in TASKS:
        writes = any(c["name"] in WRITE_TOOLS for c in t["ground_truth"])
        if not writes:
            assert t.get("expected_outputs"), t["task_id"]
            assert t["family"] == "lookup" or t["family"].startswith("refuse_")


@pytest.mark.parametrize("task", TASKS, ids=[t["task_id"] for t in TASKS])
def test_gold_replays_and_changes_state_iff_it_writes(task: dict[str, Any]) -> None:
    db, now = open_task_db(ENVIRONMENT, task["seed"])
    try:
        before = dump(db, ENVIRONMENT)
        replay(db, ENVIRONMENT, task["ground_truth"], now)
        changed = dump(db, ENVIRONMENT) != before
    finally:
        db.close()
    writes = any(c["name"] in WRITE_TOOLS for c in task["ground_truth"])
    assert changed == writes


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
