"""The task file: well-formed rows, every difficulty, refusals and lookups that check the answer,
and a generator that reproduces the file byte for byte (re-running its self-checks)."""

from __future__ import annotations

import json
from typing import Any

from envs.workplace import ENVIRONMENT
from envs.workplace.taskgen import task_lines

TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines()
]
# The environment's own write tools (the framework's answer tools write no state).
WRITE_TOOLS = {t.name for t in ENVIRONMENT.tools if not t.read_only and not t.framework}
ANSWER_TOOLS = ("submit_answer", "decline_request")


def test_enough_tasks_with_unique_ids_and_every_difficulty() -> None:
    assert len(TASKS) >= 45
    assert [t["task_id"] for t in TASKS] == [f"workplace-{n:03d}" for n in range(1, len(TASKS) + 1)]
    # Every length from 1 to 8 steps, and the hard tier's longer golds (hard.py).
    assert set(range(1, 9)) <= {t["difficulty"] for t in TASKS}
    assert max(t["difficulty"] for t in TASKS) >= 10
    for t in TASKS:
        assert t["env"] == "workplace"
        # The steps before the final answer or decline (the kit's rule for shipped tasks).
        answers = t["ground_truth"][-1]["name"] in ANSWER_TOOLS
        assert t["difficulty"] == len(t["ground_truth"]) - answers
    assert len({t["responses_create_params"]["input"][1]["content"] for t in TASKS}) == len(TASKS)


def test_each_row_asks_in_one_user_message() -> None:
    # That rows offer the current tools and policy, and that every gold replays to reward 1 while a
    # no-op earns 0 (so a gold changes state iff it writes), are the contract's checks: envs check.
    for t in TASKS:
        _, user = t["responses_create_params"]["input"]
        assert user["role"] == "user" and len(user["content"]) > 30


def test_answer_only_tasks_check_the_answer() -> None:
    """Lookups and refusals change nothing: the gold ends with submit_answer(the expected value)
    or decline_request(the expected code), and the row states which; no free-text outputs."""
    reads_only = [t for t in TASKS if not WRITE_TOOLS & {c["name"] for c in t["ground_truth"]}]
    assert len(reads_only) >= 6
    kinds, codes = set(), set()
    for t in reads_only:
        last = t["ground_truth"][-1]
        if "expected_answer" in t:
            assert "expected_decline" not in t
            assert last == {
                "name": "submit_answer",
                "arguments": {"answer": t["expected_answer"]["value"]},
            }
            kinds.add(t["expected_answer"]["kind"])
        else:
            code = t["expected_decline"]
            assert code in ENVIRONMENT.decline_codes, t["task_id"]
            assert last["name"] == "decline_request" and last["arguments"]["reason"] == code
            codes.add(code)
    for t in TASKS:
        assert "expected_outputs" not in t, t["task_id"]
        if t not in reads_only:  # an action task may decline one part, or answer last (a
            # total counted after its own changes, hard.pipeline_review), never both
            names = [c["name"] for c in t["ground_truth"]]
            if "submit_answer" in names:
                assert names[-1] == "submit_answer" and "decline_request" not in names
                assert t["ground_truth"][-1]["arguments"]["answer"] == t["expected_answer"]["value"]
                continue
            assert "expected_answer" not in t, t["task_id"]
            if "decline_request" in names:  # the allowed part done, the forbidden one declined
                assert names[-1] == "decline_request", t["task_id"]
                reason = t["ground_truth"][-1]["arguments"]["reason"]
                assert reason == t["expected_decline"], t["task_id"]
                codes.add(reason)
    assert {"name", "amount", "datetime", "id"} <= kinds
    assert len(codes) >= 7
    assert sum(t["family"].startswith("refuse_") for t in TASKS) >= 5


def test_task_mix_covers_every_area() -> None:
    used = {c["name"] for t in TASKS for c in t["ground_truth"]}
    for name in (
        "send_email",
        "reply_email",
        "forward_email",
        "archive_email",
        "label_email",
        "create_event",
        "reschedule_event",
        "cancel_event",
        "respond_to_event",
        "update_deal_stage",
        "update_deal_amount",
        "reassign_deal",
        "log_activity",
        "create_task",
        "update_task_status",
        "reassign_task",
    ):
        assert name in used, name
    # Several entities in one task: at least 3 different write tools.
    assert sum(len({c["name"] for c in t["ground_truth"]} & WRITE_TOOLS) >= 3 for t in TASKS) >= 4


def test_seeds_use_task_range_ids_and_the_fixed_clock() -> None:
    for t in TASKS:
        rows = t["seed"]["rows"]
        assert t["seed"]["now"] == "2026-03-16T09:00:00"
        assert rows["assistant_profile"] == [{"id": 1, "employee_id": rows["employees"][0]["id"]}]
        for table, table_rows in rows.items():
            if table != "assistant_profile":
                assert all(r["id"] >= 100_000 for r in table_rows), (t["task_id"], table)


def test_generator_reproduces_the_file() -> None:
    # task_lines() replays and checks every task again (gold succeeds, refusals are refused).
    expected = "".join(line + "\n" for line in task_lines())
    assert ENVIRONMENT.tasks_path.read_text(encoding="utf-8") == expected
