"""What an environment declares: its schema, its typed tools, its base data and its comparison spec.

The framework owns the protocol; an environment only declares. Tools are plain synchronous
functions `fn(db, args, ctx) -> result` over a SQLAlchemy `Session`: the framework opens one
transaction per call, runs the function in one worker-thread hop, commits on success and rolls
back when it raises. An environment never sees which backend or file it runs on.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, field_validator
from sqlalchemy import MetaData
from sqlalchemy.orm import Session

from app.sdk.compare_spec import CompareSpec
from app.sdk.tool_schema import function_tool_schema

# Constraint names Alembic can rely on, also on SQLite (batch migrations need named constraints).
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def make_metadata() -> MetaData:
    """A MetaData with the project's constraint naming convention; every environment uses one."""
    return MetaData(naming_convention=NAMING_CONVENTION)


_INT64 = (-(2**63), 2**63 - 1)


def _fits_int64(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return _INT64[0] <= value <= _INT64[1]
    if isinstance(value, list | tuple | set | frozenset):
        return all(_fits_int64(v) for v in value)
    if isinstance(value, dict):
        return all(_fits_int64(v) for v in value.values())
    if isinstance(value, BaseModel):
        return all(_fits_int64(v) for v in value.__dict__.values())
    return True


class ToolArgs(BaseModel):
    """Base class of every tool's argument model: unknown keys are refused, strings are trimmed,
    integers must fit a database INTEGER (64 bits), whatever the tool does with them."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    @field_validator("*")
    @classmethod
    def _integers_fit_the_database(cls, value: Any) -> Any:
        # SQLite raises OverflowError (a 500) when binding a larger int: refuse it as bad input.
        if not _fits_int64(value):
            raise ValueError("integers must lie between -2**63 and 2**63 - 1")
        return value


class ToolError(Exception):
    """A failure the agent can correct: bad input or a business rule said no.

    The framework rolls the call's transaction back and answers 200 with
    `{"error": {"code", "message", "hint"}}` so the model reads what went wrong and how to fix it.
    """

    def __init__(self, message: str, *, hint: str | None = None, code: str = "rule_violation"):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def as_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            payload["hint"] = self.hint
        return payload


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know besides its arguments. `now` is the session's frozen clock."""

    now: datetime
    session_id: str
    task_id: str | None = None


ToolFunction = Callable[[Session, Any, ToolContext], Any]


@dataclass(frozen=True)
class Tool:
    """One typed tool: its name is the route `POST /<name>`, its docstring the description."""

    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFunction
    # Read-only tools may skip the write lock; the framework still runs them in a transaction.
    read_only: bool = False

    def __call__(self, db: Session, args: BaseModel, ctx: ToolContext) -> Any:
        return self.fn(db, args, ctx)

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema (Responses API shape) offered to the model."""
        return function_tool_schema(self.name, self.description, self.args_model)


def tool(fn: ToolFunction | None = None, *, read_only: bool = False) -> Any:
    """Turn `def name(db, args: SomeArgs, ctx) -> result` into a `Tool`.

    The argument model comes from the `args` annotation, the description from the docstring.
    """

    def wrap(f: ToolFunction) -> Tool:
        hints = get_type_hints(f)
        args_model = hints.get("args")
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {f.__name__}: annotate `args` with a pydantic model")
        doc = inspect.getdoc(f)
        if not doc:
            raise TypeError(f"tool {f.__name__}: a docstring is required (it is the description)")
        return Tool(
            name=f.__name__, description=doc, args_model=args_model, fn=f, read_only=read_only
        )

    return wrap(fn) if fn is not None else wrap


BaseBuilder = Callable[[Session, random.Random], None]
# A rule every final state must satisfy (e.g. "every transfer balances"): returns violations.
Invariant = Callable[[Session], list[str]]


@dataclass(frozen=True)
class Environment:
    """Everything the framework needs to serve, seed, verify and migrate one environment."""

    name: str
    description: str
    metadata: MetaData
    tools: tuple[Tool, ...]
    # Inserts the deterministic base dataset into an empty schema (called once per template).
    build_base: BaseBuilder
    compare: CompareSpec
    # The shop's / airline's policy: the system prompt every task of this env starts with.
    policy: str
    tasks_path: Path
    # The frozen clock of a session when its task's seed names none.
    default_now: datetime
    # Bump when build_base's output changes, so cached templates are rebuilt.
    data_version: str = "1"
    base_seed: int = 20260101
    # The environment's own Alembic version directory (its migration branch, labelled with its
    # name). None: `migrations/versions/<name>/` of this repository, where the shipped five keep
    # theirs. A plugin package keeps its branch inside itself (`stategym new-env` writes one).
    migrations_path: Path | None = None
    # "strict": reward is the success bit; "partial": reward is partial credit.
    reward_mode: Literal["strict", "partial"] = "strict"
    # Checked on the final state at verify; any violation makes the reward 0.
    invariants: tuple[Invariant, ...] = ()
    # False for tools whose cost depends on what the agent asks (a SQL console): their calls
    # always run in a tool thread, never on the event loop (app/runtime/inline.py).
    inline_tool_calls: bool = True
    # What the environment needs of its storage backend, by capability name (app/storage/base.py):
    # ("sqlite",) for tools that use SQLite itself (the sql console's authorizer and progress
    # handler). A backend that lacks one refuses to serve the environment, saying why.
    requires: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def tool_named(self, name: str) -> Tool | None:
        return self._tools_by_name.get(name)

    @property
    def _tools_by_name(self) -> dict[str, Tool]:
        cached = self.__dict__.get("_tool_index")
        if cached is None:
            cached = {t.name: t for t in self.tools}
            object.__setattr__(self, "_tool_index", cached)
        return cached

    def base_data_digest(self) -> str:
        """A digest of the source that builds the base data: `build_base`'s module and the
        modules of the environment's own package it uses. Cached templates key on it, so a
        changed builder rebuilds them even when `data_version` was not bumped."""
        cached = self.__dict__.get("_base_data_digest")
        if cached is None:
            cached = _source_digest(self.build_base)
            object.__setattr__(self, "_base_data_digest", cached)
        return cached

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self.tools]


def _source_digest(fn: Callable[..., Any]) -> str:
    """sha256 over the source of `fn`'s module and of the same-package modules it refers to."""
    import hashlib
    import sys
    import types

    home = sys.modules.get(fn.__module__)
    if home is None:
        return "unknown"
    package = fn.__module__.split(".")[0]
    modules = {home.__name__: home}
    for value in vars(home).values():
        owner = value if isinstance(value, types.ModuleType) else inspect.getmodule(value)
        if owner is not None and owner.__name__.split(".")[0] == package:
            modules.setdefault(owner.__name__, owner)
    digest = hashlib.sha256()
    for name in sorted(modules):
        try:
            digest.update(inspect.getsource(modules[name]).encode())
        except (OSError, TypeError):  # no source on disk (a frozen module): its name only
            digest.update(name.encode())
    return digest.hexdigest()[:16]
