"""The task file: well-formed rows, graded difficulty, a generator that reproduces the file byte
for byte (gold 1 with balanced books, the environment's invariant, and no-op 0: envs check)."""

from __future__ import annotations

import json
from typing import Any

from envs.ledger import ENVIRONMENT
from envs.ledger.policy import DECLINE_REASONS
from envs.ledger.taskgen import task_lines

TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines()
]
# The bank's own writes; the framework's answer tools write only the answer row.
WRITE_TOOLS = {t.name for t in ENVIRONMENT.tools if not t.read_only and not t.framework}
SUBMIT_TOOLS = {"submit_answer", "decline_request"}


def test_enough_tasks_with_unique_ids_and_every_difficulty() -> None:
    assert len(TASKS) >= 45
    ids = [t["task_id"] for t in TASKS]
    assert len(ids) == len(set(ids)) and ids[0] == "ledger-001"
    levels = {t["difficulty"] for t in TASKS}
    assert set(range(1, 9)) <= levels and max(levels) >= 9  # the hard tier's long golds
    for t in TASKS:
        assert t["env"] == "ledger"
        # The steps of work: the closing submit_answer/decline_request is not one.
        work = [c for c in t["ground_truth"] if c["name"] not in SUBMIT_TOOLS]
        assert t["difficulty"] == len(work), t["task_id"]


def test_each_row_asks_in_one_user_message() -> None:
    # That rows offer the current tools and policy, and that every gold replays to reward 1 while a
    # no-op earns 0 (so a gold changes state iff it writes), are the contract's checks: envs check.
    for t in TASKS:
        _, user = t["responses_create_params"]["input"]
        assert user["role"] == "user" and len(user["content"]) > 60


def test_families_cover_every_write_tool_and_refusals() -> None:
    used = {c["name"] for t in TASKS for c in t["ground_truth"]}
    assert used == {t.name for t in ENVIRONMENT.tools}
    families = {t["family"] for t in TASKS}
    assert sum(f.startswith("multi_") for f in families) >= 5
    # Refusals are decided by the data: many rules, and families seen both allowed and refused.
    assert len({t["expected_decline"] for t in TASKS if "expected_decline" in t}) >= 8
    refused = {t["family"] for t in TASKS if "expected_decline" in t}
    allowed = {t["family"] for t in TASKS if "expected_decline" not in t}
    assert len(refused & allowed) >= 4


def test_seeds_use_task_range_ids_and_only_rebalance_internal_accounts() -> None:
    for t in TASKS:
        assert t["seed"]["now"] == ENVIRONMENT.default_now.isoformat()
        for table, rows in t["seed"]["rows"].items():
            for row in rows:
                if row["id"] < 100_000:  # the bank's cash/fee accounts, moved by seeded postings
                    assert table == "accounts" and set(row) == {"id", "balance"}, t["task_id"]


def test_questions_and_refusals_end_with_their_typed_submission() -> None:
    """A lookup's gold ends submitting its expected answer, a refusal's declining with its
    expected code (one the bank declares), both after reads only; the partial refusal's declines
    after its writes; an action task submits nothing. No row keeps expected_outputs."""
    for t in TASKS:
        assert "expected_outputs" not in t and "answer_kind" not in t, t["task_id"]
        gold, family = t["ground_truth"], t["family"]
        writes = any(c["name"] in WRITE_TOOLS for c in gold)
        submits = [c for c in gold if c["name"] in SUBMIT_TOOLS]
        if family.startswith("lookup_"):
            assert not writes and "expected_decline" not in t, t["task_id"]
            answer = {"answer": t["expected_answer"]["value"]}
            assert submits == [gold[-1]] == [{"name": "submit_answer", "arguments": answer}]
        elif "expected_decline" in t and not writes:  # a request the data forbids
            assert "expected_answer" not in t, t["task_id"]
            assert t["expected_decline"] in DECLINE_REASONS, t["task_id"]
            assert submits == [gold[-1]] and gold[-1]["name"] == "decline_request"
            assert gold[-1]["arguments"]["reason"] == t["expected_decline"]
        elif "expected_decline" in t:  # acts, then declines the rest
            assert writes and "expected_answer" not in t, t["task_id"]
            assert submits == [gold[-1]] and gold[-1]["name"] == "decline_request"
            assert gold[-1]["arguments"]["reason"] == t["expected_decline"] in DECLINE_REASONS
        else:
            assert writes and not submits, t["task_id"]
            assert "expected_answer" not in t and "expected_decline" not in t, t["task_id"]


def test_generator_reproduces_the_file() -> None:
    expected = "".join(line + "\n" for line in task_lines())
    assert ENVIRONMENT.tasks_path.read_text(encoding="utf-8") == expected
