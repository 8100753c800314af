"""Scoring what the agent submitted: the answer table's one row, compared by value.

An answer task (`expected_answer`, read "via tool") matches only when the submitted JSON value
parses as exactly one value of the expected kind (or, for a list, a set of them) and equals the
expected one (app/core/values.py). A refusal task (`expected_decline`) matches only a decline
with exactly its code, about the record(s) it concerns. On any other task a decline is a
failure ("declined a task that needed an action") and an answer is ignored. Two values, a
sentence with rivals, glued tokens, nothing submitted, or the other tool: a mismatch whose
evidence says why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, select

from app.core import values
from app.sdk.answer import ANSWER_TABLE, RESERVED_TOOL_NAMES
from app.verify.state import table_reads

if TYPE_CHECKING:
    from app.core.tasks import ExpectedAnswer, TaskSpec


@dataclass(frozen=True)
class Submission:
    """The answer table's row: `kind` is "answer" (with `value`) or "decline" (with `reason`)."""

    kind: str
    value: Any = None
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Match:
    """How the submission scores: its reward component, its evidence and a failure reason."""

    component: str  # "answer_match" | "decline_match"
    ok: bool
    evidence_key: str  # "answer" | "decline": verification.<key>
    evidence: dict[str, Any]
    reason: str | None
    # A decline on a task that needed an action: the whole reward is 0, whatever the state.
    voids: bool = False


def read_submission(conn: Connection, tables: Any) -> Submission | None:
    """The answer row in the state `conn` sees (None: nothing was submitted)."""
    table: Table | None = tables.get(ANSWER_TABLE)
    if table is None:
        return None
    # Text columns, read raw: SQL text cached per table, as the dumps' reads (~0.3 ms a verify
    # building and compiling the select each time).
    columns = (table.c.kind, table.c.value, table.c.reason, table.c.message)
    rows = list(table_reads.execute(conn, ("submission", table), lambda: select(*columns)))
    if not rows:
        return None
    kind, raw, reason, message = rows[0]
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        value = raw  # written outside submit_answer: scored as the text it is
    return Submission(str(kind), value, reason, message)


def written_outside_tools(step_tools: dict[int, str], counts: dict[int, dict[str, int]]) -> bool:
    """Whether a step other than submit_answer/decline_request wrote the answer table (a SQL
    console's INSERT or DELETE): such a row is no submission the framework vouches for."""
    # A change with no step row was made by an unlogged replay (`tasks check`, the gold's
    # replay): a served session logs every call's step in the call's own transaction.
    return any(
        ANSWER_TABLE in per_table
        and step in step_tools
        and step_tools[step] not in RESERVED_TOOL_NAMES
        for step, per_table in counts.items()
    )


def submitted_at(counts: dict[int, dict[str, int]]) -> int | None:
    """The step that wrote the answer row (the first step that changed the answer table)."""
    steps = [step for step, per_table in counts.items() if ANSWER_TABLE in per_table]
    return min(steps) if steps else None


def _shown(value: Any) -> Any:
    return value if not isinstance(value, str) or len(value) <= 200 else value[:200] + "…"


def answer_match(expected: ExpectedAnswer, submission: Submission | None) -> Match:
    """An answer task's verdict on the submitted row."""
    evidence: dict[str, Any] = {
        "expected": {"kind": expected.kind, "value": expected.value},
        "submitted": None,
        "ok": False,
        "reason": None,
    }

    def failed(why: str) -> Match:
        evidence["reason"] = why
        return Match("answer_match", False, "answer", evidence, f"answer: {why}")

    if submission is None:
        return failed("nothing was submitted (call submit_answer with the value)")
    if submission.kind != "answer":
        evidence["submitted"] = {"declined": submission.reason}
        return failed(f"declined ({submission.reason}) a task that asks for an answer")
    evidence["submitted"] = _shown(submission.value)
    verdict = values.check(expected.kind, expected.value, submission.value)
    if not verdict.ok:
        return failed(verdict.reason)
    evidence["ok"] = True
    return Match("answer_match", True, "answer", evidence, None)


def text_answer_match(expected: ExpectedAnswer, text: str) -> Match:
    """`answer_via: "text"`: the final message's values of the kind, found by the one
    tokenizer (whole tokens only), must be exactly the expected value (or set)."""
    evidence: dict[str, Any] = {
        "expected": {"kind": expected.kind, "value": expected.value},
        "submitted": _shown(text),
        "via": "text",
        "ok": False,
        "reason": None,
    }
    want = values.parse_answer(expected.kind, expected.value, many=expected.many)
    wanted = list(want) if expected.many else [want]
    tokens = values.tokens(text)
    if expected.kind not in _DIGIT_KINDS + ("email",):
        # Names, text, yes/no: present as whole words, in order; rivals are not told apart
        # from other words here (the answer tool is the way to score these exactly).
        words = [t.text.casefold() for t in tokens]
        if expected.kind == "boolean":
            said = {v for w in words for v in [_YES_NO.get(w)] if v is not None}
            absent = [w for w in wanted if said != {w}]
        else:
            absent = [w for w in wanted if not _has_words(words, str(w).split())]
        if absent:
            named = ", ".join(values.describe(expected.kind, m) for m in absent)
            lacking = f"the final message does not say (only) {named}"
            evidence["reason"] = lacking
            return Match("answer_match", False, "answer", evidence, f"answer: {lacking}")
        evidence["ok"] = True
        return Match("answer_match", True, "answer", evidence, None)
    typed = [t for t in tokens if _of_kind(expected.kind, t.kind)]
    # An amount in another currency (`€72.99` for a dollar amount) is another amount: a rival.
    currency = values.expected_currency(expected.kind, expected.value)
    foreign = [t.text for t in typed if currency and values.in_other_currency(t.text, currency)]
    typed = [t for t in typed if t.text not in foreign]
    found = _distinct(expected.kind, [t.value for t in typed]) + foreign
    # A value glued to other characters (`q233.00q`) is never the expected one, but it is a
    # rival of the kinds written with digits: hiding a value is no way to name it.
    glued = [t.text for t in tokens if t.kind == "opaque" and any(c.isdigit() for c in t.text)]
    if expected.kind in _DIGIT_KINDS and glued:
        found = [*found, *glued]
    missing = [
        w for w in wanted if not any(values.answers_equal(expected.kind, w, f) for f in found)
    ]
    rivals = [
        f for f in found if not any(values.answers_equal(expected.kind, w, f) for w in wanted)
    ]
    why = None
    if missing:
        named = ", ".join(values.describe(expected.kind, m) for m in missing)
        why = f"the final message does not name {named}"
    elif rivals:
        shown = ", ".join(values.describe(expected.kind, r) for r in rivals[:5])
        why = f"the final message also names other {expected.kind} values ({shown})"
    if why:
        evidence["reason"] = why
        return Match("answer_match", False, "answer", evidence, f"answer: {why}")
    evidence["ok"] = True
    return Match("answer_match", True, "answer", evidence, None)


_DIGIT_KINDS = ("amount", "number", "id", "date", "time", "datetime")


_YES_NO = {"yes": True, "true": True, "no": False, "false": False}


def _has_words(words: Sequence[str], wanted: Sequence[str]) -> bool:
    n = len(wanted)
    return n > 0 and any(list(words[i : i + n]) == list(wanted) for i in range(len(words)))


def _of_kind(kind: str, token_kind: str) -> bool:
    """Token kinds read as values of `kind` (an amount may be written without cents, an id
    may be all digits)."""
    if kind == "amount":
        return token_kind in ("amount", "number")
    if kind == "id":
        return token_kind in ("id", "number")
    return token_kind == kind


def _distinct(kind: str, found: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for value in found:
        if not any(values.answers_equal(kind, value, seen) for seen in out):
            out.append(value)
    return out


def subject_key(value: Any) -> str:
    """An identifier as written by people and tools alike: case, spaces and a leading `#`
    do not matter (`#W123`, `w123`)."""
    return str(value).strip().lstrip("#").strip().casefold()


_SEPARATORS = re.compile(r"[,;/\s]+|\band\b", re.IGNORECASE)


def named_subjects(value: Any) -> list[str]:
    """The identifiers a decline's subject names, as keys: a list's items, or the parts of a
    text that hold a digit ("orders #W1 and #W2" names W1 and W2); the whole text when no part
    does (an id without digits)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    keys: list[str] = []
    for item in items:
        parts = [p for p in _SEPARATORS.split(str(item)) if any(c.isdigit() for c in p)]
        for key in [subject_key(p) for p in parts] or [subject_key(item)]:
            if key and key not in keys:
                keys.append(key)
    return keys


def _subject_problem(value: Any, subjects: Sequence[str], records: Sequence[str]) -> str | None:
    """Why a decline's subject is not what the refusal concerns (None: it is). With `records`
    (a refusal of several records) it must name each of them and nothing else; otherwise it
    names one record, spelled as one of `subjects`."""
    named = named_subjects(value)
    if isinstance(value, str) and subject_key(value) in {subject_key(s) for s in subjects}:
        named = [subject_key(value)]  # an id that holds separators, named whole
    shown = "nothing" if not named else ", ".join(named)
    if records:
        wanted = {subject_key(r) for r in records}
        missing = sorted(wanted - set(named))
        extra = [k for k in named if k not in wanted]
        if missing or extra:
            return (
                f"the decline names {shown}; the refusal concerns each of {len(wanted)} "
                f"records and nothing else (missing {len(missing)}, not concerned {len(extra)})"
            )
        return None
    accepted = {subject_key(s) for s in subjects}
    if not named or any(k not in accepted for k in named):
        return f"declined about {shown}, not about what this request concerns"
    return None


def decline_match(
    expected: str | None,
    submission: Submission | None,
    subjects: Sequence[str] = (),
    records: Sequence[str] = (),
) -> Match | None:
    """A refusal task's verdict (`expected` is its code; `subjects` the spellings of the one
    record the decline must name, `records` every record when it refuses several; neither:
    the code alone decides); on any other task a decline fails and anything else is no
    component (None)."""
    declined = submission is not None and submission.kind == "decline"
    got = submission.reason if declined and submission is not None else None
    evidence: dict[str, Any] = {"expected": expected, "submitted": got, "ok": False}
    if records:
        evidence["expected_subject"] = list(records)
        evidence["submitted_subject"] = submission.value if declined and submission else None
    elif subjects:
        evidence["expected_subject"] = list(subjects)
        evidence["submitted_subject"] = submission.value if declined and submission else None
    if expected is None:
        if not declined:
            return None
        why = f"declined ({got}) a task that needed an action"
        evidence["reason"] = why
        return Match("decline_match", False, "decline", evidence, f"decline: {why}", voids=True)
    elif submission is None:
        why = f"nothing was declined; the request must be declined as {expected}"
    elif not declined:
        why = f"answered a request that must be declined as {expected}"
    elif got != expected:
        why = f"declined as {got}, but the rule that forbids it is {expected}"
    elif (subjects or records) and (
        problem := _subject_problem(submission.value, subjects, records)
    ):
        why = f"declined as {got}: {problem}"
    else:
        evidence["ok"] = True
        return Match("decline_match", True, "decline", evidence, None)
    evidence["reason"] = why
    return Match("decline_match", False, "decline", evidence, f"decline: {why}")


def submission_match(
    task: TaskSpec, submission: Submission | None, final_text: str, tampered: bool = False
) -> Match | None:
    """The task's answer/decline verdict; None when the task scores neither (an action task
    with no decline, or a legacy `expected_outputs` row: the text path scores those)."""
    if tampered:
        submission = None  # not the framework's row: as good as nothing submitted
    if task.expected_answer is not None:
        if task.answer_via == "text":
            return text_answer_match(task.expected_answer, final_text)
        match = answer_match(task.expected_answer, submission)
    else:
        found = decline_match(
            task.expected_decline,
            submission,
            task.expected_decline_subjects,
            task.expected_decline_records,
        )
        if found is None:
            return None
        match = found
    if tampered and not match.ok:
        why = "the answer table was written by a tool other than submit_answer/decline_request"
        match.evidence["reason"] = why
        return Match(match.component, False, match.evidence_key, match.evidence, why)
    return match


def answer_expected(task: TaskSpec) -> bool:
    """Whether the task scores an answer or a decline (the reward's answer share)."""
    return task.expected_answer is not None or task.expected_decline is not None


__all__: Sequence[str] = (
    "Match",
    "Submission",
    "answer_expected",
    "read_submission",
    "submission_match",
    "submitted_at",
    "written_outside_tools",
)
