"""`stategym report` on a rollout file made of real verify responses (retail, over HTTP)."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.cli.rollout_report import reason_headlines
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.authoring.test_sessions_cli import TASKS, calls_of
from tests.conftest import TEST_SECRET
from tests.support.rollouts import gold_answer, run_rollout

CANCEL, ADDRESS, LOOKUP = TASKS["retail-020"], TASKS["retail-018"], TASKS["retail-005"]
WRONG_FIGURE = {"name": "submit_answer", "arguments": {"answer": "78.45"}}


async def _responses(data_dir: Path) -> list[dict[str, Any]]:
    settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET)
    app = create_app(settings, load_environment("retail"))
    plan = [  # (task index, task, calls, answer): 2 successes, 3 failures of two kinds
        (0, CANCEL, calls_of(CANCEL), gold_answer(CANCEL)),
        (0, CANCEL, calls_of(CANCEL), gold_answer(CANCEL)),
        (0, CANCEL, [], "I could not do it."),
        (1, ADDRESS, [], ""),
        # The lookup's reads, then a wrong figure submitted: its answer is scored, not the text.
        (2, LOOKUP, [*calls_of(LOOKUP)[:-1], WRONG_FIGURE], "It is 87.45, I think."),
    ]
    lines = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
            for n, (task_index, task, calls, answer) in enumerate(plan):
                verified = await run_rollout(client, task, calls, answer)
                lines.append({**verified, "_ng_task_index": task_index, "_ng_rollout_index": n})
    return lines


@pytest.fixture(scope="module")
def rollout_file(tmp_path_factory) -> tuple[Path, Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("report")
    data_dir = root / "data"
    lines = asyncio.run(_responses(data_dir))
    path = root / "rollouts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path, data_dir, lines


def sg(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_report_groups_rewards_and_lists_failures(rollout_file):
    path, data_dir, lines = rollout_file
    result = sg("report", str(path), "--data-dir", str(data_dir), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rollouts"] == 5 and summary["mean_reward"] == pytest.approx(2 / 5)
    by_task = {g["task"]: g for g in summary["by_task"]}
    assert by_task["retail-020"]["rollouts"] == 3
    assert by_task["retail-020"]["mean_reward"] == pytest.approx(2 / 3)
    assert by_task["retail-018"]["mean_reward"] == 0.0 and by_task["retail-005"]["env"] == "retail"
    assert summary["by_env"] == [
        {"env": "retail", "rollouts": 5, "mean_reward": 0.4, "success_rate": 0.4}
    ]
    reasons = {r["reason"]: r["count"] for r in summary["failure_reasons"]}
    assert reasons == {"final state differs from gold": 2, "answer": 1}
    failed_ids = {f["session_id"] for f in summary["failed"]}
    assert failed_ids == {line["session_id"] for line in lines if line["reward"] < 1}
    assert {f["rollout_index"] for f in summary["failed"]} == {2, 3, 4}


def test_printed_diff_command_shows_the_failed_session(rollout_file):
    path, data_dir, lines = rollout_file
    text = sg("report", str(path), "--data-dir", str(data_dir))
    assert text.exit_code == 0, text.output
    failed = next(line for line in lines if line["_ng_rollout_index"] == 2)
    command = next(x.strip() for x in text.stdout.splitlines() if failed["session_id"] in x)
    argv = shlex.split(command)
    assert argv[:3] == ["stategym", "sessions", "diff"]
    diff = sg(*argv[1:], "--json")  # the very command the report printed
    assert diff.exit_code == 0, diff.output
    assert json.loads(diff.stdout)["tables"]["orders"]["changed"] == 1
    assert "retail-020" in text.stdout and "final state differs from gold" in text.stdout


def test_markdown_and_html_summaries_with_histogram(rollout_file, tmp_path):
    path, _data_dir, lines = rollout_file
    md = tmp_path / "report.md"
    assert sg("report", str(path), "--out", str(md)).exit_code == 0
    # The explorer's chart as a file of its own: parseable SVG with its styles, 10 bins whose
    # counts are the rewards' (2 of 1.0, 3 of 0.0).
    svg = ElementTree.parse(tmp_path / "report-rewards.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert svg.find("{http://www.w3.org/2000/svg}style") is not None
    bars = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == "bar"]
    titles = [bar.findtext("{http://www.w3.org/2000/svg}title") for bar in bars]
    assert (
        len(bars) == 10 and titles[0].endswith(": 3 run(s)") and titles[-1].endswith(": 2 run(s)")
    )
    text = md.read_text()
    assert "](report-rewards.svg)" in text and "| retail-020 | retail | 3 | 0.667 |" in text
    failed = next(line for line in lines if line["_ng_rollout_index"] == 4)
    assert f"stategym sessions diff {failed['session_id']} --against gold" in text
    page = tmp_path / "report.html"
    assert sg("report", str(path), "--out", str(page)).exit_code == 0
    html = page.read_text()
    assert '<svg class="chart"' in html and failed["session_id"] in html
    assert "<td>retail-020</td>" in html and "src=" not in html and "href=" not in html


def test_html_report_escapes_what_the_rollouts_say(tmp_path):
    # A rollout file is model output: a task id or failure reason is text, never markup.
    path = tmp_path / "rollouts.jsonl"
    hostile = "<script>alert(1)</script>"
    row = {"task_id": hostile, "reward": 0.0, "failure_reason": f"{hostile} (x)", "env": "e&v"}
    path.write_text(json.dumps(row) + "\n")
    page = tmp_path / "report.html"
    assert sg("report", str(path), "--out", str(page)).exit_code == 0
    html = page.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "e&amp;v" in html


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "no rollouts"),
        ('{"reward": 1.0}\n{not json\n', "line 2: not valid JSON"),
        ('{"task_id": "x"}\n', "line 1: no numeric 'reward'"),
        ("[1, 2]\n", "line 1: expected a JSON object"),
    ],
)
def test_bad_rollout_files_are_a_message(tmp_path, content, message):
    path = tmp_path / "rollouts.jsonl"
    path.write_text(content)
    result = sg("report", str(path))
    assert result.exit_code == 1 and message in result.output
    assert "Traceback" not in result.output


def test_missing_file_and_bad_out_suffix(rollout_file, tmp_path):
    path, _data_dir, _lines = rollout_file
    missing = sg("report", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 1 and "no such file" in missing.output
    bad = sg("report", str(path), "--out", str(tmp_path / "report.txt"))
    assert bad.exit_code == 1 and ".md or .html" in bad.output


def test_reason_headlines_drop_the_specifics():
    reason = (
        "final state differs from gold (orders: 1 changed; audit_log: 1 added); "
        "final answer lacks ['87.45']"
    )
    assert reason_headlines(reason) == ["final state differs from gold", "final answer lacks"]
    assert reason_headlines(None) == ["no failure_reason given"]


def test_reward_by_difficulty_and_family(rollout_file, tmp_path):
    _, data_dir, lines = rollout_file
    # Rollouts without difficulty and family: --tasks joins them in by task_id.
    path = tmp_path / "bare.jsonl"
    bare = [{k: v for k, v in r.items() if k not in ("difficulty", "family")} for r in lines]
    path.write_text("".join(json.dumps(r) + "\n" for r in bare))
    rows = [(CANCEL, 2, "cancel"), (ADDRESS, 3, "modify_address"), (LOOKUP, 1, "lookup_price")]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"task_id": t["task_id"], "difficulty": d, "family": f}) + "\n"
            for t, d, f in rows
        )
    )
    result = sg("report", str(path), "--tasks", str(tasks), "--data-dir", str(data_dir), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    by_difficulty = {g["difficulty"]: g for g in summary["by_difficulty"]}
    assert {d: g["rollouts"] for d, g in by_difficulty.items()} == {1: 1, 2: 3, 3: 1}
    assert by_difficulty[2]["mean_reward"] == pytest.approx(2 / 3)
    assert {g["family"] for g in summary["by_family"]} == {
        "cancel",
        "modify_address",
        "lookup_price",
    }
    printed = sg("report", str(path), "--tasks", str(tasks), "--data-dir", str(data_dir))
    assert "Reward by difficulty" in printed.output and "Reward by family" in printed.output
