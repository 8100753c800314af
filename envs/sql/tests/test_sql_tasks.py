"""The task file: well-formed rows, graded difficulty (gold 1, no-op 0: envs check), questions that
end with the typed answer and refusals with the rule's code, a generator that reproduces the file
byte for byte, and verifier cases that point at real tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envs.sql import ENVIRONMENT
from envs.sql.taskgen import task_lines

TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines()
]
CASES_PATH = Path(__file__).resolve().parents[1] / "verifier_cases.jsonl"
BANNED = ("random(", "'now'", "current_date", "current_timestamp")


def _writes(task: dict[str, Any]) -> bool:
    """A gold call writes when its statement is not a plain read."""
    for c in task["ground_truth"]:
        sql = c["arguments"].get("sql", "").lstrip().upper()
        if c["name"] == "run_sql" and not sql.startswith(("SELECT", "PRAGMA", "WITH")):
            return True
    return False


def test_enough_tasks_with_unique_ids_and_every_difficulty() -> None:
    assert len(TASKS) >= 45
    ids = [t["task_id"] for t in TASKS]
    assert len(ids) == len(set(ids)) and ids[0] == "sql-001"
    levels = {t["difficulty"] for t in TASKS}
    assert set(range(1, 9)) <= levels and max(levels) >= 10  # the hard tier: 10+ steps
    for t in TASKS:
        # The steps before the final answer or decline (the kit's rule for shipped tasks).
        answers = t["ground_truth"][-1]["name"] in ("submit_answer", "decline_request")
        assert t["env"] == "sql" and t["difficulty"] == len(t["ground_truth"]) - answers


def test_each_row_asks_in_one_user_message() -> None:
    # That rows offer the current tools and policy, and that every gold replays to reward 1 while a
    # no-op earns 0 (so a gold changes state iff it writes), are the contract's checks: envs check.
    for t in TASKS:
        _, user = t["responses_create_params"]["input"]
        assert user["role"] == "user" and len(user["content"]) > 40


def test_gold_sql_is_deterministic_and_seeds_use_task_ids() -> None:
    for t in TASKS:
        for c in t["ground_truth"]:
            assert c["name"] in (
                "run_sql",
                "list_tables",
                "describe_table",
                "message_user",
                "submit_answer",
                "decline_request",
            )
            sql = c["arguments"].get("sql", "").lower()
            assert not any(b in sql for b in BANNED), (t["task_id"], sql)
        assert t["seed"]["now"] == "2026-03-16T09:00:00"
        for table, rows in t["seed"].get("rows", {}).items():
            assert all(r["id"] >= 100_000 for r in rows), (t["task_id"], table)


def test_families_cover_reads_writes_refusals_and_multi() -> None:
    families = {t["family"] for t in TASKS}
    assert sum(f.startswith("answer_") for f in families) >= 4
    assert sum(f.startswith("refuse_") for f in families) >= 3
    assert sum(f.startswith("multi_") for f in families) >= 3
    for t in TASKS:
        if not _writes(t):
            assert t.get("expected_answer") or t.get("expected_decline"), t["task_id"]


def test_questions_submit_the_typed_answer_and_refusals_decline_with_the_rule() -> None:
    """Answers are state: the gold ends with submit_answer(the expected value) or
    decline_request(the expected code); no shipped task keeps free-text expected_outputs.
    Whether a request is declined is the data's call: the shipped refusal families hold both
    the forbidden twin (declined) and the allowed one (done), and so do the action families a
    rule can forbid."""
    kinds, codes = set(), set()
    outcomes: dict[str, set[bool]] = {}
    for t in TASKS:
        assert "expected_outputs" not in t and "answer_kind" not in t, t["task_id"]
        last = t["ground_truth"][-1]
        answer, decline = t.get("expected_answer"), t.get("expected_decline")
        assert not (answer and decline), t["task_id"]
        # A question, or a hard story that writes and then answers (the month's bill).
        if t["family"].startswith("answer_") or t["family"] == "hard_customer_month":
            assert answer and last["name"] == "submit_answer", t["task_id"]
            assert last["arguments"] == {"answer": answer["value"]}
            kinds.add((answer["kind"], isinstance(answer["value"], list)))
        elif decline:
            assert decline in ENVIRONMENT.decline_codes, t["task_id"]
            assert last["name"] == "decline_request" and last["arguments"]["reason"] == decline
            codes.add(decline)
        else:
            assert not answer, t["task_id"]
            assert last["name"] not in ("submit_answer", "decline_request"), t["task_id"]
            assert _writes(t), t["task_id"]  # an allowed twin does what was asked
        if t["family"].startswith("refuse_"):
            outcomes.setdefault("refuse", set()).add(bool(decline))
        elif t["family"] in ("raise", "mark_paid", "void_invoice"):
            outcomes.setdefault("act", set()).add(bool(decline))
    assert {("number", False), ("name", False), ("name", True)} <= kinds
    assert len(codes) >= 4
    assert outcomes == {"refuse": {True, False}, "act": {True, False}}


def test_generator_reproduces_the_file() -> None:
    expected = "".join(line + "\n" for line in task_lines())
    assert ENVIRONMENT.tasks_path.read_text(encoding="utf-8") == expected


def test_verifier_cases_are_well_formed() -> None:
    cases = [json.loads(line) for line in CASES_PATH.read_text().splitlines() if line.strip()]
    assert len(cases) >= 5
    ids = {t["task_id"] for t in TASKS}
    names = {c["case"] for c in cases}
    assert {"gold", "noop", "partial", "collateral", "malformed"} <= names
    for case in cases:
        assert case["task_id"] in ids and "expect" in case
