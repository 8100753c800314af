"""Generated sql tasks teach reading the database, not recognising it: every draw is its own
world (no identifier recurs across tasks, answers vary), a rule-bound request is allowed or
forbidden by the rows (twins worded from one pool), and every write is preceded by a look.

Draws are built as `stategym tasks generate` builds them (story index 1 inside `own_world`),
with the story's own self-check (gold replayed on base + seed)."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from typing import Any

import pytest

from app.sdk.seed_builder import own_world
from app.taskgen.kit import TaskGenerator, kind
from app.taskgen.splits import split_names
from envs.sql.taskgen import PLAN, TASKGEN, build_task

# Families a rule may forbid, by the data: (family, variant) -> the codes it may decline with.
RULE_BOUND = {
    "refuse_delete_employee": {"cannot_delete_employee"},
    "refuse_paid_invoice": {"invoice_already_paid", "cannot_delete_invoice"},
    "refuse_big_raise": {"raise_over_limit"},
    "refuse_salary_rewrite": {"salary_rewrite_forbidden"},
    "refuse_delete_invoice": {"cannot_delete_invoice", "invoice_already_paid"},
    "refuse_approve_rejected": {"timesheet_not_submitted", "invoice_already_paid"},
    "give_raise": {"raise_over_limit"},
    "mark_paid": {"invoice_already_paid"},
    "void_invoice": {"invoice_already_paid"},
}
IDENTIFIER = re.compile(r"\bE\d{7}\b|\bINV-2026-\d{5}\b|\bPRJ-\d{5}\b|\bC-\d{6}\b")
FUNCTIONS = {fn.__name__: (fn, n) for fn, n in PLAN}


def draw(fn: Any, k: int, i: int) -> dict[str, Any]:
    names = split_names(TASKGEN.names, "train")
    random.Random(f"names-{fn.__name__}-{k}-{i}").shuffle(names)
    with own_world(random.Random(f"sql-world-{fn.__name__}-{k}-{i}")):
        return build_task(1, fn, k, random.Random(f"sql-story-{fn.__name__}-{k}-{i}"), names)


def text(task: dict[str, Any]) -> str:
    return task["responses_create_params"]["input"][-1]["content"]


def template(task: dict[str, Any]) -> str:
    """The request with its identifiers, names, amounts and dates masked: its wording."""
    out = IDENTIFIER.sub("<id>", text(task))
    out = re.sub(r"\d[\d,.\-]*", "<n>", out)
    return re.sub(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", "<name>", out)


@pytest.fixture(scope="module")
def sample() -> list[dict[str, Any]]:
    """Six draws of every family variant (about 300 tasks)."""
    return [draw(fn, k, i) for fn, n in PLAN for k in range(n) for i in range(6)]


@pytest.mark.slow
def test_no_identifier_recurs_across_tasks(sample: list[dict[str, Any]]) -> None:
    seen: Counter[str] = Counter()
    for task in sample:
        gold = " ".join(str(c["arguments"]) for c in task["ground_truth"])
        seen.update(set(IDENTIFIER.findall(gold + text(task))))
    assert seen, "the gold names no identifier"
    worst, count = seen.most_common(1)[0]
    assert count <= 2, (worst, count)  # 2 of ~300: well under 1 %


@pytest.mark.slow
def test_answers_vary(sample: list[dict[str, Any]]) -> None:
    answers = Counter(repr(t["expected_answer"]["value"]) for t in sample if "expected_answer" in t)
    total = sum(answers.values())
    assert total >= 40
    assert len(answers) >= total * 0.6, answers.most_common(5)
    assert answers.most_common(1)[0][1] <= 4, answers.most_common(3)


@pytest.mark.parametrize("family", sorted(RULE_BOUND))
def test_the_data_decides_and_the_wording_does_not(family: str) -> None:
    """Both outcomes occur, the declines use the family's codes, the row's kind follows the
    outcome, and one wording template leads to both outcomes."""
    fn, variants = FUNCTIONS[family]
    by_outcome: dict[bool, set[str]] = defaultdict(set)
    for i in range(24):
        task = draw(fn, 0, i)
        declined = "expected_decline" in task
        if declined:
            assert task["expected_decline"] in RULE_BOUND[family], task["expected_decline"]
        gen: TaskGenerator = TASKGEN
        assert kind(gen, task["ground_truth"], family) == ("refusal" if declined else "write")
        by_outcome[declined].add(template(task))
    assert set(by_outcome) == {True, False}, family
    assert by_outcome[True] & by_outcome[False], (family, by_outcome)


@pytest.mark.slow
def test_every_write_is_preceded_by_a_look(sample: list[dict[str, Any]]) -> None:
    """The policy says to look before writing: each gold's first write comes after a read."""
    for task in sample:
        calls = task["ground_truth"]
        writes = [
            n
            for n, c in enumerate(calls)
            if c["name"] == "run_sql"
            and not c["arguments"]["sql"].lstrip().upper().startswith(("SELECT", "WITH"))
        ]
        if writes:
            before = calls[: writes[0]]
            assert any(
                c["name"] == "run_sql"
                and c["arguments"]["sql"].lstrip().upper().startswith("SELECT")
                for c in before
            ), (task["family"], calls[writes[0]])


def test_the_hard_tier_is_long_and_mixes_outcomes() -> None:
    """Hard stories: 10-30 gold calls, several writes, and a decline in some draws only."""
    for family in ("hard_quarter_close", "hard_payroll_review"):
        fn, _ = FUNCTIONS[family]
        tasks = [draw(fn, 0, i) for i in range(12)]
        lengths = [len(t["ground_truth"]) for t in tasks]
        assert min(lengths) >= 10 and max(lengths) <= 30, (family, lengths)
        declined = {"expected_decline" in t for t in tasks}
        assert declined == {True, False}, family
