"""Rephrasing a generated request as its environment declares (app/sdk/phrasing.py) keeps every
fact and draws train and test wordings from disjoint pools (app/taskgen/phrasing.py)."""

from __future__ import annotations

import json
import random
import re

import pytest

from app.registry import environment_names, load_environment
from app.taskgen.phrasing import pools, rephrase
from app.taskgen.registry import load_generator
from app.taskgen.splits import VOICES

# Ids, amounts, dates, emails, codes: every token holding a digit or an @.
FACT = re.compile(r"[\w.@#'-]*[\d@][\w.@#'-]*")


def _prompts(env: str) -> list[str]:
    rows = [json.loads(line) for line in load_environment(env).tasks_path.read_text().splitlines()]
    return [r["responses_create_params"]["input"][-1]["content"] for r in rows]


def _facts(text: str) -> list[str]:
    return sorted(m.rstrip(".,;:)") for m in FACT.findall(text))


@pytest.mark.parametrize("env", environment_names())
def test_rephrasing_keeps_every_fact(env: str) -> None:
    applied = set()
    phrasing = load_generator(env).phrasing
    for n, prompt in enumerate(_prompts(env)):
        for split in ("train", "test"):
            for k in range(6):
                out = rephrase(prompt, split, random.Random(f"{n}/{split}/{k}"), phrasing)
                assert _facts(out.text) == _facts(prompt), (prompt, out.text)
                applied.update(re.sub(r"\d+$", "", t) for t in out.tags)
                # The person's name too (the capitalised words stay, in some order).
                names = set(re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", prompt))
                assert all(name in out.text for name in names if "Hi" not in name)
    assert {"aside"} <= applied


def test_every_rewrite_is_used_somewhere() -> None:
    applied = set()
    for env in environment_names():
        phrasing = load_generator(env).phrasing
        for n, prompt in enumerate(_prompts(env)):
            out = rephrase(prompt, "train", random.Random(n), phrasing)
            applied.update(re.sub(r"\d+$", "", t) for t in out.tags)
    assert applied == {"ask", "confirm", "late-id", "aside"}


def test_late_identification_moves_the_customer_after_the_request() -> None:
    prompt = (
        "I'm Mia Chen (mia.chen1@example.org). Please cancel order #W9001000. "
        "You have my confirmation, please go ahead."
    )
    retail = load_generator("retail").phrasing
    for seed in range(40):
        out = rephrase(prompt, "test", random.Random(seed), retail)
        if any(t.startswith("late-id") for t in out.tags):
            assert not out.text.startswith("I'm")
            assert out.text.index("#W9001000") < out.text.index("Mia Chen")
            return
    raise AssertionError("late identification never drawn")


@pytest.mark.parametrize("env", environment_names())
def test_train_and_test_wordings_are_disjoint(env: str) -> None:
    phrasing = load_generator(env).phrasing
    assert not pools("train", phrasing) & pools("test", phrasing)
    voices = [{v for pair in VOICES[s] for v in pair if v} for s in ("train", "test")]
    assert not voices[0] & voices[1]
