"""What an outside author of an environment trips over (docs/new_environment.md): argument
names the framework must not eat, rows the generator must not write, stale task rows, the
scaffold's initial migration. Each test goes through the real CLI and real SQLite."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field
from pydantic.json_schema import SkipJsonSchema
from typer.testing import CliRunner

from app.cli.env_contract import tool_failures
from app.cli.main import cli
from app.sdk.environment import Environment, ToolArgs, tool
from app.taskgen.kit import Draft, TaskGenerator, build_row, call
from tests.conftest import REPO

NOW = "2026-01-01T12:00:00"


class ShelfArgs(ToolArgs):
    title: str = Field(description="The shelf's new title.")
    name: str = Field(description="Who names it.")
    default: bool = Field(description="Whether it becomes the default shelf.")


@tool
def name_shelf(db: Any, args: ShelfArgs, ctx: Any) -> dict[str, Any]:
    """Give a shelf a title."""
    return {"title": args.title}


class HiddenArgs(ToolArgs):
    code: str = Field(description="Bin code.")
    secret: SkipJsonSchema[int] = Field(default=0, description="Never shown to an agent.")


@tool
def peek(db: Any, args: HiddenArgs, ctx: Any) -> dict[str, Any]:
    """Look at a bin."""
    return {}


def test_arguments_named_like_schema_keywords_stay_in_the_schema() -> None:
    params = name_shelf.openai_schema()["parameters"]
    assert list(params["properties"]) == ["title", "name", "default"]
    assert params["required"] == ["title", "name", "default"]
    # pydantic's own titles and defaults are still dropped, as keywords.
    assert "title" not in params and "title" not in params["properties"]["title"]
    title = params["properties"]["title"]
    assert title == {"description": "The shelf's new title.", "type": "string"}


def test_the_contract_names_an_argument_missing_from_the_schema(depot: Environment) -> None:
    env = dataclasses.replace(depot, tools=(*depot.tools, name_shelf, peek))
    lines = list(tool_failures(env))
    assert lines == [
        "tool peek: argument(s) secret of its ToolArgs model are missing from its schema's "
        "properties: an agent could never pass them"
    ]


def test_a_gold_call_may_pass_an_argument_called_name(depot: Environment) -> None:
    env = dataclasses.replace(depot, tools=(*depot.tools, name_shelf))
    made = call(env, "name_shelf", title="Atlas", name="Ada", default=False)
    assert made == {
        "name": "name_shelf",
        "arguments": {"title": "Atlas", "name": "Ada", "default": False},
    }


def test_a_draft_reads_by_default() -> None:
    assert Draft("lookup", "How many bins are there?", []).writes is False


def _generator(env: Environment, kind: str) -> TaskGenerator:
    def label_and_count(index: int, rng: random.Random) -> Draft:
        gold = [call(env, "label_bin", code="A1", label=f"Cold {index}")]
        prompt = "Label bin A1 'Cold' and tell me how many bins there are."
        return Draft("label_and_count", prompt, gold, writes=True, answer=(kind, 5))

    def build(index: int, fn: Any, k: int, rng: random.Random, names: Any) -> dict[str, Any]:
        return build_row(env, index, fn(index, rng), {"now": NOW, "rows": {}})

    return TaskGenerator(
        env=env, plan=[(label_and_count, 1)], names=[("Ada", "Berg")] * 8, build=build
    )


@pytest.mark.parametrize("shipped", [True, False], ids=["shipped", "drawn"])
def test_a_row_with_an_unknown_answer_kind_is_one_line_and_not_written(
    depot: Environment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shipped: bool
) -> None:
    from app.cli import generate
    from app.taskgen import driver

    for module in (generate, driver):  # the CLI and the in-process driver find it by name
        monkeypatch.setattr(module, "load_generator", lambda name: _generator(depot, "count"))
    out = tmp_path / "tasks.jsonl"
    args = ["--shipped"] if shipped else ["--count", "1", "--jobs", "1"]
    result = CliRunner().invoke(cli, ["tasks", "generate", "--env", "depot", *args, str(out)])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "label_and_count" in lines[0] and "variant 0" in lines[0]
    assert "expected_answer.kind 'count' is not a kind; kinds are amount, number" in lines[0]
    assert not out.exists()
    # The kind verify knows: the same story is written, and its row reads back valid.
    for module in (generate, driver):
        monkeypatch.setattr(module, "load_generator", lambda name: _generator(depot, "number"))
    result = CliRunner().invoke(cli, ["tasks", "generate", "--env", "depot", *args, str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["expected_answer"] == {"kind": "number", "value": 5} for r in rows)


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`stategym new-env library`, installed with pip into a folder of its own; returns (the
    installed package's folder, the environment variables that make it importable)."""
    root = tmp_path_factory.mktemp("authors") / "stategym-library"
    site = root.parent / "site"
    done = _cli(["new-env", "library", "--dir", str(root)], dict(os.environ))
    assert done.returncode == 0, done.stderr
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        + ["--no-build-isolation", "--target", str(site), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    path = os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])
    return site / "library_env", {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


SHELVES = """

class Shelf(Base):
    __tablename__ = "shelves"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(40))
"""


@pytest.mark.slow  # new-env, pip install, envs check: ~30 s
def test_a_new_environments_initial_revision_is_replaced_not_extended(library) -> None:
    package, env = library
    migrations = package / "migrations"
    [scaffolds] = sorted(migrations.glob("*.py"))
    models = package / "models.py"
    models.write_text(models.read_text() + SHELVES)  # the author's models replace the scaffold's

    checked = _cli(["envs", "check", "library"], env)
    assert checked.returncode == 1
    [line] = [x for x in checked.stderr.splitlines() if "migration head differ" in x]
    assert '`stategym migrate revision --env library -m "initial schema" --initial`' in line

    done = _cli(
        ["migrate", "revision", "--env", "library", "-m", "initial schema", "--initial"], env
    )
    assert done.returncode == 0, done.stderr
    assert "(ruff-formatted)" in done.stdout
    [written] = sorted(migrations.glob("*.py"))
    assert written != scaffolds and "shelves" in written.read_text()
    ruff = Path(sys.executable).with_name("ruff")
    assert subprocess.run([str(ruff), "format", "--check", "--quiet", str(written)]).returncode == 0
    checked = _cli(["migrate", "check", "--env", "library"], env)
    assert checked.returncode == 0, checked.stdout

    # Once the branch has grown past its first revision, --initial is refused in one line.
    assert _cli(["migrate", "revision", "--env", "library", "-m", "labels"], env).returncode == 0
    refused = _cli(["migrate", "revision", "--env", "library", "-m", "x", "--initial"], env)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]
    assert "library's migration branch has 2 revisions" in refused.stderr
    assert len(list(migrations.glob("*.py"))) == 2


def test_a_revision_without_ruff_says_it_is_unformatted() -> None:
    from app.storage.migrations import revision_formatter_missing

    assert revision_formatter_missing() is None  # the dev extra installs ruff
    missing = revision_formatter_missing("no_such_formatter")
    assert missing == f"no no_such_formatter installed for {sys.executable}"


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _check(path: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["tasks", "check", "--env", "depot", "--json", str(path)])
    return json.loads(result.stdout)


def test_hand_written_rows_are_filled_and_stale_rows_fail_the_check(
    depot: Environment, tmp_path: Path
) -> None:
    from app.cli.env_contract import task_failures

    gold = [{"name": "label_bin", "arguments": {"code": "A1", "label": "Cold"}}]
    hand = {
        "task_id": "depot-1",
        "prompt": "Label bin A1 'Cold'.",
        "seed": {"now": NOW, "rows": {}},
    }
    hand["ground_truth"] = gold
    source = _write(tmp_path / "hand.jsonl", [hand])
    out = tmp_path / "tasks.jsonl"
    filled = CliRunner().invoke(cli, ["tasks", "fill", "--env", "depot", str(source), str(out)])
    assert filled.exit_code == 0, filled.output
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert list(row) == ["task_id", "env", "responses_create_params", "seed", "ground_truth"]
    assert row["responses_create_params"] == {
        "input": [
            {"role": "system", "content": depot.policy},
            {"role": "user", "content": "Label bin A1 'Cold'."},
        ],
        "tools": depot.tool_schemas(),
    }
    assert _check(out)["ok"] is True

    # The tool loses an argument's description, the policy is edited: the row is stale.
    stale = json.loads(json.dumps(row))
    [label_bin] = [t for t in stale["responses_create_params"]["tools"] if t["name"] == "label_bin"]
    label_bin["parameters"]["properties"]["label"]["description"] = "An old description."
    stale["responses_create_params"]["input"][0]["content"] = "You managed a depot."
    stale_file = _write(tmp_path / "stale.jsonl", [stale])
    report = _check(stale_file)
    assert report["ok"] is False
    assert report["problems"][0]["problems"][:2] == [
        "offers tool schemas that differ from the environment's (label_bin changed): run "
        "`stategym tasks fill --env depot IN OUT` to write the current ones",
        "its system prompt is not the environment's policy: run `stategym tasks fill --env "
        "depot IN OUT` to write the current ones",
    ]
    lines = list(task_failures(depot, stale_file, tmp_path / "contract", None))
    assert lines[0].startswith("task depot-1: offers tool schemas that differ"), lines

    # fill refreshes a stale row: the same row as filled from the hand-written one.
    again = CliRunner().invoke(cli, ["tasks", "fill", "--env", "depot", str(stale_file), str(out)])
    assert again.exit_code == 0, again.output
    assert [json.loads(line) for line in out.read_text().splitlines()] == [row]


def test_fill_names_what_a_row_lacks_in_one_line(depot: Environment, tmp_path: Path) -> None:
    source = _write(tmp_path / "hand.jsonl", [{"task_id": "depot-1", "prompt": "Label A1."}])
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(cli, ["tasks", "fill", "--env", "depot", str(source), str(out)])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {source}: task depot-1: missing seed, ground_truth"
    assert not out.exists()
