"""`stategym sessions ...` on session databases made by real rollouts (retail, over HTTP)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import TEST_SECRET
from tests.support.rollouts import gold_answer, load_tasks, run_rollout

TASKS = {t["task_id"]: t for t in load_tasks(load_environment("retail").tasks_path)}
CANCEL = TASKS["retail-020"]  # cancels a pending order: writes orders, payments, ...


def calls_of(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": c["name"],
            "arguments": c["arguments"]
            if isinstance(c["arguments"], dict)
            else json.loads(c["arguments"]),
        }
        for c in task["ground_truth"]
    ]


async def _rollouts(data_dir: Path, settings: Settings | None = None) -> dict[str, str]:
    settings = settings or Settings(data_dir=data_dir, secret_key=TEST_SECRET)
    app = create_app(settings, load_environment("retail"))
    ids: dict[str, str] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
            gold = await run_rollout(client, CANCEL, calls_of(CANCEL), gold_answer(CANCEL))
            assert gold["reward"] == 1.0
            ids["gold"] = gold["session_id"]
            noop = await run_rollout(client, CANCEL, [], "")
            assert noop["reward"] == 0.0
            ids["noop"] = noop["session_id"]
        # A rollout still under way: seeded, one lookup and the cancel done, never verified.
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
            seeded = await client.post("/seed_session", json=CANCEL)
            ids["open"] = seeded.json()["session_id"]
            for call in calls_of(CANCEL):
                assert (await client.post(f"/{call['name']}", json=call["arguments"])).is_success
    return ids


def build_rollouts(data_dir: Path, settings: Settings | None = None) -> dict[str, str]:
    """Three real retail sessions: gold (reward 1, closed), noop (0, closed), open (unverified)."""
    return asyncio.run(_rollouts(data_dir, settings))


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("inspect") / "data"
    return data_dir, build_rollouts(data_dir)


def sg(*args: str, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def sg_json(*args: str) -> Any:
    result = sg(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_list_filters_by_status_reward_task_and_since(made):
    data_dir, ids = made
    d = ["--data-dir", str(data_dir)]
    everything = sg_json("sessions", "list", *d)
    assert {r["id"] for r in everything} == set(ids.values())
    assert all(r["file_present"] for r in everything)
    assert [r["id"] for r in sg_json("sessions", "list", *d, "--status", "open")] == [ids["open"]]
    assert [r["id"] for r in sg_json("sessions", "list", *d, "--reward", "<1")] == [ids["noop"]]
    assert [r["id"] for r in sg_json("sessions", "list", *d, "--reward", "1")] == [ids["gold"]]
    assert len(sg_json("sessions", "list", *d, "--task", "retail-020", "--since", "1h")) == 3
    assert sg_json("sessions", "list", *d, "--task", "retail-999") == []
    assert sg_json("sessions", "list", *d, "--since", "2999-01-01") == []
    noop = next(r for r in everything if r["id"] == ids["noop"])
    assert "final state differs from gold" in noop["failure_reason"]
    human = sg("sessions", "list", *d)
    assert human.exit_code == 0 and ids["gold"] in human.stdout


def test_show_lists_tables_and_rows_with_where(made):
    data_dir, ids = made
    d = ["--data-dir", str(data_dir)]
    shown = sg_json("sessions", "show", ids["gold"], *d)
    assert shown["session"]["reward"] == 1.0 and shown["tables"]["orders"] > 0
    assert shown["meta"]["status"] == "closed"
    pending = "#W90200010"  # the order retail-020 cancels
    rows = sg_json(
        "sessions", "show", ids["gold"], "orders", "--where", f"order_number={pending}", *d
    )
    assert rows["total"] == 1
    status = rows["columns"].index("status")
    assert rows["rows"][0][status] == "cancelled"
    before = sg_json(
        "sessions", "show", ids["noop"], "orders", "--where", f"order_number={pending}", *d
    )
    assert before["rows"][0][status] == "pending"
    # Numeric values bind as numbers; the open session's uncommitted-to-main-file WAL is seen.
    open_rows = sg_json("sessions", "show", ids["open"], "orders", "--where", "id=102002", *d)
    assert open_rows["rows"][0][status] == "cancelled"
    paged = sg_json(
        "sessions", "show", ids["gold"], "products", "--limit", "2", "--offset", "1", *d
    )
    assert len(paged["rows"]) == 2 and paged["total"] > 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "0" * 32], "unknown"),
        (["show", "../../etc/passwd"], "not a session id"),
        (["show", "{gold}", "nope"], "no table 'nope'"),
        (["show", "{gold}", "orders", "--where", "evil; drop=1"], "no column"),
        (["show", "{gold}", "orders", "--where", "id=abc"], "not a valid int"),
        (["show", "{gold}", "orders", "--where", "noequals"], "expected column=value"),
        (["diff", "{gold}", "--against", "nothing"], "nothing"),
        (["list", "--reward", "high"], "not a reward filter"),
        (["list", "--since", "yesterday"], "neither a duration"),
        (["gc", "--older-than", "forever", "--dry-run"], "not a duration"),
    ],
)
def test_bad_input_is_a_message_and_exit_code(made, args, message):
    data_dir, ids = made
    args = [a.format(**ids) for a in args]
    result = sg("sessions", *args, "--data-dir", str(data_dir))
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_missing_and_corrupt_session_files_are_reported(made, tmp_path):
    data_dir, ids = made
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    sessions = copy / "sessions" / "retail"
    # Closed and kept, both are packed (docs/inspecting.md, "Retention").
    (sessions / f"{ids['gold']}.sqlite.pack").unlink()
    corrupt = sessions / f"{ids['noop']}.sqlite"  # a plain file beside its pack is read first
    corrupt.write_bytes(b"not a database" * 100)
    gone = sg("sessions", "show", ids["gold"], "--data-dir", str(copy))
    assert gone.exit_code == 1 and "no database file" in gone.output
    bad = sg("sessions", "diff", ids["noop"], "--data-dir", str(copy))
    assert bad.exit_code == 1 and "cannot be opened" in bad.output
    corrupt.unlink()
    pack = sessions / f"{ids['noop']}.sqlite.pack"
    original = pack.read_bytes()
    damaged = bytearray(original)
    damaged[-200] ^= 0xFF
    pack.write_bytes(bytes(damaged))
    bad = sg("sessions", "diff", ids["noop"], "--data-dir", str(copy))
    assert bad.exit_code == 1 and "packed database cannot be read" in bad.output, bad.output
    pack.write_bytes(original)
    baseless = tmp_path / "baseless"  # a new folder: this process has not read its bases yet
    shutil.copytree(copy, baseless)
    shutil.rmtree(baseless / "sessions" / "retail" / ".bases")
    bad = sg("sessions", "show", ids["noop"], "--data-dir", str(baseless))
    assert bad.exit_code == 1 and "base image" in bad.output and "missing" in bad.output
    listed = {r["id"]: r for r in sg_json("sessions", "list", "--data-dir", str(copy))}
    assert listed[ids["gold"]]["file_present"] is False
    empty = sg("sessions", "list", "--data-dir", str(tmp_path / "nothing-here"))
    assert empty.exit_code == 1 and "no sessions" in empty.output


def test_diff_against_seed_and_gold(made):
    data_dir, ids = made
    d = ["--data-dir", str(data_dir)]
    gold_vs_seed = sg_json("sessions", "diff", ids["gold"], *d)
    assert gold_vs_seed["tables"]["orders"]["changed"] == 1
    change = gold_vs_seed["tables"]["orders"]["changed_rows"][0]
    assert change["key"] == {"order_number": "#W90200010"}
    assert change["changes"]["status"] == ["pending", "cancelled"]
    assert sg_json("sessions", "diff", ids["gold"], "--against", "gold", *d)["tables"] == {}
    noop_vs_gold = sg_json("sessions", "diff", ids["noop"], "--against", "gold", *d)
    assert noop_vs_gold["tables"]["orders"]["changed"] == 1
    assert sg_json("sessions", "diff", ids["noop"], *d)["summary"] == "no differences"
    human = sg("sessions", "diff", ids["noop"], "--against", "gold", *d)
    assert human.exit_code == 0 and "orders: +0 -0 ~1" in human.stdout


def test_diff_against_gold_replays_when_gold_file_is_missing(made, tmp_path):
    data_dir, ids = made
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    shutil.rmtree(copy / "gold", ignore_errors=True)  # not written since gold is in memory
    result = sg_json("sessions", "diff", ids["noop"], "--against", "gold", "--data-dir", str(copy))
    assert result["tables"]["orders"]["changed"] == 1
    assert not (copy / "gold").exists()  # replayed in memory, nothing written


def test_export_is_a_consistent_standalone_copy(made, tmp_path):
    data_dir, ids = made
    target = tmp_path / "out.sqlite"
    # The open session has committed rows still in its WAL file: the copy must hold them.
    info = sg_json("sessions", "export", ids["open"], str(target), "--data-dir", str(data_dir))
    assert info["bytes"] == target.stat().st_size
    conn = sqlite3.connect(target)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        status = conn.execute("SELECT status FROM orders WHERE id = 102002").fetchone()[0]
        assert status == "cancelled"
    finally:
        conn.close()
    again = sg("sessions", "export", ids["open"], str(target), "--data-dir", str(data_dir))
    assert again.exit_code == 1 and "exists" in again.output


def test_verify_offline_reproduces_stored_rewards(made):
    data_dir, ids = made
    d = ["--data-dir", str(data_dir)]
    gold = sg_json("sessions", "verify", ids["gold"], *d)
    assert gold["reward"] == 1.0 and gold["matches_stored"] is True
    noop = sg_json("sessions", "verify", ids["noop"], *d)
    assert noop["reward"] == 0.0 and noop["matches_stored"] is True
    assert "final state differs" in noop["failure_reason"]
    # The open session did the gold calls but was never verified: its state matches the gold.
    pending = sg_json("sessions", "verify", ids["open"], *d)
    assert pending["reward_components"]["state_match"] == 1.0 and pending["stored_reward"] is None
    human = sg("sessions", "verify", ids["noop"], *d)
    assert human.exit_code == 0 and "reward 0" in human.stdout


def test_gc_dry_run_keep_failed_and_removal(made, tmp_path):
    data_dir, ids = made
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    d = ["--data-dir", str(copy)]
    dry = sg_json("sessions", "gc", "--older-than", "0s", "--dry-run", *d)
    assert set(dry["sessions"]) == {ids["gold"], ids["noop"]} and dry["kept_open"] == 1
    assert len(sg_json("sessions", "list", *d)) == 3  # nothing removed by a dry run
    kept = sg_json("sessions", "gc", "--older-than", "0s", "--keep-failed", *d)
    assert kept["sessions"] == [ids["gold"]] and kept["kept_failed"] == 1
    assert kept["bytes_freed"] > 0
    assert not list((copy / "sessions" / "retail").glob(f"{ids['gold']}.sqlite*"))  # file, pack
    left = {r["id"] for r in sg_json("sessions", "list", *d)}
    assert left == {ids["noop"], ids["open"]}
    assert sg_json("sessions", "gc", "--older-than", "7d", *d)["removed"] == 0
    summary = sg("sessions", "gc", "--older-than", "0s", *d)
    assert summary.exit_code == 0 and "removed 1 session(s)" in summary.stdout


def test_gc_follows_the_retention_setting(made, tmp_path, monkeypatch):
    data_dir, ids = made
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    d = ["--data-dir", str(copy)]
    assert sg_json("sessions", "gc", *d)["older_than"] is None  # keep: nothing to do
    monkeypatch.setenv("STATEGYM_RETENTION", "keep_failed")
    assert sg_json("sessions", "gc", "--dry-run", *d)["sessions"] == [ids["gold"]]
    monkeypatch.setenv("STATEGYM_RETENTION", "keep_days")
    monkeypatch.setenv("STATEGYM_RETENTION_DAYS", "3")
    assert sg_json("sessions", "gc", "--dry-run", *d)["would_remove"] == 0


@pytest.mark.parametrize("retention, kept", [("keep_failed", {"noop"}), ("delete_on_close", set())])
def test_retention_applies_on_close(tmp_path, monkeypatch, retention, kept):
    monkeypatch.setenv("STATEGYM_RETENTION", retention)
    data_dir = tmp_path / "data"
    ids = build_rollouts(data_dir)
    sessions = data_dir / "sessions" / "retail"
    files = {
        name
        for name, sid in ids.items()
        if (sessions / f"{sid}.sqlite").exists() or (sessions / f"{sid}.sqlite.pack").exists()
    }
    assert files == kept | {"open"}  # an open session is never removed on someone else's close
