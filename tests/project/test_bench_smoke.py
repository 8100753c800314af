"""The benchmark harness in its tiny mode: real servers, real HTTP, every phase, JSON + PNG.

No timing is asserted: only that each phase ran, answered without errors, and that the rollouts
the harness drives are scored as the gold solution (reward 1) by both servers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.suite import main
from tests.conftest import REPO


@pytest.mark.slow  # load test: make test-slow (CI runs it)
def test_quick_bench_runs_every_phase(tmp_path: Path) -> None:
    results = main(["--quick", "--out", str(tmp_path)])

    written = json.loads(next(tmp_path.glob("bench-*.json")).read_text())
    assert next(tmp_path.glob("bench-*.png")).stat().st_size > 0
    assert written["ratios"] == results["ratios"]
    for name in ("retail", "large"):
        assert results["seed"][name]["cold"]["n"] >= 1
        assert results["seed"][name]["warm"]["errors"] == 0
        assert results["seed"][name]["warm"]["server_p50_ms"] is not None  # X-Process-Time
    assert results["seed"]["large"]["rows"] > results["seed"]["retail"]["rows"]
    for server in ("stategym", "stategym-2w", "baseline", "lean"):
        runs = results["tools"][server]
        assert {(r["tool"], r["concurrency"]) for r in runs} == {
            (kind, c) for kind in ("read", "write") for c in (1, 4)
        }
        assert all(r["errors"] == 0 and r["n"] > 0 for r in runs), runs
    assert results["verify"]["reward"] == 1.0
    assert results["verify"]["cached"]["errors"] == 0
    for name in ("stategym-1w", "stategym-2w", "baseline-1w", "lean-1w"):
        rollouts = results["rollouts"][name]
        assert rollouts["rollouts"] > 0 and rollouts["request_errors"] == 0, rollouts
        assert rollouts["mean_reward"] == 1.0
    capacity = results["capacity"]
    assert capacity["live_sessions"] == 30
    assert capacity["sample"]["errors"] == 0 and capacity["sample"]["n"] == 5
    assert capacity["rss_mb"] > 0 and capacity["open_fds"] > 0 and capacity["disk_mb"] > 0
    assert results["burst"]["errors"] == 0 and results["burst"]["n"] == 20


# --- the optimisations the benchmark led to keep verify's answers identical ---------------------
def _retail_session(tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.core.tasks import task_from_data
    from app.registry import load_environment
    from app.storage.sqlite import db as sqlite_db
    from app.storage.sqlite.store import Store
    from bench.tasks import rollout_task

    env = load_environment("retail")
    store = Store(tmp_path / "data", env)
    task = task_from_data(rollout_task())
    snapshot = store.snapshot(task)
    pristine = sqlite_db.memory_from_image(snapshot.image)
    session = sqlite_db.memory_from_image(snapshot.image)
    return env, task, snapshot, pristine, session


def _dump(env, conn):  # type: ignore[no-untyped-def]
    from app.storage.sqlite import db as sqlite_db
    from app.verify.state.dump import dump_state

    bind = sqlite_db.bind_connection(conn, begin="BEGIN")
    try:
        with bind.begin():
            return dump_state(bind, env.metadata.tables, env.compare)
    finally:
        bind.close()


def test_tracked_verify_dump_equals_a_full_dump(tmp_path: Path) -> None:
    from app.storage.runner import run_tool
    from app.storage.sqlite import db as sqlite_db
    from app.storage.tracking import tracked_changes

    env, task, snapshot, pristine, session = _retail_session(tmp_path)
    seed_state = _dump(env, pristine)  # a pristine clone: remembered for reuse
    bind = sqlite_db.bind_connection(session)
    for call in task.ground_truth:  # the gold writes addresses and the audit log
        assert "output" in run_tool(bind, env.tool_named(call.name), call.arguments, _ctx(snapshot))
    bind.close()
    # A customer's natural key changes: tables that reference customers must be re-read too.
    session.execute("UPDATE customers SET email = 'renamed@example.org' WHERE id = 101800")
    # A change that is not a key: what references orders resolves as before.
    session.execute("UPDATE orders SET status = 'processed' WHERE id = 101800")
    changes = tracked_changes(session, env.metadata.tables)
    # A row inserted into audit_log marks no "#key": every reference to it is a foreign key.
    assert changes.tables == {"addresses", "audit_log", "customers", "customers#key", "orders"}
    assert changes.rows["orders"] == {101800} and changes.rows["customers"] == {101800}
    assert len(changes.rows["audit_log"]) == 1  # the gold's one audit entry

    reused = _dump(env, session)
    session.execute("DROP TRIGGER _stategym_step_products_update")  # the log now incomplete
    assert tracked_changes(session, env.metadata.tables) is None
    full = _dump(env, session)
    assert reused == full
    assert reused["products"] is seed_state["products"]  # untouched: the pristine dump, reused
    assert reused["orders"] != seed_state["orders"]  # orders resolve customer ids to emails
    assert reused["order_items"] is seed_state["order_items"]  # no "orders#key"


def test_a_rolled_back_or_renamed_table_is_never_trusted(tmp_path: Path) -> None:
    from app.storage.tracking import tracked_changes

    env, _task, _snapshot, _pristine, session = _retail_session(tmp_path)
    session.execute("BEGIN")
    session.execute("UPDATE products SET name = name || '!'")
    session.execute("ROLLBACK")
    assert tracked_changes(session, env.metadata.tables).tables == set()
    session.execute("ALTER TABLE exchanges RENAME TO exchanges_old")
    # The triggers follow the table but still record the old name: tracking is not trusted.
    assert tracked_changes(session, ["exchanges_old"]) is None


def _ctx(snapshot):  # type: ignore[no-untyped-def]
    from app.sdk.environment import ToolContext

    return ToolContext(now=snapshot.now, session_id="test", task_id=None)


# --- the lean baseline and the targets harness ----------------------------------------------------
# The lean baselines' gold rollouts, for every environment: tests/verify/test_lean_baselines.py.


@pytest.mark.slow  # load test: make test-slow (CI runs it)
def test_quick_targets_produce_every_figure(tmp_path: Path) -> None:
    from bench.targets import main as targets

    only = ["--only", "rollout", "--only", "latency", "--only", "burst"]
    res = targets(["--quick", "--out", str(tmp_path), *only])
    assert next(tmp_path.glob("targets-*.json")).stat().st_size > 0
    for env in ("retail", "airline"):
        entry = res["rollout"][env]
        for server in ("stategym", "lean"):
            r = entry[server]
            assert r["rollouts"] > 0 and r["errors"] == 0 and r["mean_reward"] == 1.0, r
        assert entry["ratio"] > 0
    for server in ("stategym", "lean"):
        for kind in ("seed", "tool", "verify", "close"):
            assert res["latency"][server][kind]["p50_ms"] is not None
    assert res["burst"]["n"] == 20 and res["burst"]["errors"] == 0


@pytest.mark.slow  # load test: make test-slow (CI runs it)
def test_cpu_split_reads_every_thread_of_a_real_server(tmp_path: Path) -> None:
    from bench.cpu_split import measure, report
    from bench.servers import start_stategym

    server = start_stategym(tmp_path / "sg", max_open_sessions=64)
    try:
        split = measure(server, "retail", concurrency=4, seconds=1.0, warm_seconds=0.5)
    finally:
        server.stop()
    assert split["rollouts"] > 0 and split["errors"] == 0 and split["mean_reward"] == 1.0
    # The event loop and the worker threads both ran: seeds, verifies and closes go to workers.
    assert len(split["threads_ms"]) >= 2, split["threads_ms"]
    assert sum(split["threads_ms"].values()) > 0 and split["client_ms"] > 0
    assert "ms/rollout" in report("StateGym", split)


@pytest.mark.slow  # load test: make test-slow (CI runs it)
def test_cpu_split_ab_runs_each_checkout_in_turn(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cpu_split import main
    from bench.servers import ROOT

    argv = ["--ab", f"a={ROOT}", "--ab", f"b={ROOT}:STATEGYM_TOOL_THREADS=1"]
    main([*argv, "--rounds", "1", "--seconds", "1", "--concurrency", "4"])
    out = capsys.readouterr().out
    for label in ("a", "b"):
        line = next(x for x in out.splitlines() if x.startswith(f"round 1 {label}:"))
        assert "ms server CPU per rollout" in line and "errors 0" in line, line
        assert f"{label}: mean " in out


# --- the entry point and the index ------------------------------------------------------------
def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_bench_lists_every_benchmark() -> None:
    from bench.__main__ import RUNNABLE

    listed = _bench("--list")
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert names == set(RUNNABLE)
    unknown = _bench("no_such_benchmark")
    assert unknown.returncode == 2 and "no benchmark named" in unknown.stderr


def test_python_m_bench_runs_a_benchmark_by_name() -> None:
    """The smallest benchmark there is: one pruner pass over 1,200 control records."""
    ran = _bench("control_growth", "--prune-cost", "1200")
    assert ran.returncode == 0, ran.stderr
    assert "500 to prune (pruned 500)" in ran.stdout, ran.stdout


def test_every_bench_module_is_listed_or_support_and_in_the_index() -> None:
    from bench.__main__ import RUNNABLE, SUPPORT

    modules = {p.stem for p in (REPO / "bench").glob("*.py")} - {"__init__", "__main__"}
    assert modules == set(RUNNABLE) | set(SUPPORT)
    assert len(RUNNABLE) + len(SUPPORT) == len(modules)  # none in both
    index = (REPO / "bench" / "README.md").read_text()
    assert len(index.splitlines()) <= 120, "bench/README.md is an index: runs go to bench/history/"
    assert [m for m in RUNNABLE if f"`{m}`" not in index] == []
    linked = set(re.findall(r"\]\((history/[\w.-]+\.md)\)", index))
    history = {f"history/{p.name}" for p in (REPO / "bench" / "history").glob("*.md")}
    assert linked == history  # every link resolves, every history file is indexed


_OLD_SECTION = re.compile(r"bench/README\.md`?,? \(?(\"[^\"]+\"|round \d+)")
_CITED_FILE = re.compile(r"bench/history/([\w.-]+\.md)")
_CITED_TITLE = re.compile(r"bench/history/([\w.-]+\.md)`?,? \(?\"([^\"]+)\"")
_CITED_ROUND = re.compile(r"bench/history/rounds\.md`?,? \(?\"?round (\d+)")


def test_citations_of_bench_history_name_a_file_and_a_heading_it_has() -> None:
    """Code and docs cite a run as (bench/history/<topic>.md, "part of a heading") or
    (..., round N); the notebook they cited before, bench/README.md's sections, is gone."""
    bad = []
    for top in ("app", "envs", "tests", "bench", "docs", "scripts"):
        for path in sorted((REPO / top).rglob("*")):
            if path.suffix not in (".py", ".md") or "history" in path.parts:
                continue
            bad += _bad_citations(path)
    bad += _bad_citations(REPO / "README.md") + _bad_citations(REPO / "Makefile")
    assert bad == []


def _bad_citations(path: Path) -> list[str]:
    # Comment and docstring lines wrap: join them, dropping the comment marks.
    text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", path.read_text())
    name = path.relative_to(REPO)
    bad = [f"{name}: bench/README.md section {m!r}" for m in _OLD_SECTION.findall(text)]
    for cited in _CITED_FILE.findall(text):
        if not (REPO / "bench" / "history" / cited).exists():
            bad.append(f"{name}: no bench/history/{cited}")
    for cited, title in _CITED_TITLE.findall(text):
        headings = _headings(cited)
        if headings and not any(title.lower() in h for h in headings):
            bad.append(f"{name}: bench/history/{cited} has no heading {title!r}")
    for number in _CITED_ROUND.findall(text):
        if not any(f"round {number}" in h for h in _headings("rounds.md")):
            bad.append(f"{name}: bench/history/rounds.md has no round {number}")
    return bad


def _headings(history_file: str) -> list[str]:
    path = REPO / "bench" / "history" / history_file
    if not path.exists():
        return []
    return [line.lower() for line in path.read_text().splitlines() if line.startswith("#")]
