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


def _evidence(rng, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 4)
    if kind == 0:
        return "x" * rng.choice([0, 3, 499, 500, 501, 700])
    if kind == 1:
        return rng.choice([1, 2.5, None, True, -0.0])
    if kind == 2:
        return b"\x00" * rng.randrange(3)
    if kind == 3:
        return "é" * rng.choice([10, 520])
    if kind in (4, 5):
        return {
            rng.choice(["a", "b" * 600, 7, "c"]): _evidence(rng, depth + 1)
            for _ in range(rng.randrange(4))
        }
    if kind == 6:
        return tuple(_evidence(rng, depth + 1) for _ in range(rng.randrange(4)))
    return [_evidence(rng, depth + 1) for _ in range(rng.randrange(6))]


def test_capping_a_result_again_with_known_parts_gives_what_a_full_walk_gives() -> None:
    import random

    from app import jsonio
    from app.verify.evidence import cap_evidence

    rng = random.Random(36)
    for _ in range(400):
        evidence = {f"k{n}": _evidence(rng) for n in range(rng.randrange(1, 6))}
        trajectory = {"ok": True, "calls": [_evidence(rng) for _ in range(3)]}
        known: dict = {}
        shown = cap_evidence(evidence, known=known)
        assert jsonio.dumps(shown) == jsonio.dumps(cap_evidence(evidence))
        shown["trajectory"] = cap_evidence(trajectory, known=known)
        result = {"reward": 0.5, "verification": shown, "failure_reason": "y" * 600}
        fast = cap_evidence(result, known=known)
        assert jsonio.dumps(fast) == jsonio.dumps(cap_evidence(result))  # never walked parts
        # A part registered is its object, not its content: an equal copy is walked.
        for part, _size in known.values():
            assert all(p is not part for p in (evidence, trajectory, result))


def test_a_cut_part_is_never_taken_as_capped() -> None:
    from app.verify.evidence import cap_evidence

    known: dict = {}
    shown = cap_evidence({"rows": ["z" * 600], "ok": ["fine"]}, known=known)
    assert [p for p, _ in known.values()] == [["fine"]]  # the cut list is walked again
    again = cap_evidence({"verification": shown}, known=known)
    assert again["verification"]["rows"][0] == "z" * 500 + "... [14 more]"  # cut twice, as before
    assert again["verification"]["ok"] is shown["ok"]
