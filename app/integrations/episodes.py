"""One episode = one StateGym session: seeded from a task row, tools run, ended by a terminal tool.

What episode-style protocols (OpenEnv's `reset`/`step`) need beyond NeMo Gym's routes: a task
picked by id, by (split, index) or given whole; the prompt messages and tool schemas at reset;
an end the policy decides (a successful `finish`, `submit_answer` or `decline_request` verifies,
returns the reward with its evidence, and closes the session).

Invariants: a tool call is `SessionManager.call_tool` (the path of `POST /<tool>`: one
transaction, one step-log row, the same JSON); verify is `SessionManager.verify` on the row as
seeded plus a Responses-style trace, so it answers what `/verify` answers; an episode never
leaves its session open (the terminal tool, the next `start` and `close` each close it).
Imports nothing outside StateGym, so it is testable without any ecosystem package.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from app import jsonio
from app.core.tasks import SeedRequest, task_from_data
from app.errors import InvalidTask, StateGymError
from app.integrations.rollout import (
    FINISH_TOOL,
    Trace,
    finish_schema,
    prompt_messages,
    terminal_tools,
)
from app.runtime.lifecycle import check_capacity
from app.runtime.sessions import SessionManager
from app.sdk.environment import Environment

# The split of the environment's shipped evaluation set (`Environment.tasks_path`).
SHIPPED_SPLIT = "test"


def episode_tool_schemas(env: Environment) -> list[dict[str, Any]]:
    """The environment's tools plus `finish` (unless the environment has its own)."""
    schemas = env.tool_schemas()
    if env.tool_named(FINISH_TOOL) is None:
        schemas.append(finish_schema())
    return schemas


class TaskSets:
    """An environment's task sets by split name, read lazily from JSONL files.

    `test` is the shipped evaluation set; more splits (e.g. a generated `train` set) come from
    `extra` ({split: path}).
    """

    def __init__(self, env: Environment, extra: Mapping[str, Path] | None = None):
        self.paths: dict[str, Path] = {SHIPPED_SPLIT: env.tasks_path, **(extra or {})}
        self._rows: dict[str, list[dict[str, Any]]] = {}

    def splits(self) -> list[str]:
        return [name for name, path in self.paths.items() if path.is_file()]

    def rows(self, split: str) -> list[dict[str, Any]]:
        if split not in self._rows:
            path = self.paths.get(split)
            if path is None or not path.is_file():
                known = ", ".join(self.splits()) or "none"
                raise InvalidTask(f"no task split {split!r} (splits: {known})")
            lines = path.read_text(encoding="utf-8").splitlines()
            self._rows[split] = [json.loads(line) for line in lines if line.strip()]
        return self._rows[split]

    def row(self, split: str, index: int) -> dict[str, Any]:
        """Raises IndexError for an index outside the split (OpenEnv's Task API answers 400)."""
        rows = self.rows(split)
        if not 0 <= index < len(rows):
            raise IndexError(f"task index {index} is outside split {split!r} (0..{len(rows) - 1})")
        return rows[index]

    def by_id(self, task_id: str) -> dict[str, Any]:
        for split in self.splits():
            for row in self.rows(split):
                if str(row.get("task_id")) == task_id:
                    return row
        raise InvalidTask(f"no task {task_id!r} in splits {', '.join(self.splits())}")

    @staticmethod
    def describe(split: str, index: int, row: Mapping[str, Any]) -> dict[str, Any]:
        """A task spec for OpenEnv's Task API: what a trainer needs to pick it, and its prompt."""
        return {
            "id": row.get("task_id"),
            "index": index,
            "split": split,
            "family": row.get("family"),
            "difficulty": row.get("difficulty"),
            "prompt": prompt_messages(row),
        }

    def pick(
        self,
        *,
        task: Mapping[str, Any] | None = None,
        task_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """The row a reset asks for: a whole row, an id, (split, index), or, with none of these,
        the shipped set's task at `seed` modulo its size (a random one without a seed)."""
        if task is not None:
            if not isinstance(task, Mapping):
                raise InvalidTask("`task` must be a task row (a JSON object)")
            return dict(task)
        if task_id is not None:
            return self.by_id(str(task_id))
        rows = self.rows(split or SHIPPED_SPLIT)
        if index is None:
            index = seed % len(rows) if seed is not None else random.randrange(len(rows))
        return self.row(split or SHIPPED_SPLIT, index)


@dataclass
class StepOutcome:
    """What one tool call did: its result (the JSON `POST /<tool>` answers) or a protocol error,
    and, for a terminal call, the reward and the verify answer."""

    tool_name: str
    result: Any = None
    error_kind: str | None = None  # OpenEnv ToolErrorType values: tool_not_found, ...
    error: str | None = None
    done: bool = False
    reward: float | None = None
    verdict: dict[str, Any] = field(default_factory=dict)


class Episode:
    """One episode at a time over a SessionManager; `start` again for the next one."""

    def __init__(self, sessions: SessionManager):
        self.sessions = sessions
        self.episode_id: str | None = None
        self.session_id: str | None = None
        self.task_id: str | None = None
        self.row: dict[str, Any] | None = None
        self.step_count = 0
        self.done = False
        self.reward: float | None = None
        self.trace = Trace()
        self._open = False  # whether `session_id` is still open

    @cached_property
    def terminal(self) -> frozenset[str]:
        return terminal_tools([t.name for t in self.sessions.env.tools])

    async def start(self, row: Mapping[str, Any], episode_id: str | None = None) -> str:
        """Close the previous session, seed `row`; returns the new session's id."""
        await self.close()
        request = SeedRequest(task_from_data(row))  # InvalidTask (with what to fix) if bad
        await check_capacity(self.sessions, self.sessions.settings.max_live_sessions)
        seeded = await self.sessions.seed(request)
        self.episode_id = episode_id or uuid.uuid4().hex
        self.session_id, self.row, self._open = seeded.session_id, dict(row), True
        self.task_id = request.task.task_id
        self.step_count, self.done, self.reward, self.trace = 0, False, None, Trace()
        return seeded.session_id

    async def call(self, name: str, arguments: Mapping[str, Any]) -> StepOutcome:
        """Run one tool call; a successful terminal call also verifies and closes."""
        if self.done:
            return StepOutcome(
                name, error_kind="execution_error", error="the episode is over; call reset"
            )
        if self.session_id is None or not self._open:
            return StepOutcome(name, error_kind="execution_error", error="call reset first")
        self.step_count += 1
        tool = self.sessions.env.tool_named(name)
        if tool is None and name == FINISH_TOOL:
            message = arguments.get("message", "")
            return await self._finish(name, message if isinstance(message, str) else "")
        if tool is None:
            known = ", ".join(sorted([t.name for t in self.sessions.env.tools] + [FINISH_TOOL]))
            return StepOutcome(
                name, error_kind="tool_not_found", error=f"no tool named {name!r}; tools: {known}"
            )
        try:
            raw = await self.sessions.call_tool(self.session_id, tool, dict(arguments))
        except StateGymError as exc:  # the session is gone (reaped, closed): a protocol error
            return StepOutcome(name, error_kind="execution_error", error=exc.message)
        result = jsonio.loads(jsonio.dumps(raw))  # exactly the JSON POST /<tool> answers
        self.trace.add(name, arguments, jsonio.dumps(result).decode())
        if name in self.terminal and not (isinstance(result, dict) and "error" in result):
            return await self._finish(name, "", result)
        return StepOutcome(name, result=result)

    async def _finish(self, name: str, message: str, result: Any = None) -> StepOutcome:
        assert self.session_id is not None and self.row is not None
        body = {**self.row, "response": self.trace.response(message)}
        verdict = jsonio.loads(jsonio.dumps(await self.sessions.verify(self.session_id, body)))
        self.done, self.reward = True, float(verdict.get("reward", 0.0))
        await self.close()
        if result is None:
            result = {"output": "episode finished", "reward": self.reward}
        return StepOutcome(name, result=result, done=True, reward=self.reward, verdict=verdict)

    async def close(self) -> None:
        """Close the current session (idempotent; the episode's fields stay readable)."""
        if self._open and self.session_id is not None:
            self._open = False
            await self.sessions.close(self.session_id)
