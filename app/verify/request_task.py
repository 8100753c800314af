"""Which task a verify scores: the one stored at seed, never the one in the request body.

A NeMo Gym verify body carries the whole task row back; merged over the stored task, a body with
`"ground_truth": [], "expected_outputs": []` could turn 0.0 into 1.0. So the body contributes
only the `response` (and the fields verify echoes); the scoring fields come from the task stored
at seed. A body whose scoring fields contradict the stored task is still validated (malformed
fields stay a 4xx) and is named in `task_mismatch`, which never changes the score.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.lru import LRU
from app.core.tasks import TaskSpec, task_from_data
from app.errors import InvalidTask

# Every field that changes a reward: the reference solution, the answer checks (text and
# submitted), the expected decline, the checks, the scoring mode, the judge's rubric, the answer
# kind and the seed (the gold replay starts there).
SCORING_FIELDS = (
    "seed",
    "ground_truth",
    "expected_outputs",
    "expected_state",
    "reward_mode",
    "judge",
    "answer_kind",
    "expected_answer",
    "answer_via",
    "expected_decline",
    "expected_decline_subject",
    "expected_decline_records",
)


@dataclass(frozen=True)
class ScoredTask:
    task: TaskSpec  # what verify scores: the stored task alone
    judge_input: dict[str, Any]  # the stored task, plus the prompt the judge reads as context
    mismatch: tuple[str, ...]  # scoring fields the body sent with other values


def _canonical(field: str, value: Any) -> Any:
    """A field's value in a form where equal meanings compare equal (arguments may arrive as
    a JSON string, expected_outputs as one string)."""
    if field == "ground_truth" and isinstance(value, list):
        calls = []
        for call in value:
            if isinstance(call, Mapping):
                args = call.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args or "{}")
                    except ValueError:
                        pass
                call = {"name": call.get("name"), "arguments": args}
            calls.append(call)
        return calls
    if field == "expected_outputs":
        return [value] if isinstance(value, str) else (value or [])
    if field in ("ground_truth", "expected_state"):
        return value or []
    return value


def scored_task(stored: Mapping[str, Any], body: Mapping[str, Any]) -> ScoredTask:
    """The stored task to score, and the scoring fields `body` contradicts.

    The body was validated by the route (app/server/models.VerifyBody): a malformed request is
    refused there, a well-formed but different one is flagged here.
    """
    sent = {k: v for k, v in body.items() if v is not None}
    mismatch = tuple(
        field
        for field in SCORING_FIELDS
        if field in sent and _canonical(field, sent[field]) != _canonical(field, stored.get(field))
    )
    judge_input = dict(stored)
    # The stored row drops NeMo Gym's own keys; the prompt is only the judge's context.
    if "responses_create_params" in body and "responses_create_params" not in judge_input:
        judge_input["responses_create_params"] = body["responses_create_params"]
    return ScoredTask(stored_task(stored), judge_input, mismatch)


# Parsed stored tasks by the digest of their JSON: the rollouts of one task (a GRPO group) parse
# it, and hash its seed for the gold and snapshot keys, once. Weighed as their JSON's size times
# what the parsed row holds beyond it (its `data` is the row itself), bounded by bytes.
TASK_CACHE_BYTES = 32 * 2**20
_PARSED_WEIGHT = 8
_tasks: LRU[bytes, tuple[TaskSpec, int]] = LRU(
    4096, max_bytes=TASK_CACHE_BYTES, size_of=lambda entry: entry[1]
)
_tasks_lock = threading.Lock()


def stored_task(stored: Mapping[str, Any]) -> TaskSpec:
    """`task_from_data(stored)`, parsed once per distinct content (InvalidTask as it raises).
    A TaskSpec is immutable, its keys computed once: rollouts of a task share one."""
    try:
        text = orjson.dumps(stored)
    except (TypeError, orjson.JSONEncodeError):  # not a JSON row (never stored): not kept
        return task_from_data(stored)
    key = hashlib.blake2b(text, digest_size=16).digest()
    with _tasks_lock:
        found = _tasks.get(key)
    if found is not None:
        return found[0]
    task = task_from_data(stored)
    with _tasks_lock:
        _tasks.put(key, (task, 512 + _PARSED_WEIGHT * len(text)))
    return task


# What a task row may ask verify to check besides SCORING_FIELDS: any `expected_*` field (an
# expected answer or refusal, whatever its name) and a judge's rubric.
_EXPECTED_PREFIX = "expected_"


def has_something_to_score(data: Mapping[str, Any]) -> bool:
    """Whether a task row asks verify to check anything: a reference solution, an expected
    output, answer, refusal or state, or a rubric. A row with none of them matches an untouched
    database, so scoring it would pay 1.0 for nothing."""
    for field, value in data.items():
        asks = field in ("ground_truth", "judge") or field.startswith(_EXPECTED_PREFIX)
        if asks and value not in (None, "", [], {}):
            return True
    return False


def require_something_to_score(data: Mapping[str, Any]) -> None:
    """InvalidTask (422) for a stateless verify whose task row asks nothing, saying what to send."""
    if not has_something_to_score(data):
        raise InvalidTask(
            "verify without a session cookie scores the task row in the body by replaying its "
            "response, and this body names nothing to score (no ground_truth, expected_outputs, "
            "expected_state or other expected_* field, nor a judge)",
            hint="Send the session cookie the seed set, or the task row's fields at the top "
            "level of the body (as NeMo Gym's reverify does) for a stateless replay.",
        )
