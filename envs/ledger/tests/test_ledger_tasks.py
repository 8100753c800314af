"""The task file: well-formed rows, graded difficulty, gold solutions that replay with balanced
books, a generator that reproduces the file byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.sdk.compare_spec import FRAMEWORK_TABLES
from app.sdk.replay import dump, open_task_db, replay
from app.taskgen.conversation import system_prompt
from envs.ledger import ENVIRONMENT
from envs.ledger.policy import DECLINE_REASONS, POLICY
from envs.ledger.taskgen import task_lines
from envs.ledger.testing import violations

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


def test_rows_offer_exactly_the_tools_and_the_policy() -> None:
    schemas = ENVIRONMENT.tool_schemas()
    for t in TASKS:
        params = t["responses_create_params"]
        assert params["tools"] == schemas
        system, user = params["input"]
        # A conversational row's policy adds the rule for talking to the customer.
        assert system == {"role": "system", "content": system_prompt(ENVIRONMENT, t)}
        assert system["content"].startswith(POLICY) and ("user" in t) == (
            system["content"] != POLICY
        )
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


def test_policy_lists_every_reason_code_and_how_to_answer() -> None:
    assert set(ENVIRONMENT.decline_codes) == set(DECLINE_REASONS)
    for code, text in DECLINE_REASONS.items():
        assert f"- {code}: {text}" in POLICY
    assert "submit_answer" in POLICY and "decline_request" in POLICY


@pytest.mark.parametrize("task", TASKS, ids=[t["task_id"] for t in TASKS])
def test_gold_replays_balanced_and_changes_state_iff_it_writes(task: dict[str, Any]) -> None:
    db, now = open_task_db(ENVIRONMENT, task["seed"])
    try:
        assert violations(db) == []
        before = dump(db, ENVIRONMENT)
        replay(db, ENVIRONMENT, task["ground_truth"], now)
        after = dump(db, ENVIRONMENT)
        # The answer row and the conversation are scored apart from the state.
        bank = set(after) - FRAMEWORK_TABLES
        changed = {k: after[k] for k in bank} != {k: before.get(k) for k in bank}
        assert violations(db) == []
    finally:
        db.close()
    writes = any(c["name"] in WRITE_TOOLS for c in task["ground_truth"])
    assert changed == writes


def test_generator_reproduces_the_file() -> None:
    expected = "".join(line + "\n" for line in task_lines())
    assert ENVIRONMENT.tasks_path.read_text(encoding="utf-8") == expected
