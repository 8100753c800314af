"""Every protocol body, declared once: the routes validate with these and OpenAPI shows them.

The task-row bodies (legacy seed, verify) build on `app.core.tasks.TaskRow`, the one
validation of a task's fields. NeMo Gym 0.7.0's typed session bodies:

They mirror `nemo_gym.base_resources_server` and `nemo_gym.episode_types` field for field,
`extra="forbid"` included: Gym parses our answers with its own copies of these models, so an
answer with one key too many fails every rollout at the seed stage. StateGym never imports
nemo_gym; tests/nemo_gym_conformance/ checks these against Gym's own models.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from app.core.tasks import SeedRequest, TaskRow, task_from_data
from app.errors import BadRequest, InvalidTask, StateGymError, validation_message

ModelT = TypeVar("ModelT", bound=BaseModel)
# Gym's rollout ids; `-a<N>` is reserved for the attempt-qualified capture key.
_ROLLOUT_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_RESERVED_ATTEMPT_SUFFIX = re.compile(r"-a[1-9][0-9]*$")
# Our control table's column width; Gym sets no upper bound, but an id is a uuid in practice.
MAX_RESOURCES_SESSION_ID = 200


class EpisodeId(BaseModel):
    """One physical attempt of a logical rollout (Gym's `EpisodeId`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    rollout_id: str = Field(
        min_length=1,
        max_length=200,
        pattern=_ROLLOUT_ID,
        json_schema_extra={"not": {"pattern": _RESERVED_ATTEMPT_SUFFIX.pattern}},
    )
    attempt: int = Field(default=0, ge=0, le=2**31)

    @field_validator("attempt", mode="before")
    @classmethod
    def _integral(cls, attempt: Any) -> Any:
        # JSON Schema's "integer" admits 3.0; a boolean is not a number here (strict mode
        # refuses it, as it refuses 3.5).
        if isinstance(attempt, float) and attempt.is_integer():
            return int(attempt)
        return attempt

    @field_validator("rollout_id")
    @classmethod
    def _reserved_suffix(cls, rollout_id: str) -> str:
        if _RESERVED_ATTEMPT_SUFFIX.search(rollout_id):
            raise ValueError("rollout_id must not end with the reserved attempt suffix '-a<N>'")
        return rollout_id

    def key(self) -> str:
        """A canonical text form, stored with the session to recognise a repeated seed."""
        return json.dumps({"rollout_id": self.rollout_id, "attempt": self.attempt})


class TaskRef(BaseModel):
    """Gym's `TaskId`: which task of which taskset."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    taskset: str = Field(min_length=1, max_length=200)
    task_id: str = Field(min_length=1, max_length=200)


class TypedSeedRequest(BaseModel):
    """`ResourcesSeedSessionRequest`: the caller assigns the session's id."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resources_session_id: str = Field(min_length=1, max_length=MAX_RESOURCES_SESSION_ID)
    episode_id: EpisodeId
    task_id: TaskRef
    task_data: dict[str, Any]


class MCPServerMetadata(BaseModel):
    """How an MCP-speaking harness reaches this rollout's tools (Gym's `MCPServerMetadata`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    server_name: str
    url_path: str = "/mcp"
    transport: str = "http"
    headers: dict[str, str]


class TypedSeedResponse(BaseModel):
    """`ResourcesSeedSessionResponse`: the id back, tools over MCP when exposed, nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resources_session_id: str
    resources_tools: MCPServerMetadata | None = None

    def payload(self) -> dict[str, Any]:
        # Gym's model has defaults for the optional keys: leave them out rather than send null.
        return self.model_dump(mode="json", exclude_none=True)


class TypedCloseRequest(BaseModel):
    """`ResourcesCloseSessionRequest`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resources_session_id: str = Field(min_length=1, max_length=MAX_RESOURCES_SESSION_ID)
    episode_id: EpisodeId


class LegacyCloseRequest(BaseModel):
    """The close StateGym took before 0.7.0: `{}` with the session cookie, or an id."""

    model_config = ConfigDict(extra="allow", strict=True)

    resources_session_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_RESOURCES_SESSION_ID
    )


class TypedCloseResponse(BaseModel):
    """`ResourcesCloseSessionResponse`: exactly the id."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resources_session_id: str


class VerifyBody(TaskRow):
    """/verify's body: the task row echoed back with the agent's `response`.

    Scoring fields are validated (a malformed one is a 422) but never scored: verify scores the
    task stored at seed (app/verify/request_task.py). A field the body leaves out is the stored
    one, so the answer-kind count check waits for `expected_outputs` to be sent.
    """

    # A typed rollout echoes Gym's {taskset, task_id}.
    task_id: StrictStr | StrictInt | dict[str, Any] | None = None  # type: ignore[assignment]
    response: dict[str, Any] | None = None
    resources_session_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_RESOURCES_SESSION_ID
    )
    task_data: dict[str, Any] | None = None

    def _answer_kind_countable(self) -> bool:
        return "expected_outputs" in self.model_fields_set


class AggregateBody(BaseModel):
    """/aggregate_metrics' body: the verify answers of a batch."""

    model_config = ConfigDict(extra="allow")

    verify_responses: list[dict[str, Any]]


def validated(
    model: type[ModelT], body: Any, route: str, error: type[StateGymError] = InvalidTask
) -> ModelT:
    """`body` as `model`; a body that is no JSON object is a 400, a bad field an `error`
    (422 by default) naming each field to fix."""
    if not isinstance(body, Mapping):
        raise BadRequest(f"{route} expects a JSON object, got {type(body).__name__}")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise error(validation_message(route, exc)) from None


def seed_body_schema() -> dict[str, Any]:
    """/seed_session's body: Gym 0.7.0's typed seed, or a legacy task row."""
    return {"anyOf": [inline_schema(TypedSeedRequest), inline_schema(TaskRow)]}


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its `$defs` inlined, for OpenAPI request bodies (whose
    `$ref`s would otherwise point at definitions the document does not carry). A copy of one
    built once per model: pydantic builds it anew each call, ~5 ms, five per app built."""
    return copy.deepcopy(_inline_schema(model))


@functools.cache
def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)


def close_body_schema() -> dict[str, Any]:
    """/close_session's body: the typed model, or the legacy `{}` / `{resources_session_id}`."""
    legacy = {**inline_schema(LegacyCloseRequest), "not": {"required": ["episode_id"]}}
    return {"anyOf": [inline_schema(TypedCloseRequest), legacy]}


def is_typed_seed(body: dict[str, Any]) -> bool:
    """A typed (0.7.0 environment server) seed rather than a legacy whole task row."""
    return "task_data" in body or "resources_session_id" in body or "episode_id" in body


def is_typed_close(body: dict[str, Any]) -> bool:
    return "episode_id" in body


def parse_seed_body(body: Any) -> SeedRequest:
    """Accept the legacy whole-row body and the typed 0.7.0 body (validated as Gym does)."""
    if not isinstance(body, Mapping):
        kind = type(body).__name__
        raise BadRequest(f"seed_session expects a JSON object (a task row), got {kind}")
    if not is_typed_seed(dict(body)):
        return SeedRequest(task_from_data(body))
    try:
        typed = TypedSeedRequest.model_validate(body)
    except ValidationError as exc:
        raise InvalidTask(
            validation_message("seed_session (typed body)", exc),
            hint="A typed seed is {resources_session_id, episode_id: {rollout_id, attempt}, "
            "task_id: {taskset, task_id}, task_data: {...}}; a legacy seed is the task row.",
        ) from None
    merged = dict(typed.task_data)
    merged.setdefault("task_id", typed.task_id.task_id)
    return SeedRequest(task_from_data(merged), typed.resources_session_id, typed.episode_id.key())
