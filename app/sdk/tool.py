"""A tool: a typed function `fn(db, args, ctx) -> result` whose docstring is its description.

Also the argument base class, the error a tool raises for the agent to read, and the context a
tool may use. app/sdk/environment.py re-exports all of it (environments import it from there).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, field_validator
from sqlalchemy import MetaData
from sqlalchemy.orm import Session

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
    # Who plays the user for `message_user` (an app.sdk.user.UserSimulator; None: the scripted
    # user). Typed loosely: the protocol lives above this module.
    user: Any = None


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
    # Built by the framework for every environment (app/sdk/answer.py), not declared by it.
    framework: bool = False

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
        bare = [n for n, field in args_model.model_fields.items() if not field.description]
        if bare:
            # The agent reads only the schema: an undescribed argument is a guess for it.
            raise TypeError(
                f"tool {f.__name__}: describe argument(s) {', '.join(bare)} "
                f"(Field(description=...) on {args_model.__name__})"
            )
        return Tool(
            name=f.__name__, description=doc, args_model=args_model, fn=f, read_only=read_only
        )

    return wrap(fn) if fn is not None else wrap
