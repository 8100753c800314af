"""What `stategym tasks generate` reports about a set's spread, and what every draw now gets by
default: a task's kind follows its gold (twins), distractors in most tasks, voices without
template seams ("Good morning. Hi, I'm ...", "Quick request: Hi, ...")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import environment_names
from app.taskgen.audit import gold_identifiers, request_of, shared_identifiers
from app.taskgen.driver import Request, Summary, generate
from app.taskgen.kit import kind
from app.taskgen.registry import load_generator
from app.taskgen.splits import VOICES, in_voice

ENVS = environment_names()
_SETS: dict[tuple[str, str], list[dict[str, Any]]] = {}


def _generated(env: str, split: str) -> list[dict[str, Any]]:
    if (env, split) not in _SETS:
        items = list(generate(Request(env, 40, 21, split), 1))  # type: ignore[arg-type]
        assert isinstance(items.pop(), Summary)
        _SETS[env, split] = items  # type: ignore[assignment]
    return _SETS[env, split]


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_generate_reports_golds_identifiers_twins_and_distractors(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    args = ["tasks", "generate", "--env", "retail", "--count", "30", "--seed", "4", "--jobs", "1"]
    result = CliRunner().invoke(cli, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    golds = {json.dumps(r["ground_truth"], sort_keys=True) for r in rows}
    assert summary["distinct_gold_call_lists"] == len(golds)
    assert summary["distinct_identifiers"] > len(rows)
    top = summary["most_shared_identifier"]
    assert top["tasks"] == sum(top["identifier"] in gold_identifiers(r) for r in rows)
    assert (top["identifier"], top["tasks"]) == shared_identifiers(rows)[0]
    assert top["share"] == round(top["tasks"] / 30, 4)
    for family, kinds in summary["twins"].items():  # every family with a refusal, by kind
        assert kinds == dict(
            sorted(
                (k, sum(r["family"] == family and r["kind"] == k for r in rows))
                for k in {r["kind"] for r in rows if r["family"] == family}
            )
        )
    distracted = sum(v["with_distractor"] for v in summary["distractors"].values())
    assert distracted == sum(bool(r["distractors"]) for r in rows)
    text = CliRunner().invoke(cli, [*args, str(tmp_path / "t.jsonl")]).output
    assert "distinct gold call lists" in text and "distractors:" in text


def test_kind_follows_the_gold_not_the_family_name() -> None:
    """Twins: a refuse_* family's allowed twin acts (write); an action family's forbidden twin
    declines (refusal), so the kind says what the data decided."""
    gen = load_generator("retail")
    decline = {"name": "decline_request", "arguments": {"reason": "x", "message": "no"}}
    lookup = {"name": "find_customer_by_email", "arguments": {"email": "a@b.c"}}
    write = {"name": "cancel_pending_order", "arguments": {"order_number": "#W1", "reason": "x"}}
    assert kind(gen, [lookup, decline], "cancel") == "refusal"
    assert kind(gen, [lookup, write], "refuse_status") == "write"
    assert kind(gen, [lookup], "refuse_status") == "refusal"  # a legacy refusal row
    answer = {"name": "submit_answer", "arguments": {"answer": "1"}}
    assert kind(gen, [lookup, answer], "refuse_status") == "read"


# Where the framework's merged distractor (another story's people and rows beside the task's)
# is still rarely kept: the draw keeps it only when the gold's results do not change, and these
# stories' own look-alikes (envs/<env>/README.md: a second card, other trips, other merchants'
# holds, older fees) are what a lookup must tell apart there. A strict xfail: it fails the day
# the share passes, so the mark goes then.
FEW_MERGED_DISTRACTORS = {
    "airline": "its stories' look-alikes are their own; a merged story changes the golds",
    "ledger": "its stories' look-alikes are their own; a merged story changes the golds",
}


@pytest.mark.parametrize(
    "env",
    [
        pytest.param(env, marks=pytest.mark.xfail(strict=True, reason=FEW_MERGED_DISTRACTORS[env]))
        if env in FEW_MERGED_DISTRACTORS
        else env
        for env in ENVS
    ],
)
def test_most_tasks_hold_a_distractor(env: str) -> None:
    rows = _generated(env, "train")
    share = sum(bool(r["distractors"]) for r in rows) / len(rows)
    assert share >= 0.5, f"{env}: {share:.0%} of tasks hold a distractor"


_OPENERS = {o.strip() for split in VOICES.values() for o, _ in split if o}
_SEAM = re.compile(
    "^(?:" + "|".join(re.escape(o) for o in sorted(_OPENERS)) + r") (?:Hi|Hello|Hey)\b"
)
_THANKS = re.compile(r"(?i)\b(?:thanks|thank you)\b")


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_generated_requests_have_no_template_seams(env: str, split: str) -> None:
    for row in _generated(env, split):
        text = request_of(row)
        assert not _SEAM.match(text), f"{row['task_id']}: {text[:120]}"
        last = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)[-2:]
        assert sum(bool(_THANKS.search(s)) for s in last) <= 1, f"{row['task_id']}: {text}"


_HI = "Hi, I'm Mia (m@x.org). Cancel it."
VOICED = [
    ("Good morning. ", _HI, "", "Good morning. I'm Mia (m@x.org). Cancel it."),
    ("Quick request: ", _HI, "", "Hi, I'm Mia (m@x.org). Quick request: Cancel it."),
    ("Sorry to bother you. ", "Hello, is SG1 late?", "", "Sorry to bother you. Is SG1 late?"),
    ("", "Hi, I'm Mia. Cancel it. Thanks.", " Thanks!", "Hi, I'm Mia. Cancel it. Thanks."),
    ("Hello. ", "Cancel order #W1.", " Cheers.", "Hello. Cancel order #W1. Cheers."),
]


@pytest.mark.parametrize(("opener", "text", "closer", "expected"), VOICED)
def test_in_voice(opener: str, text: str, closer: str, expected: str) -> None:
    assert in_voice(opener, text, closer) == expected
