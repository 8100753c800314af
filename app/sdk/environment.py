"""What an environment declares: its schema, its typed tools, its base data and its comparison spec.

The framework owns the protocol; an environment only declares. Tools are plain synchronous
functions `fn(db, args, ctx) -> result` over a SQLAlchemy `Session` (app/sdk/tool.py): the
framework opens one transaction per call, runs the function in one worker-thread hop, commits on
success and rolls back when it raises. An environment never sees which backend or file it runs
on. Every environment also gets the framework's answer tools and table (app/sdk/answer.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import MetaData
from sqlalchemy.orm import Session

from app.sdk.answer import (
    DEFAULT_ANSWER_INSTRUCTIONS,
    RESERVED_TOOL_NAMES,
    answer_table,
    decline_codes,
    framework_tools,
)
from app.sdk.compare_spec import CompareSpec
from app.sdk.tool import (
    NAMING_CONVENTION,
    Tool,
    ToolArgs,
    ToolContext,
    ToolError,
    ToolFunction,
    make_metadata,
    tool,
)
from app.sdk.user import MESSAGE_USER, message_user_tool, user_tables

__all__ = [
    "NAMING_CONVENTION",
    "BaseBuilder",
    "Environment",
    "Invariant",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolError",
    "ToolFunction",
    "make_metadata",
    "tool",
]


BaseBuilder = Callable[[Session, random.Random], None]
# A rule every final state must satisfy (e.g. "every transfer balances"): returns violations.
Invariant = Callable[[Session], list[str]]


# Names an environment's own tools may not take: the framework builds these for every one.
FRAMEWORK_TOOL_NAMES = RESERVED_TOOL_NAMES | {MESSAGE_USER}


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
    # name), inside its package like `tasks_path` (`stategym new-env` writes one; the shipped
    # five keep theirs in `envs/<name>/migrations/`). None: `migrations/versions/<name>/`.
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
    # The rules a request can be declined for: code -> one-line description. They are the enum
    # of `decline_request`'s `reason` and go into its description and the policy prompt; a
    # refusal task names the code it expects (none declared: the single code `other`).
    decline_reasons: Mapping[str, str] = field(default_factory=dict)
    # How to answer: the description of `submit_answer` (the framework's text by default).
    answer_instructions: str = DEFAULT_ANSWER_INSTRUCTIONS

    def __post_init__(self) -> None:
        # The framework's answer tools come last; an environment may not define its own of
        # those names (refused here, at import). `dataclasses.replace` rebuilds them.
        own = tuple(t for t in self.tools if not t.framework)
        clash = sorted(t.name for t in own if t.name in FRAMEWORK_TOOL_NAMES)
        if clash:
            raise ValueError(
                f"environment {self.name}: tool name(s) {clash} are reserved for the framework's "
                "tools (answers and the user); rename them"
            )
        answer_table(self.metadata)
        user_tables(self.metadata)
        built = framework_tools(self.metadata, self.answer_instructions, self.decline_reasons)
        object.__setattr__(self, "tools", own + (message_user_tool(self.metadata),) + built)

    @property
    def decline_codes(self) -> tuple[str, ...]:
        """The codes `decline_request` accepts (`other` when the environment declares none)."""
        return tuple(decline_codes(self.decline_reasons))

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
    import inspect
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
