"""The one task-generation kit every environment uses: the story's `Draft`, gold
calls, the self-check that replays them, the task row, the generator declaration (with the
shipped evaluation set it implies), and the difficulty and answer-kind rules applied to every
generated task. An environment's `envs/<env>/taskgen/` keeps only what is its own: its Story
(seed rows), its families and its PLAN.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.core.conversation import UserScript
from app.core.tasks import task_from_data
from app.errors import InvalidTask
from app.sdk.answer import DECLINE_REQUEST, RESERVED_TOOL_NAMES, SUBMIT_ANSWER
from app.sdk.environment import Environment
from app.sdk.people import Name, PersonColumns
from app.sdk.phrasing import Phrasing
from app.taskgen.conversation import check_gold_conversation, run_seed, system_prompt
from app.taskgen.details import Omission, omit
from app.taskgen.gold_run import (
    GoldRun,
    bound,
    forget,
    gold_outcomes,
    gold_run,
    run_calls,
    run_on_copy,
)
from app.verify.answers.submitted import subject_key

# build(index, family, variant k, rng, names) -> one self-checked task row.
BuildTask = Callable[[int, Any, int, random.Random, list[tuple[str, str]]], dict[str, Any]]
# A family's gold-call results (each call's output) -> expected outputs only the replay knows.
Expect = Callable[[list[Any]], list[str]]


@dataclass
class Draft:
    """What a family function returns: the prompt, the gold calls and what checks them."""

    family: str
    prompt: str
    gold: list[dict[str, Any]]
    writes: bool = False  # the gold must change the state (and must not, when False)
    expected: list[str] | None = None
    # A refusal: the write the user asked for and the error code the rules answer it with.
    forbidden: tuple[dict[str, Any], str] | None = None
    # A refusal of several records: the refused writes of the other records (the same code);
    # the decline must name each record, `forbidden`'s first (`expected_decline_records`).
    also_refused: tuple[dict[str, Any], ...] = ()
    # Of those refused writes, the ones the tool would carry out: only the policy forbids them
    # (a late claim), so the check expects each to succeed on a copy, never the code.
    policy_refused: tuple[dict[str, Any], ...] = ()
    # Expected outputs computed from the gold calls' outputs (a new booking code, a query).
    expect_from: Expect | None = None
    # Facts of the prompt a draw may leave out for the agent to look up (app/taskgen/details).
    omissions: tuple[Omission, ...] = ()
    # Answers as state: (kind, value) the gold submits with submit_answer (the row's
    # `expected_answer`), or computed from the gold calls' outputs by `answer_from`.
    answer: tuple[str, Any] | None = None
    answer_from: Callable[[list[Any]], tuple[str, Any]] | None = None
    # A refusal: the reason code the gold declines with (decline_request; `expected_decline`).
    decline: str | None = None
    # What the gold's decline_request tells the user (not scored).
    decline_message: str = "I'm sorry, I cannot do that under our policy."
    # A conversational task's simulated user (the row's `user` block): the gold talks to it
    # with message_user, and every write of the gold must follow the user's yes.
    user: UserScript | None = None


def submission(
    draft: Draft, answer: tuple[str, Any] | None = None, subject: str | list[str] | None = None
) -> list[dict[str, Any]]:
    """The gold's last call: submit_answer with the answer, or decline_request with the code
    (and `subject`, what the refused request is about)."""
    answer = answer or draft.answer
    if answer is not None:
        return [{"name": SUBMIT_ANSWER, "arguments": {"answer": answer[1]}}]
    if draft.decline is not None:
        arguments = {"reason": draft.decline, "message": draft.decline_message, "subject": subject}
        return [{"name": DECLINE_REQUEST, "arguments": arguments}]
    return []


def _seed_values(seed: dict[str, Any]) -> set[str]:
    return {
        subject_key(value)
        for rows in (seed.get("rows") or {}).values()
        for row in rows
        for value in row.values()
        if isinstance(value, str | int) and not isinstance(value, bool)
    }


def _identifier(value: Any) -> bool:
    """A value that names a record: an id, or text with a digit in it (an order number, a
    reservation code, an account number, an email with a number)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 1000
    return isinstance(value, str) and len(value) >= 3 and any(c.isdigit() for c in value)


def decline_subjects(
    gold: Sequence[dict[str, Any]],
    seed: dict[str, Any],
    forbidden: dict[str, Any] | None = None,
) -> list[str]:
    """What a refusal is about: the identifiers the task's own rows (its seed) hold that the
    refused write names (`forbidden`, the call the rules refuse), else that the gold's calls
    pass; most specific first (record numbers and codes, surrogate ids only when there are none).
    A decline must name one of them, so a decline copied from another task (another world) does
    not match, nor one naming the customer instead of the refused record; a refusal whose gold
    looks nothing up of its own has none."""
    own = _seed_values(seed)
    texts: list[str] = []
    numbers: list[str] = []
    for call in [forbidden] if forbidden is not None else gold:
        if call["name"] in RESERVED_TOOL_NAMES:
            continue
        for value in (call.get("arguments") or {}).values():
            for item in value if isinstance(value, list) else [value]:
                if not _identifier(item) or subject_key(item) not in own:
                    continue
                bucket = numbers if isinstance(item, int) else texts
                if str(item) not in bucket:
                    bucket.append(str(item))
    # An email names the person, not the refused record: kept only when nothing else is found.
    records = [t for t in texts if "@" not in t]
    if forbidden is not None:
        # An address the refused write sends to is what it concerns too (a forward to an
        # outside address): the record first, the address also accepted.
        emails = [t for t in texts if "@" in t]
        for value in (forbidden.get("arguments") or {}).values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and "@" in item and item not in emails:
                    emails.append(item)
        found = [*records, *emails] or numbers
        return found or decline_subjects(gold, seed)
    found = [*reversed(records), *reversed(numbers)]
    return found or list(reversed(texts))


def _refused_records(draft: Draft, seed: dict[str, Any]) -> list[str]:
    """Each refused record's identifier, when a refusal concerns several (`also_refused`)."""
    if draft.decline is None or draft.forbidden is None or not draft.also_refused:
        return []
    records: list[str] = []
    for refused in (draft.forbidden[0], *draft.also_refused):
        found = decline_subjects([], seed, refused)
        if not found:
            raise ValueError(f"{draft.family}: a refused {refused['name']} names no record")
        if found[0] not in records:
            records.append(found[0])
    return records


def call(env: Environment, name: str, /, **arguments: Any) -> dict[str, Any]:
    """A gold call with every argument the strict schema lists (null where not given)."""
    tool = env.tool_named(name)
    assert tool is not None, name
    full = {f: arguments.pop(f, None) for f in tool.args_model.model_fields}
    assert not arguments, f"{name}: unknown arguments {sorted(arguments)}"
    tool.args_model.model_validate(full)
    return {"name": name, "arguments": full}


class StoryFailed(RuntimeError):
    """A shipped story could not be built: the message names it in one line."""


class InvalidRow(StoryFailed):
    """A story built a row the task-row model refuses (an answer kind verify does not know):
    never dropped quietly, never written; the message says what to fix in one line."""


def validated(task: dict[str, Any]) -> dict[str, Any]:
    """`task`, after the model every reader of a task row uses (app/core/tasks.TaskRow)."""
    try:
        task_from_data(task)
    except InvalidTask as exc:
        raise InvalidRow(f"not a valid task row: {exc.message}") from None
    return task


class GoldFailed(AssertionError):
    """A gold call of a story returned an error: the story is dropped."""


def check_task(
    env: Environment, task: dict[str, Any], draft: Draft, *, invariants: bool = False
) -> list[Any]:
    """Replay the gold calls on base + seed through the framework's runner (what a session's
    calls go through; the run is kept for the validator, app/taskgen/gold_run.py); returns each
    call's output.

    Every call must succeed; the state must change iff `draft.writes` (SQLite's count of rows
    written: the validator then checks the same in the verifier's terms, app/taskgen/validate);
    a `draft.forbidden` call (and each of `also_refused`) must be refused with its code and
    change nothing; with
    `invariants`, the seeded and final states satisfy every invariant of the environment.
    """
    label = f"{task['task_id']} ({task['family']})"
    seed = run_seed(task)
    if not invariants and draft.forbidden is None:  # the outcomes are all that is read
        outcomes, changed = gold_outcomes(env, seed, task["ground_truth"])
        _check_calls(label, task, outcomes)
        _check_writes(label, changed, draft)
        return [outcome["output"] for outcome in outcomes]
    run = gold_run(env, seed, task["ground_truth"])
    _check_calls(label, task, run.outcomes)
    if invariants:
        with bound(run.seeded) as c:
            run.seeded_violations = _check_invariants(env, c, label, "seeded")
        _check_invariants(env, run.final, label, "final")  # reads only
    if draft.forbidden is not None:
        first, code = draft.forbidden
        # On the kept run's database: a refused call is rolled back (run_tool), so it stays the
        # gold's final state; a call not refused fails the story, and the run is dropped.
        for forbidden in (first, *draft.also_refused):
            if forbidden in draft.policy_refused:
                continue
            outcome = run_calls(env, run.final, [forbidden], run.now)[0]
            error = outcome.get("error") or {}
            if error.get("code") != code:
                forget(env, seed, task["ground_truth"])
            assert error.get("code") == code, f"{label}: {forbidden['name']} gave {outcome}"
        _check_policy_refused(env, label, run, draft.policy_refused)
    _check_writes(label, run.changed, draft)
    return [outcome["output"] for outcome in run.outcomes]


def _check_policy_refused(
    env: Environment, label: str, run: GoldRun, calls: Sequence[dict[str, Any]]
) -> None:
    """Each write only the policy refuses succeeds on a copy of the gold's final state: the
    tool would carry it out, so the agent must apply the rule (the kept run stays as it was)."""
    for call_, outcome in zip(calls, run_on_copy(env, run, calls) if calls else [], strict=True):
        assert "error" not in outcome, f"{label}: the tool refuses {call_['name']}: {outcome}"


def _check_calls(label: str, task: dict[str, Any], outcomes: Sequence[dict[str, Any]]) -> None:
    for i, (gold_call, outcome) in enumerate(zip(task["ground_truth"], outcomes, strict=True)):
        if "error" in outcome:
            raise GoldFailed(f"{label}: gold call {i} ({gold_call['name']}): {outcome}")


def _check_writes(label: str, changed: bool, draft: Draft) -> None:
    if changed != draft.writes:
        what = "changed nothing" if draft.writes else "changed the state"
        raise AssertionError(f"{label}: gold {what}")


def _check_invariants(env: Environment, c: Any, label: str, when: str) -> list[str]:
    """The invariants' violations on `c` (each check once, in order): none, or the story fails."""
    with Session(bind=c) as db, db.begin():
        broken = [v for check in env.invariants for v in check(db)]
    assert not broken, (label, when, broken)
    return broken


_SCHEMAS: dict[str, list[dict[str, Any]]] = {}


def _tool_schemas(env: Environment) -> list[dict[str, Any]]:
    """The served tool schemas (10 ms to build: once per process, not per task)."""
    if env.name not in _SCHEMAS:
        _SCHEMAS[env.name] = env.tool_schemas()
    return _SCHEMAS[env.name]


def request_params(
    env: Environment,
    prompt: str,
    tools: list[dict[str, Any]] | None = None,
    *,
    conversation: bool = False,
) -> dict[str, Any]:
    """A task row's `responses_create_params`: the environment's policy as the system message
    (with the conversation rule when the task has a user to talk to), the user's request, and
    the served tool schemas (`tools`, else the process's cached ones)."""
    system = system_prompt(env, {"user": {}} if conversation else {})
    return {
        "input": [
            {"role": "system", "content": system},
            {"role": "user", "content": prompt},
        ],
        "tools": _tool_schemas(env) if tools is None else tools,
    }


def read_back(task: dict[str, Any]) -> dict[str, Any]:
    """`task` as its JSON line reads back (key order kept). The tool schemas, JSON already and
    one list for every task of an environment (`_tool_schemas`), are shared, not copied: they
    were more than half of each task's bytes, copied twice per draw."""
    params = task.get("responses_create_params")
    if not isinstance(params, dict) or params.get("tools") is None:
        copied: dict[str, Any] = json.loads(json.dumps(task))
        return copied
    copied = json.loads(json.dumps({**task, "responses_create_params": {**params, "tools": []}}))
    copied["responses_create_params"]["tools"] = params["tools"]
    return copied


_self_check: ContextVar[bool] = ContextVar("taskgen_self_check", default=True)


@contextmanager
def without_self_check() -> Iterator[None]:
    """Build stories without replaying their gold (`build_row` returns the unchecked row).

    For a distractor: what it adds to a task is its seed, and the merged task is checked as a
    whole (its gold's results unchanged, then every validation); its own gold is never run
    by anyone, so replaying it (a seed and a gold run, ≈ a tenth of a generated task's time)
    checked nothing the task depends on."""
    token = _self_check.set(False)
    try:
        yield
    finally:
        _self_check.reset(token)


def build_row(
    env: Environment,
    index: int,
    draft: Draft,
    seed: dict[str, Any],
    *,
    invariants: bool = False,
    after: Callable[[dict[str, Any], list[Any]], None] | None = None,
    writes: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """The self-checked task row of story `index`: `after(task, outputs)` adds the
    environment's own checks (lookups that must find one account, slots that must match, an
    answer for a read-only task), on the finished row; `writes` tells a gold call that changes
    data (for the conversation check; default: its tool is not read-only). Inside
    `details.leaving_out` a detail may be left out first (the row's "omitted" then names it,
    for the draw's phrasing tag)."""
    draft, omitted = omit(draft)
    refused = draft.forbidden[0] if draft.forbidden is not None else None
    subjects = decline_subjects(draft.gold, seed, refused) if draft.decline is not None else []
    records = _refused_records(draft, seed)
    task: dict[str, Any] = {
        "task_id": f"{env.name}-{index:03d}",
        "env": env.name,
        "difficulty": len(draft.gold),
        "family": draft.family,
        "responses_create_params": request_params(
            env, draft.prompt, conversation=draft.user is not None
        ),
        "seed": seed,
        # The gold ends with its answer or decline (an answer computed from the gold's outputs
        # is appended once they are known, below).
        "ground_truth": [
            *draft.gold,
            *submission(draft, subject=records or next(iter(subjects), None)),
        ],
    }
    # Checked as it will be read back: JSON keeps the seed's table order (parents first),
    # which apply_seed relies on, so keys are never sorted.
    if draft.user is not None:
        task["user"] = draft.user.model_dump(exclude_defaults=True)
    task = read_back(task)
    if not _self_check.get():
        return task  # a distractor's story: only its seed and people are used (distract.py)
    outputs = check_task(env, task, draft, invariants=invariants)
    if draft.user is not None:
        check_gold_conversation(env, task, draft.user, writes)
    expected = list(draft.expected or [])
    if draft.expect_from is not None:
        expected += draft.expect_from(outputs)
    if expected:
        task["expected_outputs"] = expected
    answer = draft.answer
    if draft.answer_from is not None:
        answer = draft.answer_from(outputs)
        task["ground_truth"] = [*task["ground_truth"], *submission(draft, answer)]
    if answer is not None:
        task["expected_answer"] = {"kind": answer[0], "value": answer[1]}
    if draft.decline is not None:
        task["expected_decline"] = draft.decline
        if records:
            task["expected_decline_records"] = records
        elif subjects:
            task["expected_decline_subject"] = subjects
    if after is not None:
        after(task, outputs)
    if omitted:
        task["omitted"] = omitted
    return validated(task)


@dataclass(frozen=True)
class TaskGenerator:
    """One environment's generator: its families (function, number of variants), the pool of
    person names its stories draw from, and the task builder. The shipped evaluation set is
    every PLAN variant once, story i drawn with Random("<env>-i") from `shipped_names`."""

    env: Environment
    plan: list[tuple[Any, int]]
    names: list[Name]
    build: BuildTask
    # The names the shipped set pops from (default: `names` reversed).
    shipped_names: list[Name] | None = None
    # Whether a gold call writes; default: the tool is not read-only (sql's one tool needs more).
    writes: Callable[[dict[str, Any]], bool] | None = None
    # Where a seed holds people (a task's `entities`, a distractor's similar names).
    people: PersonColumns = PersonColumns()
    # Which sentences of the requests a draw may reword (default: asides only).
    phrasing: Phrasing = Phrasing()

    def families(self) -> dict[str, tuple[Any, int]]:
        """Family name (the story function's name) -> (function, variants). Two PLAN entries
        with one name (the same function listed twice, or two modules' functions of one name)
        would merge in every count and filter: refused, naming both."""
        found: dict[str, tuple[Any, int]] = {}
        for fn, n in self.plan:
            name = fn.__name__
            if name in found:
                first = found[name][0]
                raise StoryFailed(
                    f"PLAN lists two stories named {name} ({first.__module__}.{name} and "
                    f"{fn.__module__}.{name}) -- give each family its own function name, or list "
                    "a function once with its number of variants"
                )
            found[name] = (fn, n)
        return found

    def shipped_tasks(self) -> list[dict[str, Any]]:
        self.families()  # a PLAN naming one family twice is refused here too
        names = list(self.shipped_names if self.shipped_names is not None else self.names[::-1])
        tasks: list[dict[str, Any]] = []
        for fn, variants in self.plan:
            for k in range(variants):
                index = len(tasks) + 1
                rng = random.Random(f"{self.env.name}-{index}")
                try:
                    tasks.append(self.build(index, fn, k, rng, names))
                except Exception as exc:  # noqa: BLE001 - one line that names the story
                    first = (str(exc).strip().splitlines() or [""])[0][:300]
                    where = f"{getattr(fn, '__module__', '?')}.{fn.__name__}"
                    raise StoryFailed(
                        f"shipped story {index} ({fn.__name__}, variant {k}) failed: "
                        f"{type(exc).__name__}: {first} -- fix {where} (variant {k}) or drop "
                        "it from PLAN"
                    ) from exc
        return tasks

    def shipped(self) -> list[str]:
        """The shipped file's lines: insertion-ordered JSON (the seed's table order matters)."""
        return [json.dumps(task, ensure_ascii=False) for task in self.shipped_tasks()]


def writes(gen: TaskGenerator, call: dict[str, Any]) -> bool:
    """Whether a gold call changes the state (the answer tools only write the answer row)."""
    if call["name"] in RESERVED_TOOL_NAMES:
        return False
    if gen.writes is not None:
        return gen.writes(call)
    tool = gen.env.tool_named(call["name"])
    # The framework's answer tools write only the answer row: no state change, no intent.
    return not (tool and (tool.read_only or tool.framework))


def is_refusal(family: str) -> bool:
    return family.startswith("refuse")


def declines(gold: Sequence[dict[str, Any]]) -> bool:
    """Whether a gold ends by declining (a refusal family's forbidden twin, or an action
    family's twin whose data forbids the action): the task's `kind` follows its gold, not the
    family's name, so twins of one request are told apart by what the data decided."""
    return any(c["name"] == DECLINE_REQUEST for c in gold)


def difficulty(
    gen: TaskGenerator, gold: list[dict[str, Any]], family: str, distractor: bool
) -> int:
    """1-5 from the gold: steps, writes (multi-intent), refusals and distractors.

    Steps (calls but the answer): 1 -> 1, 2-3 -> 2, 4-9 -> 3, 10-19 -> 4, 20+ -> 5. A refusal
    is at least 2, two writes at least 3; a distractor adds 1. Levels 4 and 5 are the hard tier
    and need 10 steps or more (docs/generating_tasks.md): below it a distractor stops at 3, so
    `--difficulty 4 --difficulty 5` draws only long, composed tasks.
    """
    steps = sum(1 for c in gold if c["name"] not in RESERVED_TOOL_NAMES)  # the answer is no step
    level = 1 if steps <= 1 else 2 if steps <= 3 else 3 if steps <= 9 else 4 if steps <= 19 else 5
    if sum(1 for c in gold if writes(gen, c)) >= 2:
        level = max(level, 3)
    if declines(gold) or (is_refusal(family) and not any(writes(gen, c) for c in gold)):
        level = max(level, 2)
    if distractor:
        level += 1
    return min(level, 5 if steps >= HARD_TIER_STEPS else 3)


# The hard tier's least gold length (steps, the answer not counted).
HARD_TIER_STEPS = 10


def kind(gen: TaskGenerator, gold: list[dict[str, Any]], family: str) -> str:
    """write (the gold changes state), refusal (it declines and changes nothing), or read (an
    answer from lookups only). A family's twins differ in kind: the data decided."""
    if any(writes(gen, c) for c in gold):
        return "write"
    # A legacy refusal row of a refuse_* family may carry no decline call (expected_outputs).
    legacy = is_refusal(family) and not any(c["name"] == SUBMIT_ANSWER for c in gold)
    return "refusal" if declines(gold) or legacy else "read"


_AMOUNT = re.compile(r"^-?\d+\.\d{2}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"^\d{1,2}:\d{2}$")
_COUNT = re.compile(r"^\d{1,4}$")
_ID = re.compile(r"^(?=.*\d)[#A-Za-z0-9_.@-]+$")
_NAME = re.compile(r"^[A-Z][\w'-]*( [A-Z][\w'-]*)*$")


def answer_kind(family: str, expected: list[str]) -> str | list[str] | None:
    """The kind of answer a task expects, in verify's vocabulary (`app.verify.answers.text.KINDS`):
    `refusal`, or one kind per expected output (a single kind when there is one output); None
    when the task only asks for a change (nothing to answer)."""
    if is_refusal(family):
        return "refusal"
    if not expected:
        return None
    kinds = [_value_kind(value) for value in expected]
    return kinds[0] if len(kinds) == 1 else kinds


def _value_kind(value: str) -> str:
    for pattern, name in (
        (_AMOUNT, "amount"),
        (_DATE, "date"),
        (_TIME, "time"),
        (_COUNT, "number"),
    ):
        if pattern.match(value):
            return name
    if "@" in value:
        return "email"
    if _ID.match(value) and not value.isalpha():
        return "id"
    if _NAME.match(value):
        return "name"
    return "text"  # statuses ("pending") and free text
