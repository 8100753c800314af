"""Every sql refusal names its record: the gold's decline carries the refused record's key
(employee_no, invoice number) and the row expects exactly it, so a decline naming nothing, or
another task's record, does not score."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.taskgen.driver import Request, generate

KEY = r"E\d+|INV-2026-\d{5}"


@pytest.fixture(scope="module")
def generated() -> list[dict[str, Any]]:
    """A generated set, built in process as `stategym tasks generate --count 120 --seed 77`."""
    return [t for t in generate(Request("sql", 120, 77), 1) if isinstance(t, dict)]


@pytest.mark.slow
def test_every_refusal_names_its_refused_record(generated: list[dict[str, Any]]) -> None:
    refusals = [t for t in generated if t.get("expected_decline")]
    assert len(refusals) >= 10, "too few refusals drawn to check"
    for task in refusals:
        records = task.get("expected_decline_records") or task.get("expected_decline_subject")
        assert records, f"{task['task_id']}: the row expects no subject"
        decline = task["ground_truth"][-1]
        assert decline["name"] == "decline_request", task["task_id"]
        subject = decline["arguments"]["subject"]
        assert (subject if isinstance(subject, list) else [subject]) == records, task["task_id"]
        seeded = {
            str(row.get("employee_no") or row.get("number"))
            for rows in task["seed"]["rows"].values()
            for row in rows
        }
        for record in records:
            assert re.fullmatch(KEY, record) and record in seeded, (task["task_id"], record)
