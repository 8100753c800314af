"""The parts of a task row that seed and verify need, read from either NeMo Gym seed shape."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from app.core import values
from app.core.checks import parse_checks
from app.core.conversation import USER_TABLE, UserScript, script_seed
from app.errors import InvalidTask, validation_message

# Keys NeMo Gym adds for its own bookkeeping; they are not part of the task.
_NG_KEYS = ("agent_ref", "task_source", "responses_create_params", "response")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ExpectedAnswer:
    """A task's expected answer: a kind (app/core/values.py KINDS) and a JSON value, a list
    for a list-valued answer (compared as a set)."""

    kind: str
    value: Any

    @property
    def many(self) -> bool:
        return isinstance(self.value, list)


@dataclass(frozen=True)
class TaskSpec:
    task_id: str | None
    seed: Mapping[str, Any] | None
    ground_truth: tuple[ToolCall, ...]
    expected_outputs: tuple[str, ...]
    reward_mode: str | None
    data: Mapping[str, Any]
    # Declarative checks on the final state (app/core/checks.py); not part of the gold state.
    expected_state: tuple[Mapping[str, Any], ...] = ()
    # Answers as state (app/verify/answers/submitted.py): what `submit_answer` must have
    # written, and where it is read ("tool": the answer table; "text": the final assistant message).
    expected_answer: ExpectedAnswer | None = None
    answer_via: Literal["tool", "text"] = "tool"
    # The reason code a refusal task expects `decline_request` to name.
    expected_decline: str | None = None
    # What the decline must be about: one of these identifiers (none: the code alone decides).
    expected_decline_subjects: tuple[str, ...] = ()
    # A refusal of several records: the decline must name each of these, and nothing else.
    expected_decline_records: tuple[str, ...] = ()
    # The simulated user of a conversational task (app/core/conversation.py); its script is
    # also in `seed`, as the row message_user reads.
    user: UserScript | None = None

    @property
    def checks_only(self) -> bool:
        """No reference solution, only checks: the checks alone decide state_match."""
        return bool(self.expected_state) and not self.ground_truth

    # Cached: a large seed (10,000 rows) costs ~30 ms to serialise and hash.
    @cached_property
    def snapshot_key(self) -> str:
        """Identifies the seeded state: rollouts of one task share it whatever their ids."""
        return _digest({"seed": self.seed})

    @cached_property
    def gold_key(self) -> str:
        calls = [{"name": c.name, "arguments": c.arguments} for c in self.ground_truth]
        return _digest({"seed": self.seed, "ground_truth": calls})


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class GoldCall(BaseModel):
    """One call of a task's reference solution: `{name, arguments}` (arguments may be a JSON
    string, as NeMo Gym rows carry them)."""

    model_config = ConfigDict(extra="allow")

    name: StrictStr
    arguments: dict[str, Any] | StrictStr = Field(default_factory=dict)

    @field_validator("arguments")
    @classmethod
    def _decode(cls, args: dict[str, Any] | str) -> dict[str, Any]:
        if isinstance(args, str):
            try:
                args = json.loads(args or "{}")
            except json.JSONDecodeError:
                raise ValueError("arguments is not valid JSON") from None
            if not isinstance(args, dict):
                raise ValueError("arguments must be an object")
        return args


class ExpectedAnswerRow(BaseModel):
    """`{"kind": K, "value": V}`: V must be exactly one value of K (or a list of them)."""

    model_config = ConfigDict(extra="forbid")

    kind: StrictStr
    value: (
        StrictBool
        | StrictInt
        | StrictFloat
        | StrictStr
        | list[StrictBool | StrictInt | StrictFloat | StrictStr]
    )

    @model_validator(mode="after")
    def _one_value_of_kind(self) -> ExpectedAnswerRow:
        if self.kind not in values.KINDS:
            raise InvalidTask(
                f"expected_answer.kind {self.kind!r} is not a kind; kinds are "
                f"{', '.join(values.KINDS)}"
            )
        try:
            values.parse_answer(self.kind, self.value, many=isinstance(self.value, list))
        except values.NotOneValue as exc:
            raise InvalidTask(
                f"expected_answer.value is not one {self.kind} ({exc.reason}); give one value "
                "of the kind, or a list of them"
            ) from None
        return self


class TaskRow(BaseModel):
    """The fields of a task row that seed and verify read, validated here and nowhere else.

    Used for task files, stored tasks and request bodies alike (app/server/models.py builds the
    routes' bodies on it); other keys pass through untouched into `TaskSpec.data`.
    """

    model_config = ConfigDict(extra="allow")

    task_id: StrictStr | StrictInt | None = None
    seed: dict[str, Any] | None = Field(
        default=None, description='{"now": ..., "rows": {table: [rows]}}: the task\'s own data'
    )
    ground_truth: list[GoldCall] | None = None
    expected_outputs: list[StrictStr] | StrictStr | None = None
    expected_state: Any = Field(default=None, description="checks on the final state")
    reward_mode: Literal["strict", "partial"] | None = None
    answer_kind: Any = None
    expected_answer: ExpectedAnswerRow | None = None
    answer_via: Literal["tool", "text"] = "tool"
    expected_decline: StrictStr | None = Field(
        default=None, description="the reason code decline_request must name (a refusal task)"
    )
    expected_decline_subject: list[StrictStr] | None = Field(
        default=None,
        description="identifiers of what the refused request is about: decline_request's "
        "`subject` must be one of them (a task's own ids, so a decline copied from another "
        "task does not match)",
    )
    expected_decline_records: list[StrictStr] | None = Field(
        default=None,
        description="a refusal of several records (cancelling three trips, two refused): the "
        "identifier of each; decline_request's `subject` must name every one of them and "
        "nothing else",
    )
    user: UserScript | None = Field(
        default=None,
        description="the simulated user of a conversational task: the goal, what the user "
        "knows and how they reveal it (docs/conversations.md)",
    )
    _checks: tuple[Mapping[str, Any], ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _domain_rules(self) -> TaskRow:
        # Both raise InvalidTask with their own message (a 422 that says what to fix).
        self._checks = parse_checks(self.expected_state)
        if self.expected_answer is not None and self.expected_decline is not None:
            raise InvalidTask(
                "task: give expected_answer or expected_decline, not both (a task either asks "
                "for an answer or must be refused)"
            )
        if (self.expected_decline_subject or self.expected_decline_records) and (
            self.expected_decline is None
        ):
            raise InvalidTask(
                "task: expected_decline_subject and expected_decline_records need expected_decline"
            )
        rows = (self.seed or {}).get("rows")
        if isinstance(rows, Mapping) and USER_TABLE in rows:
            raise InvalidTask(
                f"seed.rows: {USER_TABLE} is written from the task's `user` block; give the "
                "user there"
            )
        if self.answer_kind is not None and self._answer_kind_countable():
            # refused at seed, not first at verify
            values.check_answer_kind(self.answer_kind, len(self.outputs()))
        return self

    def _answer_kind_countable(self) -> bool:
        return True

    def outputs(self) -> tuple[str, ...]:
        outputs = self.expected_outputs or []
        return (outputs,) if isinstance(outputs, str) else tuple(outputs)

    def spec(self, data: Mapping[str, Any]) -> TaskSpec:
        """The TaskSpec of this row; `data` is the row it was validated from."""
        return TaskSpec(
            task_id=None if self.task_id is None else str(self.task_id),
            seed=self.seed if self.user is None else script_seed(self.seed, self.user),
            ground_truth=tuple(_tool_call(c) for c in self.ground_truth or ()),
            expected_outputs=self.outputs(),
            reward_mode=self.reward_mode,
            expected_state=self._checks,
            expected_answer=None
            if self.expected_answer is None
            else ExpectedAnswer(self.expected_answer.kind, self.expected_answer.value),
            answer_via=self.answer_via,
            expected_decline=self.expected_decline,
            expected_decline_subjects=tuple(self.expected_decline_subject or ()),
            expected_decline_records=tuple(self.expected_decline_records or ()),
            user=self.user,
            data={k: v for k, v in data.items() if k not in _NG_KEYS and not k.startswith("_ng_")},
        )


def _tool_call(call: GoldCall) -> ToolCall:
    assert isinstance(call.arguments, dict)  # decoded by GoldCall._decode
    return ToolCall(call.name, call.arguments)


def check_decline_code(task: TaskSpec, codes: Sequence[str], env_name: str) -> None:
    """A refusal task's code must be one the environment declares (InvalidTask, a 422)."""
    if task.expected_decline is not None and task.expected_decline not in codes:
        raise InvalidTask(
            f"expected_decline {task.expected_decline!r} is not a reason code of environment "
            f"{env_name}; its codes are {', '.join(codes)}"
        )


def task_from_data(data: Mapping[str, Any]) -> TaskSpec:
    """Read the task fields from a task row (or a typed seed's `task_data`)."""
    if not isinstance(data, Mapping):
        raise InvalidTask("a task row must be a JSON object")
    try:
        row = TaskRow.model_validate(data)
    except ValidationError as exc:
        raise InvalidTask(validation_message("task", exc)) from None
    return row.spec(data)


@dataclass(frozen=True)
class SeedRequest:
    task: TaskSpec
    # Typed 0.7.0 shape only: the caller's id for this session, and the episode seeding it
    # (`EpisodeId.key()`): the same pair again is a retry, answered with the same session.
    resources_session_id: str | None = None
    episode: str | None = None

    @property
    def typed(self) -> bool:
        return self.resources_session_id is not None
