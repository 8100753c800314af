"""The task file: well-formed rows, graded difficulty, answers and declines where the gold ends,
a generator that reproduces the file byte for byte (gold 1, no-op 0: envs check)."""

from __future__ import annotations

import json
from typing import Any

from envs.retail import ENVIRONMENT
from envs.retail.taskgen import task_lines

TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in ENVIRONMENT.tasks_path.read_text(encoding="utf-8").splitlines()
]
ANSWER_TOOLS = {"submit_answer", "decline_request"}
FRAMEWORK = {*ANSWER_TOOLS, "message_user"}
WRITE_TOOLS = {t.name for t in ENVIRONMENT.tools if not t.read_only} - FRAMEWORK


def test_enough_tasks_with_unique_ids_and_every_difficulty() -> None:
    assert len(TASKS) >= 40
    ids = [t["task_id"] for t in TASKS]
    assert len(ids) == len(set(ids))
    assert {t["difficulty"] for t in TASKS} >= set(range(1, 9))
    # The hard tier: ten calls or more (docs/generating_tasks.md).
    hard = [t for t in TASKS if t["family"].startswith("hard_")]
    assert hard and all(t["difficulty"] >= 10 for t in hard)
    for t in TASKS:
        assert t["env"] == "retail"
        # Difficulty counts the calls (a message to the customer too); the gold's last call may
        # be its answer or decline.
        steps = [c for c in t["ground_truth"] if c["name"] not in ANSWER_TOOLS]
        assert t["difficulty"] == len(steps)


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
        "cancel",
        "modify_items",
        "modify_address",
        "modify_payment",
        "return",
        "exchange",
        "update_default_address",
    ):
        assert needed in families
    assert any(f.startswith("multi_") for f in families)
    assert sum(f.startswith("refuse_") for f in families) >= 4
    assert {"talk_cancel", "talk_return", "talk_switch"} <= families


def test_seeds_insert_only_task_range_ids() -> None:
    for t in TASKS:
        assert t["seed"]["now"] == "2026-03-14T10:00:00"
        for table, rows in t["seed"]["rows"].items():
            for row in rows:
                if table == "variants":  # stock (and price) of base variants: updates, not inserts
                    assert set(row) in ({"id", "stock"}, {"id", "stock", "price"})
                    assert row["id"] < 100_000, (t["task_id"], row)
                else:
                    assert row["id"] >= 100_000, (t["task_id"], table)


def test_read_only_tasks_answer_or_decline_and_their_gold_ends_so() -> None:
    """A lookup expects an answer by value (a hard task may also change things before it), a
    refusal a decline with its rule's code; the gold submits exactly that as its last call. No
    shipped task uses the legacy text path."""
    for t in TASKS:
        assert "expected_outputs" not in t, t["task_id"]
        writes = any(c["name"] in WRITE_TOOLS for c in t["ground_truth"])
        last = t["ground_truth"][-1]
        if t.get("expected_answer"):
            assert last == {
                "name": "submit_answer",
                "arguments": {"answer": t["expected_answer"]["value"]},
            }
            assert (t["family"] == "lookup" and not writes) or t["family"] == "hard_clear_out"
        elif t.get("expected_decline"):
            assert last["name"] == "decline_request", t["task_id"]
            assert last["arguments"]["reason"] == t["expected_decline"]
            assert t["expected_decline"] in ENVIRONMENT.decline_codes
            # Forbidden twins of a single request decline and change nothing; several requests
            # (multi_*, the hard tier) do what is allowed first, then decline.
            partial = t["family"].startswith(("multi_", "hard_"))
            assert not writes or partial, t["task_id"]
        else:
            assert writes, t["task_id"]


def test_generator_reproduces_the_file() -> None:
    expected = "".join(line + "\n" for line in task_lines())
    assert ENVIRONMENT.tasks_path.read_text(encoding="utf-8") == expected


def test_the_shipped_return_sweep_exercises_the_exception_and_its_limit() -> None:
    """One shipped sweep is a silver or gold member's whose electronics or audio past 365 days
    are returned by the exception, and where the three-item limit leaves one out: a policy
    without the exception, or without the limit, returns other lines there."""
    from envs.retail.tests.test_retail_return_sweep import returns_of, verdicts

    sweeps = [t for t in TASKS if t["family"] == "hard_return_sweep"]
    decided = [
        t
        for t in sweeps
        if {"extension", "cap"} <= {v for v, _ in verdicts(t).values()}
        and returns_of(t, "window") != returns_of(t)
        and returns_of(t, "no_cap") != returns_of(t)
    ]
    assert decided, [t["task_id"] for t in sweeps]


def test_a_line_returned_before_the_task_has_the_records_a_return_leaves() -> None:
    # A seeded "returned" line without its return read as an inconsistent record to an agent.
    lines = 0
    for t in TASKS:
        rows = t["seed"]["rows"] if isinstance(t.get("seed"), dict) else {}
        returned = [r for r in rows.get("order_items", []) if r.get("status") == "returned"]
        for line in returned:
            lines += 1
            item = next(i for i in rows["return_items"] if i["order_item_id"] == line["id"])
            ret = next(r for r in rows["returns"] if r["id"] == item["return_id"])
            assert ret["order_id"] == line["order_id"] and ret["status"] == "refunded"
            assert ret["refund_amount"] == round(line["unit_price"] * line["quantity"], 2)
            refunds = [
                p
                for p in rows["payments"]
                if p["order_id"] == line["order_id"] and p["kind"] == "refund"
            ]
            assert any(p["amount"] == ret["refund_amount"] for p in refunds), t["task_id"]
    assert lines >= 5  # return, exchange, clear-out, talk and sweep stories hold such lines
