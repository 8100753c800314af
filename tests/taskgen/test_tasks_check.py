"""`stategym tasks check`: every shipped task file passes; crafted bad tasks are each reported."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import Field
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app import registry
from app.cli.main import cli
from app.sdk.environment import ToolArgs, ToolContext, tool
from tests.support import warehouse_env
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE
from tests.support.warehouse_env import _item

SHIPPED = [registry.load_environment(name).tasks_path for name in registry.environment_names()]


class RelabelArgs(ToolArgs):
    sku: str = Field(description="Item SKU.")


@tool
def relabel(db: Session, args: RelabelArgs, ctx: ToolContext) -> dict:
    """Give an item a fresh label (test-only: random, so a gold using it is not deterministic)."""
    item = _item(db, args.sku)
    item.name = f"Part {uuid.uuid4().hex[:8]}"
    return {"sku": item.sku, "name": item.name}


# A test-only environment: the warehouse plus one non-deterministic tool.
ENVIRONMENT = replace(WAREHOUSE, name="flaky", tools=(*WAREHOUSE.tools, relabel))

SEED = {
    "rows": {
        "items": [{"id": 9001, "sku": "SKU-9001", "name": "Gear", "quantity": 5, "price": 10.0}]
    }
}
SELL = {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -2, "reason": "sold"}}


def _row(task_id: str, ground_truth: list, **extra) -> dict:
    return {"task_id": task_id, "seed": SEED, "ground_truth": ground_truth, **extra}


BAD_ROWS = [
    _row("good", [SELL]),
    _row(
        "good-checks-only",
        [],
        expected_state=[
            {"table": "items", "where": {"sku": "SKU-9001"}, "expect": {"quantity": 3}}
        ],
    ),
    _row(
        "broken-gold",
        [{"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -99, "reason": "sold"}}],
    ),
    _row("unknown-tool", [{"name": "teleport", "arguments": {}}]),
    _row("noop-passes", [{"name": "get_item", "arguments": {"sku": "SKU-9001"}}]),
    _row("flaky-gold", [{"name": "relabel", "arguments": {"sku": "SKU-9001"}}]),
    _row(
        "check-contradicts-gold",
        [SELL],
        expected_state=[
            {"table": "items", "where": {"sku": "SKU-9001"}, "expect": {"quantity": 4}}
        ],
    ),
    _row(
        "unknown-column",
        [SELL],
        expected_state=[{"table": "items", "where": {"colour": "red"}, "count": 1}],
    ),
]


@pytest.fixture
def registered(monkeypatch):
    # Register the test environments under names the CLI can load (the registry is a plain dict).
    monkeypatch.setitem(registry.ENVIRONMENTS, "warehouse", warehouse_env.__name__)
    monkeypatch.setitem(registry.ENVIRONMENTS, "flaky", __name__)


def run_check(path: Path, *args: str):
    return CliRunner().invoke(cli, ["tasks", "check", str(path), *args])


def _passes(path: Path, tmp_path: Path) -> None:
    result = run_check(path, "--json", "--data-dir", str(tmp_path / "data"))
    report = json.loads(result.stdout)
    assert result.exit_code == 0, json.dumps(report["problems"], indent=1)[:4000]
    assert report["ok"] is True and report["tasks"] == len(path.read_text().splitlines())


@pytest.mark.parametrize("path", SHIPPED, ids=[p.parent.name for p in SHIPPED])
def test_shipped_task_files_pass_a_sample(path, tmp_path):
    # Every 6th task: the command end to end on each file. Every task's gold and no-op are scored
    # over HTTP by tests/taskgen/test_env_tasks.py; the whole files are checked by the slow test
    # below.
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(line + "\n" for line in path.read_text().splitlines()[::6]))
    _passes(sample, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=[p.parent.name for p in SHIPPED])
def test_every_shipped_task_file_passes(path, tmp_path):
    _passes(path, tmp_path)


def test_bad_tasks_are_each_reported_and_exit_non_zero(registered, tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in BAD_ROWS) + "\n")
    result = run_check(path, "--env", "flaky", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["tasks"] == len(BAD_ROWS)
    problems = {p["task_id"]: " | ".join(p["problems"]) for p in report["problems"]}
    assert set(problems) == {
        "broken-gold",
        "unknown-tool",
        "noop-passes",
        "flaky-gold",
        "check-contradicts-gold",
        "unknown-column",
    }
    assert "gold call 0 (move_stock) failed: Only 5 units" in problems["broken-gold"]
    # The failed call changed nothing, so the gold state is the seed: a no-op matches it too.
    noop_line = "a no-op (no calls, nothing submitted, empty answer) earns reward 1"
    assert noop_line in problems["broken-gold"]
    assert "gold call 0 (teleport) failed: unknown tool" in problems["unknown-tool"]
    assert problems["noop-passes"] == noop_line
    assert (
        "gold is not deterministic: two replays differ in tables ['items']"
        in (problems["flaky-gold"])
    )
    assert "expected-state checks failed: [0]" in problems["check-contradicts-gold"]
    assert "invalid task" in problems["unknown-column"]
    assert "no column 'colour'" in problems["unknown-column"]


def test_human_report_lists_problem_tasks(registered, tmp_path):
    path = tmp_path / "warehouse" / "tasks.jsonl"
    path.parent.mkdir()
    rows = [BAD_ROWS[0], BAD_ROWS[4]]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    # No --env: the folder name (<env>/tasks.jsonl, as in envs/<env>/) names the environment.
    result = run_check(path)
    assert result.exit_code == 1
    assert "1 with problems" in result.stdout and "noop-passes" in result.stdout
    assert "good" not in result.stdout.replace("noop-passes", "")


def test_good_file_exits_zero_and_bad_input_is_a_usage_error(registered, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(BAD_ROWS[0]) + "\n" + json.dumps(BAD_ROWS[1]) + "\n")
    result = run_check(good, "--env", "warehouse")
    assert result.exit_code == 0, result.output
    assert "all 2 tasks OK" in result.stdout
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    result = run_check(broken, "--env", "warehouse")
    assert result.exit_code == 2 and "not valid JSON" in result.output
    assert run_check(good, "--env", "nope").exit_code == 2


def test_all_codes_declines_every_task_with_every_code(tmp_path) -> None:
    """By default each task tries one decline code (spread over the file); --all-codes tries
    each code on each task, and both find nothing to pay on the shipped tasks."""
    from app.cli.tasks import check_rows
    from app.registry import load_environment

    env = load_environment("retail")
    rows = [json.loads(line) for line in env.tasks_path.read_text().splitlines()[:4]]
    one = check_rows(env, rows, tmp_path / "one")
    every = check_rows(env, rows, tmp_path / "every", all_codes=True)
    assert all(not r.problems for r in one + every)
    codes = len(env.decline_codes)
    assert sum(r.probes_tried for r in every) - sum(r.probes_tried for r in one) >= 3 * (codes - 2)
