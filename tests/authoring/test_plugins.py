"""Environments are plugins: `stategym new-env` writes a package that, once installed, is listed,
meets the contract, serves, and scores gold 1 / no-op 0 over real HTTP, with no edit here.

The package is really installed (pip, into a folder of its own put on PYTHONPATH, so the
project's virtualenv is left as it was); discovery goes through its entry point's metadata.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.cli.env_contract import nudge_failures, tool_failures
from app.registry import environment_module, load_environment
from app.sdk.environment import ToolArgs, tool
from tests.conftest import REPO, start_server, stop_server
from tests.support.rollouts import load_tasks, run_rollout


def _run(args: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def installed_clinic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`stategym new-env clinic`, then `pip install` of the written package into its own folder;
    returns (package root, the environment variables that make it importable)."""
    root = tmp_path_factory.mktemp("authors") / "stategym-clinic"
    site = root.parent / "site"
    done = _run(["new-env", "clinic", "--dir", str(root)], dict(os.environ))
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
    return root, {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


def test_the_shipped_environments_register_through_entry_points() -> None:
    from importlib.metadata import entry_points

    registered = {ep.name: ep.value for ep in entry_points(group="stategym.environments")}
    assert {"retail", "airline", "ledger", "sql", "workplace"} <= set(registered)
    assert environment_module("retail") == "envs.retail"
    with pytest.raises(KeyError, match="entry-point group"):
        load_environment("no_such_env")


@pytest.mark.slow  # new-env, pip install, a served package: ~20 s
def test_the_written_package_is_small_and_formatted(installed_clinic) -> None:
    root, _ = installed_clinic
    skip = {"__pycache__", "build"}  # what pip's build left beside the sources
    written = [
        p
        for p in root.rglob("*")
        if p.is_file() and not skip & set(p.parts) and ".egg-info" not in str(p)
    ]
    # A starter to read in one sitting, not a framework copy (the generated migration and the
    # data files aside).
    read = [p for p in written if "migrations" not in p.parts and p.suffix != ".jsonl"]
    lines = sum(len(p.read_text().splitlines()) for p in read)
    assert lines < 500, lines
    names = {p.relative_to(root).as_posix() for p in written}
    assert {"pyproject.toml", "README.md", "clinic_env/tasks.jsonl"} <= names
    assert "clinic_env/verifier_cases.jsonl" in names
    [migration] = [n for n in names if n.startswith("clinic_env/migrations/")]
    ruff = Path(sys.executable).with_name("ruff")
    check = subprocess.run([str(ruff), "format", "--check", str(root / migration)])
    assert check.returncode == 0
    tasks = load_tasks(root / "clinic_env" / "tasks.jsonl")
    assert [t["family"] for t in tasks] == ["lend", "loan_due", "refuse_too_many_loans"]
    # An argument named like a schema keyword reaches the agent (find_books(title=...)).
    tools = {t["name"]: t for t in tasks[0]["responses_create_params"]["tools"]}
    assert tools["find_books"]["parameters"]["required"] == ["title"]


@pytest.mark.slow  # new-env, pip install, a served package: ~20 s
def test_installed_it_is_listed_checked_and_generates(installed_clinic, tmp_path: Path) -> None:
    _, env = installed_clinic
    listed = _run(["envs"], env)
    assert listed.returncode == 0 and "clinic:" in listed.stdout, listed.stderr
    checked = _run(["envs", "check", "clinic"], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "meets the environment contract" in checked.stdout
    out = tmp_path / "generated.jsonl"
    made = _run(
        ["tasks", "generate", "--env", "clinic", "--count", "5", "--seed", "1", str(out)], env
    )
    assert made.returncode == 0, made.stderr
    assert len(load_tasks(out)) == 5


@pytest.mark.slow  # new-env, pip install, a served package: ~20 s
def test_installed_it_serves_gold_1_and_noop_0(installed_clinic, tmp_path: Path) -> None:
    root, env = installed_clinic
    tasks = load_tasks(root / "clinic_env" / "tasks.jsonl")
    proc, url = start_server(
        "clinic", tmp_path / "data", extra_env={"PYTHONPATH": env["PYTHONPATH"]}
    )
    try:

        async def scores() -> list[tuple[float, float]]:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                out = []
                for task in tasks:
                    gold = await run_rollout(client, task, task["ground_truth"], "")
                    noop = await run_rollout(client, task, [], "")
                    out.append((gold["reward"], noop["reward"]))
                return out

        assert asyncio.run(scores()) == [(1.0, 0.0)] * len(tasks)
    finally:
        stop_server(proc)


@pytest.mark.slow  # new-env, pip install, then the suite's verifier-case runner on it
def test_the_scaffolds_verifier_cases_hold(installed_clinic) -> None:
    """The cases NeMo Gym's `gym env test` fixture is built from (app/integrations/gym_fixture):
    the suite's own runner plays them on the installed package, each twice."""
    _, env = installed_clinic
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-k", "clinic"]
        + ["tests/taskgen/test_verifier_cases.py", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "7 passed" in ran.stdout, ran.stdout[-2000:]


class Bare(ToolArgs):
    sku: str


def test_a_careless_tool_fails_at_import_saying_what_to_write() -> None:
    def bare(db, args: Bare, ctx):  # noqa: ANN001, ANN202 - a deliberately careless tool
        """Look up an item."""

    with pytest.raises(TypeError, match=r"describe argument\(s\) sku \(Field\(description"):
        tool(bare)


def test_an_undescribed_schema_gets_one_line_per_failure(depot) -> None:
    """A tool built around the decorator (no description, a bare argument) is still caught by
    the contract, one line each."""
    from app.sdk.tool import Tool

    sneaky = Tool(name="sneaky", description="", args_model=Bare, fn=lambda *a: None)
    broken = dataclasses.replace(depot, tools=(*depot.tools, sneaky))
    lines = list(tool_failures(broken))
    assert any("sneaky: no description" in line for line in lines), lines
    assert any("'sku' has no description" in line for line in lines), lines
    assert all("\n" not in line for line in lines)


def test_refusing_every_nudge_is_not_a_failure(depot, tmp_path: Path) -> None:
    """A tool that refuses a nudged call is the best case: the contract passes it."""
    task = {
        "task_id": "depot-1",
        "seed": {"now": "2026-01-01T12:00:00", "rows": {}},
        "ground_truth": [{"name": "label_bin", "arguments": {"code": "A1", "label": "Cold"}}],
    }
    # label_bin's nudge ("A1 x") names no bin: refused, so no failure.
    assert list(nudge_failures(depot, [task], tmp_path)) == []


def test_sessions_made_before_the_first_revision_can_be_adopted(tmp_path: Path) -> None:
    """A session file with no revision is refused by a plain upgrade (saying --adopt), and
    `--adopt` stamps it at the branch's first revision and upgrades it to the head."""
    from app.cli.migrate import upgrade_sessions
    from app.storage.migrations import branch_revisions, head_revision, revision_of, upgrade_file

    first = branch_revisions("retail")[-1]
    sessions = tmp_path / "data" / "sessions" / "retail"
    sessions.mkdir(parents=True)
    path = sessions / "old.sqlite"
    sqlite3.connect(path).close()
    upgrade_file(path, "retail", first)  # the schema as the first revision made it ...
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM alembic_version")  # ... by an install that had no branch yet
    [refused] = upgrade_sessions(tmp_path / "data", "retail", dry_run=False)
    assert refused.status == "failed" and "--adopt" in refused.detail
    [adopted] = upgrade_sessions(tmp_path / "data", "retail", dry_run=False, adopt=True)
    assert adopted.status == "upgraded", adopted
    with sqlite3.connect(path) as conn:
        assert revision_of(conn) == head_revision("retail")


def test_a_changed_base_data_builder_changes_the_template_key(tmp_path: Path) -> None:
    module = tmp_path / "builder_probe.py"
    module.write_text("def build_base(db, rng):\n    return None\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        import builder_probe

        from app.sdk.environment import _source_digest

        first = _source_digest(builder_probe.build_base)
        module.write_text("def build_base(db, rng):\n    return 1\n")
        importlib.reload(builder_probe)
        assert _source_digest(builder_probe.build_base) != first
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("builder_probe", None)


def test_tasks_schema_is_the_task_row_model() -> None:
    env = dict(os.environ)
    printed = _run(["tasks", "schema"], env)
    assert printed.returncode == 0, printed.stderr
    schema = json.loads(printed.stdout)
    assert schema["title"] == "TaskRow"
    assert {"task_id", "seed", "ground_truth", "expected_answer"} <= set(schema["properties"])


def test_the_published_task_row_schema_is_the_models() -> None:
    """docs/task_row.schema.json is what `stategym tasks schema` prints (regenerate it with
    `stategym tasks schema > docs/task_row.schema.json`)."""
    from app.core.tasks import TaskRow

    published = json.loads((REPO / "docs" / "task_row.schema.json").read_text())
    assert published == TaskRow.model_json_schema()


def test_a_missing_generator_is_one_clear_line(depot, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli.main import cli

    result = CliRunner().invoke(
        cli, ["tasks", "generate", "--env", "depot", "--count", "1", str(tmp_path / "o.jsonl")]
    )
    assert result.exit_code == 2
    assert "has no task generator" in result.output and "Traceback" not in result.output


def test_a_failing_shipped_story_is_one_line(monkeypatch, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli import generate
    from app.cli.main import cli
    from app.taskgen.kit import TaskGenerator

    def broken(index, fn, k, rng, names):  # noqa: ANN001, ANN202
        raise AssertionError("gold call 2 (cancel_pending_order) failed\nlong detail")

    def family() -> None: ...

    real = generate.load_generator("retail")
    fake = TaskGenerator(env=real.env, plan=[(family, 1)], names=[("A", "B")], build=broken)
    monkeypatch.setattr(generate, "load_generator", lambda name: fake)
    out = tmp_path / "shipped.jsonl"
    result = CliRunner().invoke(
        cli, ["tasks", "generate", "--env", "retail", "--shipped", str(out)]
    )
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "shipped story 1 (family, variant 0) failed: AssertionError: gold call 2" in lines[0]
