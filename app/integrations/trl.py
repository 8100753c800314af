"""A TRL `environment_factory` class over any running StateGym server (client side, over HTTP).

    trainer = GRPOTrainer(..., environment_factory=StateGymEnvironment)  # $STATEGYM_URL

How it meets TRL's rules (trl 1.16 `GRPOTrainer`; docs/integrations.md): built with no
arguments, it reaches `StateGymEnvironment.url` or `$STATEGYM_URL` (`environment_class(url)`
subclasses per server); the first instance binds one typed method per tool of `GET /tools`,
with a Google-style docstring, plus `finish`; `reset(**row)` closes the previous session and
seeds the row's task; a tool's failure reaches the model as its text; `get_reward()` verifies
and closes. A successful terminal tool verifies at once; later calls answer that the episode
is over.
"""

from __future__ import annotations

import inspect
import json
import keyword
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from app.integrations.http_client import StateGymClient
from app.integrations.rollout import Trace, prompt_messages, terminal_tools

URL_VARIABLE = "STATEGYM_URL"
# TRL calls these itself; a tool of that name could not be told apart.
_NOT_TOOLS = frozenset({"reset", "get_reward"})
_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
}


class StateGymEnvironment:
    """One rollout at a time against the StateGym server at `url` (or `$STATEGYM_URL`)."""

    url: ClassVar[str | None] = None

    def __init__(self) -> None:
        url = type(self).url or os.environ.get(URL_VARIABLE)
        if not url:
            raise ValueError(
                f"no StateGym server: set ${URL_VARIABLE} or use environment_class(url)"
            )
        self._client = StateGymClient(url)
        names = bind_tools(type(self), self._client.tools())
        self._terminal = terminal_tools(names)
        self._row: dict[str, Any] | None = None
        self._trace = Trace()
        self._done = False
        self.reward: float | None = None
        self.verdict: dict[str, Any] | None = None

    def reset(self, **row: Any) -> str | None:
        """Close the previous session and seed this row's task."""
        self._client.close_session()
        task = _task_of(row)
        self._client.seed(task)
        self._row, self._trace, self._done = task, Trace(), False
        self.reward, self.verdict = None, None
        if "prompt" in row:
            return None
        return "\n\n".join(m["content"] for m in prompt_messages(task))

    def finish(self, message: str = "") -> str:
        """End the conversation: call this once you are done; the episode is then scored.

        Args:
            message: Your final reply to the user (state the answer there if they asked a question).
        """
        if self._row is None or self._client.session_id is None:
            return "Error: no episode is running (reset first)"
        self._verify(message)
        return json.dumps({"output": "episode finished"})

    def get_reward(self) -> float:
        """Verify the rollout (unless a terminal tool did already) and close its session."""
        if not self._done and self._row is not None and self._client.session_id is not None:
            self._verify("")
        return self.reward if self.reward is not None else 0.0

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._done:
            return "Error: the episode is over; no more tool calls"
        if self._client.session_id is None:
            return "Error: no episode is running (reset first)"
        answer = self._client.call(name, arguments)
        self._trace.add(name, arguments, answer.text)
        if name in self._terminal and answer.is_success and not _tool_error(answer.text):
            self._verify("")
        return answer.text

    def _verify(self, message: str) -> None:
        assert self._row is not None
        try:
            self.verdict = self._client.verify(self._row, self._trace.response(message))
            self.reward = float(self.verdict.get("reward", 0.0))
        finally:
            self._done = True
            self._client.close_session()

    def __del__(self) -> None:  # best effort: a dropped instance leaves no open session
        client = getattr(self, "_client", None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001, S110 - interpreter shutdown, server gone
                pass


def environment_class(url: str, name: str | None = None) -> type[StateGymEnvironment]:
    """A subclass bound to the server at `url` (one per environment when TRL routes rows by
    an `environment` column: `{"retail": environment_class(u1), "airline": ...}`)."""
    return type(name or "StateGymEnvironment", (StateGymEnvironment,), {"url": url})


def bind_tools(cls: type[StateGymEnvironment], schemas: list[dict[str, Any]]) -> frozenset[str]:
    """Give `cls` one method per tool, once per class (as TRL's own OpenReward adapter binds onto
    its class); a class already bound to another tool set refuses. Returns the tool names."""
    names = frozenset(s["name"] for s in schemas)
    bound: frozenset[str] | None = cls.__dict__.get("_bound_tools")
    if bound is not None:
        if bound != names:
            raise ValueError(
                f"{cls.__name__} is bound to other tools ({sorted(bound)}); use "
                "environment_class(url) for each server"
            )
        return names
    for schema in schemas:
        setattr(cls, schema["name"], tool_method(schema))
    cls._bound_tools = names  # type: ignore[attr-defined]  # set per subclass, read above
    return names


def tool_method(schema: Mapping[str, Any]) -> Any:
    """A method calling `POST /<name>`, typed and documented from the tool's JSON schema."""
    name = schema["name"]
    if name in _NOT_TOOLS or name.startswith("_") or not name.isidentifier():
        raise ValueError(f"tool name {name!r} cannot be a TRL tool method")
    params = schema.get("parameters") or {}
    properties: Mapping[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])
    fields = []
    for pname, pschema in properties.items():
        if not pname.isidentifier() or keyword.iskeyword(pname):
            raise ValueError(f"tool {name!r}: argument {pname!r} is not a Python identifier")
        hint, nullable = _hint(pschema)
        optional = nullable or pname not in required
        fields.append((pname, hint | None if nullable else hint, optional, _describe(pschema)))
    fields.sort(key=lambda f: f[2])  # Python wants required parameters first
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for pname, hint, optional, _ in fields:
        default = None if optional else inspect.Parameter.empty
        kind = inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(pname, kind, default=default, annotation=hint))
    defaults = {f[0]: None for f in fields if f[2]}

    def method(self: StateGymEnvironment, **arguments: Any) -> str:
        return self._call(name, {**defaults, **arguments})

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = {f[0]: f[1] for f in fields} | {"return": str}
    method.__doc__ = _docstring(schema.get("description") or name, fields)
    return method


def _hint(pschema: Mapping[str, Any]) -> tuple[Any, bool]:
    """(Python type for the JSON schema, whether null is allowed)."""
    options = pschema.get("anyOf") or pschema.get("oneOf")
    if options:
        concrete = [o for o in options if o.get("type") != "null"]
        nullable = len(concrete) < len(options)
        hint, _ = _hint(concrete[0]) if len(concrete) == 1 else (Any, False)
        return hint, nullable
    if "enum" in pschema:
        return Literal[tuple(pschema["enum"])], False
    kind = pschema.get("type")
    if kind == "array":
        items = pschema.get("items") or {}
        inner, _ = _hint(items) if "type" in items or "enum" in items else (dict, False)
        return list[inner], False  # type: ignore[valid-type]  # built at run time
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any, False


def _describe(pschema: Mapping[str, Any]) -> str:
    text = pschema.get("description") or pschema.get("title") or "see the tool description"
    return " ".join(str(text).split())


def _docstring(description: str, fields: list[tuple[str, Any, bool, str]]) -> str:
    """Google style: the description, then `Args:` with one line per parameter."""
    text = description.strip()
    if not fields:
        return text
    lines = "\n".join(f"    {pname}: {desc}" for pname, _, _, desc in fields)
    return f"{text}\n\nArgs:\n{lines}"


def _tool_error(text: str) -> bool:
    """Whether a tool's answer is its `{"error": ...}` result."""
    try:
        body = json.loads(text)
    except ValueError:
        return True
    return isinstance(body, dict) and "error" in body


def _task_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The task row a dataset row names: its `task` column (a row or its JSON), else the row."""
    task = row.get("task")
    if isinstance(task, str):
        task = json.loads(task)
    if isinstance(task, Mapping):
        return dict(task)
    return {k: v for k, v in row.items() if k != "prompt"}
