"""`stategym tasks audit`: shortcut policies that never read a tool output, scored by the real
verifier (replay_result over each task's snapshot, as a cookieless /verify scores).

The policies are tested the way a reward-seeking policy plays them: a memorised set (the test
set as its own training set) pays them in full, a training task that differs only in its
identifiers pays the substituting policy and not the plain replay. Then every registered
environment's generator and shipped set is audited against the targets (60 + 60 tasks in the
default run with looser limits, 300 + 300 under `slow` with the issue's targets).
"""

from __future__ import annotations

import copy
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli.audit import ReplayScore
from app.registry import environment_module, environment_names, load_environment
from app.taskgen.audit import (
    TARGETS,
    AuditReport,
    audit,
    gold_identifiers,
    request_of,
    shared_identifiers,
    substitution,
    text_identifiers,
)
from app.taskgen.driver import Request, Summary, generate

REPO = Path(__file__).resolve().parents[2]
ENVS = environment_names()
# Looser limits for 60 + 60 tasks (one identifier in 2 of 60 tasks is already 3.3 %).
SMALL = {
    "replay_family": 0.10,
    "replay_similar": 0.10,
    "substituted": 0.35,
    "keyword_decline": 0.65,
    "identifier_share": 0.05,
}
_SETS: dict[tuple[str, int, str, int], list[dict[str, Any]]] = {}


def generated(env: str, count: int, split: str, seed: int) -> list[dict[str, Any]]:
    """`count` generated tasks (in process, one worker), kept for the module's other tests."""
    key = (env, count, split, seed)
    if key not in _SETS:
        items = list(generate(Request(env, count, seed, split), 1))  # type: ignore[arg-type]
        assert isinstance(items.pop(), Summary)
        _SETS[key] = items  # type: ignore[assignment]
    return _SETS[key]


def shipped(env: str) -> list[dict[str, Any]]:
    package = importlib.import_module(environment_module(env))
    path = Path(str(package.__file__)).parent / "tasks.jsonl"
    if not path.is_file():
        pytest.skip(f"{env} ships no tasks.jsonl in this repository")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit")


def _audit(env: str, train: list, test: list, data_dir: Path) -> AuditReport:
    score = ReplayScore(load_environment(env), data_dir / env, len(test))
    return audit(train, test, score, seed=0)


# --- the pieces, without a database ------------------------------------------------------------
def test_identifiers_of_a_request_by_kind_in_order() -> None:
    text = (
        "Hi, I'm Mia Chen (mia.chen@example.org), zip 21297. Order #W1234567 of 2026-03-14 "
        "cost $12.50 at 10:30; charge card_9001002, not 12 items."
    )
    found = text_identifiers(text)
    assert found["email"] == ["mia.chen@example.org"]
    assert found["code"] == ["21297", "#W1234567", "card_9001002"]  # no date, time, amount
    assert found["name"] == ["Mia Chen"]


def test_gold_identifiers_are_ids_codes_emails_and_people() -> None:
    row = {
        "ground_truth": [
            {"name": "find", "arguments": {"first_name": "Mia", "last_name": "Chen", "zip": None}},
            {"name": "get", "arguments": {"customer_id": 42, "quantity": 2, "amount": 1500}},
            {"name": "sql", "arguments": {"query": "UPDATE e SET x = 1 WHERE id = 1234567"}},
            {"name": "decline_request", "arguments": {"reason": "r", "message": "No 12345."}},
        ]
    }
    assert gold_identifiers(row) == {"Mia Chen", "customer_id=42", "1234567"}
    rows = [row, {"ground_truth": row["ground_truth"][1:2]}]
    assert shared_identifiers(rows)[0] == ("customer_id=42", 2)


def test_substitution_maps_the_training_request_onto_the_test_request() -> None:
    sub = substitution(
        "Hi, I'm Ann Lee (ann@x.org). Cancel order #W1111111.",
        "Hi, I'm Bo Kim (bo@y.org). Cancel order #W2222222.",
    )
    calls = [
        {"name": "find", "arguments": {"email": "ann@x.org", "first": "Ann", "last": "Lee"}},
        {"name": "cancel", "arguments": {"order_number": "#W1111111", "ids": [1111111, 5]}},
    ]
    assert sub.apply(calls) == [
        {"name": "find", "arguments": {"email": "bo@y.org", "first": "Bo", "last": "Kim"}},
        {"name": "cancel", "arguments": {"order_number": "#W2222222", "ids": [2222222, 5]}},
    ]


# --- the policies against the real verifier ----------------------------------------------------
def test_a_memorised_set_pays_every_policy(data_dir: Path) -> None:
    """The test set as its own training set: replaying the most similar request's gold (the task
    itself) earns 1, so does the substituted replay, and the keyword decline on every refusal
    that changes nothing (a partial refusal also needs its writes); the scoring path pays a
    right play, which is what makes its zeros mean something."""
    test = generated("retail", 24, "test", 5)
    report = _audit("retail", test, test, data_dir)
    assert report.policies["replay_similar"].mean == 1.0
    assert report.policies["substituted"].mean == 1.0
    tools = load_environment("retail").tools
    writes = {t.name for t in tools if not t.read_only and not t.framework}
    pure = [
        t
        for t in test
        if "expected_decline" in t and not {c["name"] for c in t["ground_truth"]} & writes
    ]
    declined = report.policies["keyword_decline"]
    assert pure and declined.played == report.refusals and declined.wins == len(pure)
    assert 0 < report.policies["replay_family"].mean <= 1.0


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_the_substituting_policy_wins_what_only_ids_tell_apart(data_dir: Path) -> None:
    """A training task that is the test task with its order number changed: its gold replayed
    as is acts on an order that does not exist (0); with the test request's number put in, it
    is the test task's gold (1)."""

    def numbers(task: dict[str, Any]) -> set[str]:
        return {n for c in task["ground_truth"] if (n := c["arguments"].get("order_number"))}

    # A write on one order whose number the request states (a sweep over several orders differs
    # from its twin in more than one number; "-" once stood in for none and matched "multi-fuel").
    rows = [
        t
        for t in generated("retail", 60, "test", 7)
        if t["kind"] == "write" and len(numbers(t)) == 1 and min(numbers(t)) in request_of(t)
    ]
    assert rows, "no retail write task on one order names it in the request"
    test = rows[0]
    (number,) = numbers(test)
    train = json.loads(json.dumps(test).replace(number, "#W7777771"))
    train["family"] = "someone_else"
    report = _audit("retail", [train], [test], data_dir)
    assert report.policies["replay_similar"].mean == 0.0
    assert report.policies["substituted"].mean == 1.0
    family = report.policies["replay_family"]
    assert family.played == 1 and family.mean == 0.0  # no training task of its family


def test_keyword_decline_follows_the_closest_task_not_the_family(data_dir: Path) -> None:
    """On a refusal, the decline policy declines only when the closest training task declined:
    a closest task that acted gives no decline (0), whatever the family is called."""
    refusals = [t for t in generated("retail", 60, "test", 7) if t.get("expected_decline")]
    assert refusals
    test = refusals[0]
    acted = copy.deepcopy(test)
    del acted["expected_decline"]
    acted["ground_truth"] = acted["ground_truth"][:-1]
    assert _audit("retail", [acted], [test], data_dir).policies["keyword_decline"].mean == 0.0
    assert _audit("retail", [test], [test], data_dir).policies["keyword_decline"].mean == 1.0


# --- the CLI --------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "tasks", "audit", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_the_cli_prints_json_and_strict_fails_a_memorised_set(tmp_path: Path) -> None:
    rows = generated("retail", 24, "test", 5)
    path = _write(tmp_path / "t.jsonl", rows)
    done = _cli(str(path), str(path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["env"] == "retail" and report["test"] == 24
    assert report["policies"]["replay_similar"]["mean_reward"] == 1.0
    assert set(report["most_shared_identifier"]) == {"identifier", "tasks", "share", "target"}
    assert report["missed"]
    strict = _cli(str(path), str(path), "--strict")
    assert strict.returncode == 1 and "MISSED" in strict.stdout
    again = _cli(str(path), str(path), "--json")
    assert again.stdout == done.stdout  # deterministic


def test_a_malformed_file_is_one_readable_error(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.jsonl", generated("retail", 24, "test", 5)[:2])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": 1}\nnot json\n')
    done = _cli(str(good), str(bad))
    assert done.returncode == 2 and "bad.jsonl:2 is not valid JSON" in done.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    done = _cli(str(empty), str(good))
    assert done.returncode == 2 and "holds no task" in done.stderr


# --- every registered environment -------------------------------------------------------------
def _check(report: AuditReport, limits: dict[str, float]) -> None:
    """Every reward figure within its limit; then the identifier spread (base entities too:
    airline's flights and retail's products are each task's own, envs/<env>/taskgen)."""
    rewards = {k: v for k, v in limits.items() if k != "identifier_share"}
    missed = report.missed(rewards)
    assert not missed, f"{missed}; {json.dumps(report.as_dict()['policies'])[:2000]}"
    spread = report.missed({"identifier_share": limits["identifier_share"]})
    assert not spread, f"{spread}; top identifiers {report.top_identifiers[:5]}"


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_the_generator_meets_the_audit_on_60_and_60(env: str, data_dir: Path) -> None:
    train, test = generated(env, 60, "train", 9001), generated(env, 60, "test", 9002)
    _check(_audit(env, train, test, data_dir), SMALL)


@pytest.mark.parametrize("env", ENVS)
def test_the_shipped_set_meets_the_audit_against_a_generated_training_set(
    env: str, data_dir: Path
) -> None:
    """A policy trained on a generated set plays the shipped evaluation set; no identifier
    recurs across the shipped set's tasks (each shipped story is its own world)."""
    train, test = generated(env, 60, "train", 9001), shipped(env)
    limits = {**SMALL, "identifier_share": 1 / len(test)}
    _check(_audit(env, train, test, data_dir), limits)


@pytest.mark.slow
@pytest.mark.parametrize("env", ENVS)
def test_the_generator_meets_the_audit_targets_on_300_and_300(env: str, data_dir: Path) -> None:
    train, test = generated(env, 300, "train", 9001), generated(env, 300, "test", 9002)
    _check(_audit(env, train, test, data_dir), TARGETS)
