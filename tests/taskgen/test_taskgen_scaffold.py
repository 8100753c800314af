"""`stategym new-env`'s generator teaches: an action, an answer and a refusal family with twins,
on worlds of their own, whose generated sets pass `stategym tasks audit` as an author runs it
(the package written, pip-installed into a folder of its own, the CLI in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.taskgen.audit import TARGETS

REPO = Path(__file__).resolve().parents[2]
# 80 + 80 tasks: an identifier in 2 of 80 tasks is 2.5 %, so the share's limit is looser.
SMALL = {**TARGETS, "identifier_share": 0.04}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`stategym new-env library`, pip-installed; the environment variables that import it."""
    root = tmp_path_factory.mktemp("author") / "stategym-library"
    site = root.parent / "site"
    done = _run(["new-env", "library", "--dir", str(root)], dict(os.environ))
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
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


def _sets(env: dict[str, str], tmp_path: Path, count: int) -> tuple[Path, Path, dict]:
    files = []
    for split, seed in (("train", 9001), ("test", 9002)):
        out = tmp_path / f"{split}.jsonl"
        args = ["--count", str(count), "--seed", str(seed), "--split", split, "--json"]
        done = _run(["tasks", "generate", "--env", "library", *args, str(out)], env)
        assert done.returncode == 0, done.stderr
        files.append(out)
    return files[0], files[1], json.loads(done.stdout)


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_the_scaffold_has_three_kinds_of_family_with_twins(
    library: dict[str, str], tmp_path: Path
) -> None:
    train, test, summary = _sets(library, tmp_path, 80)
    rows = [json.loads(line) for line in test.read_text().splitlines()]
    assert {r["family"] for r in rows} == {"lend", "due_date", "refuse_lend_popular"}
    # Twins: both families act in some worlds and decline in others, worded from one pool.
    assert summary["twins"]["lend"].keys() == {"refusal", "write"}
    assert summary["twins"]["refuse_lend_popular"].keys() == {"refusal", "write"}
    assert {r["expected_decline"] for r in rows if r.get("expected_decline")} == {
        "too_many_loans",
        "overdue_loan",
        "no_copy_available",
    }
    assert summary["distinct_gold_call_lists"] == 80
    done = _run(["tasks", "audit", str(train), str(test), "--json"], library)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    figures = {n: p["mean_reward"] for n, p in report["policies"].items()}
    figures["identifier_share"] = report["most_shared_identifier"]["share"]
    missed = {n: v for n, v in figures.items() if v > SMALL[n]}
    assert not missed, report


@pytest.mark.slow
def test_the_scaffold_meets_the_audit_targets_on_300_and_300(
    library: dict[str, str], tmp_path: Path
) -> None:
    train, test, _ = _sets(library, tmp_path, 300)
    done = _run(["tasks", "audit", str(train), str(test), "--strict"], library)
    assert done.returncode == 0, done.stdout + done.stderr
