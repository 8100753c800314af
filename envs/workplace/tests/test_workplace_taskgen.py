"""Generated workplace tasks teach: every draw its own world, twins whose data (not wording)
decides the outcome, a row `kind` that follows it, a hard tier, and shortcut policies that never
read a tool output earning next to nothing (played through the real replay verifier)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from app.cli.reverify import _Envs, reverify_row
from app.taskgen.draw import choices, draw
from app.taskgen.driver import Request, generate
from app.taskgen.kit import HARD_TIER_STEPS
from app.taskgen.registry import load_generator

GEN = load_generator("workplace")
# What an agent passes that names one entity: deal, event and message codes, addresses, keys.
IDENTIFIER = re.compile(r"^(D-\d+|EV-\d+|<[^>]+>|[\w.]+@[\w.]+|[A-Z]+\d+(-\d+)?)$")


def _draws(families: list[str] | None, n: int, seed: int = 3) -> list[dict[str, Any]]:
    pool = choices(GEN, "train", families)
    return [t for i in range(n) if (t := draw(GEN, "train", seed, i, pool).task) is not None]


def _values(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [v for value in x.values() for v in _values(value)]
    if isinstance(x, list):
        return [v for value in x for v in _values(value)]
    return [x]


@pytest.mark.slow
def test_no_identifier_recurs_across_generated_tasks() -> None:
    tasks = _draws(None, 80)
    seen: Counter[str] = Counter()
    for t in tasks:
        found = {
            v
            for c in t["ground_truth"]
            for v in _values(c["arguments"])
            if isinstance(v, str) and IDENTIFIER.match(v)
        }
        seen.update(found)
    assert seen, "the gold names no identifier"
    value, count = seen.most_common(1)[0]
    assert count <= 2, f"{value} is in the gold of {count} of {len(tasks)} tasks"


@pytest.mark.parametrize("family", ["conflict", "refuse_skip_stage", "set_amount", "reschedule"])
def test_twins_go_both_ways_with_the_same_wording_and_kind_follows(family: str) -> None:
    tasks = _draws([family], 14)
    outcomes = {bool(t.get("expected_decline")) for t in tasks}
    assert outcomes == {True, False}, family
    for t in tasks:
        names = [c["name"] for c in t["ground_truth"]]
        if t.get("expected_decline"):
            assert names[-1] == "decline_request"
            # A refusal is labelled one, unless the gold also did an allowed part (a write).
            assert t["kind"] == ("write" if any(_writes(n) for n in names) else "refusal")
        else:
            assert t["kind"] == "write" and "decline_request" not in names


def test_a_calendar_conflict_refusal_is_labelled_a_refusal() -> None:
    # It was labelled `read` (the family's name does not start with "refuse").
    refused = [t for t in _draws(["conflict"], 24) if t.get("expected_decline")]
    assert {t["expected_decline"] for t in refused} == {"calendar_conflict"}
    # Those that also answer an invitation (allowed) are writes; the others are refusals.
    only = [t for t in refused if not any(_writes(c["name"]) for c in t["ground_truth"])]
    assert only and {t["kind"] for t in only} == {"refusal"}


@pytest.mark.slow
def test_the_hard_tier_composes_several_intents_and_passes_every_check() -> None:
    request = Request(
        env="workplace", count=8, seed=4, families=("account_handover", "quote_close")
    )
    tasks = [t for t in generate(request) if isinstance(t, dict)]
    assert len(tasks) == 8  # each passed the validator: gold 1, no-op 0, answers and declines
    for t in tasks:
        writes = [c for c in t["ground_truth"] if _writes(c["name"])]
        steps = [c for c in t["ground_truth"] if c["name"] != "decline_request"]
        assert t["difficulty"] >= 4 and len(steps) >= HARD_TIER_STEPS, t["task_id"]
        assert len({c["name"] for c in writes}) >= 2 and len(writes) >= 3, t["task_id"]


def test_a_pipeline_review_is_long_enough_for_the_hard_tier() -> None:
    request = Request(env="workplace", count=6, seed=9, families=("pipeline_review",))
    tasks = [t for t in generate(request) if isinstance(t, dict)]
    assert len(tasks) == 6
    for t in tasks:
        steps = [c for c in t["ground_truth"] if c["name"] != "submit_answer"]
        assert len(steps) >= HARD_TIER_STEPS and t["difficulty"] >= 4, t["task_id"]


def _writes(name: str) -> bool:
    tool = GEN.env.tool_named(name)
    return tool is not None and not tool.read_only and not tool.framework


def _request_words(t: dict[str, Any]) -> set[str]:
    return set(
        re.findall(r"[a-z0-9']+", t["responses_create_params"]["input"][-1]["content"].lower())
    )


def _response(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "output": [
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": c["name"],
                "arguments": json.dumps(c["arguments"]),
            }
            for i, c in enumerate(calls)
        ]
    }


@pytest.mark.slow
def test_shortcut_policies_that_never_read_a_tool_output_earn_next_to_nothing(
    tmp_path: Path,
) -> None:
    train = [t for t in generate(Request("workplace", 80, 9001)) if isinstance(t, dict)]
    test = [t for t in generate(Request("workplace", 80, 9002, "test")) if isinstance(t, dict)]
    envs = _Envs(tmp_path, "workplace")
    by_family: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in train:
        by_family[t["family"]].append(t)
    words = [(_request_words(t), t) for t in train]
    rng = random.Random(0)
    replay, similar, declined = [], [], []
    for t in test:

        def score(calls: list[dict[str, Any]], t: dict[str, Any] = t) -> float:
            return float(reverify_row(envs, {**t, "response": _response(calls)}, 20)["reward"])

        if by_family[t["family"]]:
            replay.append(score(rng.choice(by_family[t["family"]])["ground_truth"]))
        w = _request_words(t)
        near = max(words, key=lambda x: len(w & x[0]) / max(1, len(w | x[0])))[1]
        similar.append(score(near["ground_truth"]))
        if t.get("expected_decline"):
            code = near.get("expected_decline") or "deal_closed"
            declined.append(
                score(
                    [{"name": "decline_request", "arguments": {"reason": code, "message": "No."}}]
                )
            )
    # 300 + 300 tasks measure 0.04 and 0.03; this smaller sample allows for its noise.
    assert sum(replay) / len(replay) <= 0.1
    assert sum(similar) / len(similar) <= 0.1
    assert declined and sum(declined) / len(declined) <= 0.55
