"""Verify's per-task caches never answer with a stale value or another task's: each is keyed by
what its value is a function of, and bounded by bytes."""

from __future__ import annotations

import copy
import json
from collections import Counter

from app.registry import load_environment
from app.verify import request_task
from app.verify.diff import change_units
from app.verify.gold import GoldState
from app.verify.request_task import stored_task


def _rows() -> list[dict]:
    path = load_environment("retail").tasks_path
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_stored_task_is_parsed_once_per_content_and_never_served_for_another() -> None:
    rows = _rows()
    answer = next(r for r in rows if r.get("expected_answer"))
    other = copy.deepcopy(answer)
    other["expected_answer"] = {**other["expected_answer"], "value": ["Another Name"]}
    moved = copy.deepcopy(answer)
    moved["ground_truth"][0]["arguments"] = {**moved["ground_truth"][0]["arguments"], "x": 1}
    first = stored_task(answer)
    assert stored_task(copy.deepcopy(answer)) is first  # the same content: parsed once
    for _ in range(2):  # alternated: each content its own spec
        assert stored_task(other).expected_answer.value == ["Another Name"]
        assert stored_task(answer).expected_answer.value == answer["expected_answer"]["value"]
        assert stored_task(moved).gold_key != first.gold_key
        assert stored_task(moved).snapshot_key == first.snapshot_key
        assert stored_task(answer).gold_key == first.gold_key
    # Equal values of another type are other content (1 and 1.0 are different JSON).
    typed = copy.deepcopy(answer)
    typed["difficulty"] = float(answer.get("difficulty") or 0) + 0.5
    assert stored_task(typed).data["difficulty"] == typed["difficulty"]


def test_the_stored_task_cache_is_bounded_by_bytes(monkeypatch) -> None:
    cache = request_task.LRU(10_000, max_bytes=200_000, size_of=lambda e: e[1])
    monkeypatch.setattr(request_task, "_tasks", cache)
    row = _rows()[0]
    for n in range(60):
        stored_task({**row, "task_id": f"bounded-{n}"})
    assert 0 < cache.bytes <= 200_000
    assert len(cache) < 60
    # What was let go is parsed again, and is right.
    assert stored_task({**row, "task_id": "bounded-0"}).task_id == "bounded-0"


def test_gold_change_units_are_those_of_its_diff() -> None:
    from app.verify.diff import TableDiff

    diff = {"orders": TableDiff(changed=[{"key": {"id": 1}, "changes": {"status": ["a", "b"]}}])}
    gold = GoldState({}, {}, diff, ())
    assert (
        gold.units
        == change_units(diff)
        == Counter({("changed", "orders", (("id", 1),), (("status", "b"),)): 1})
    )
    assert GoldState({}, {}, {}, ()).units == Counter()
