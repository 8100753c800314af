"""An environment served over OpenEnv (`stategym serve --protocol openenv`), by OpenEnv's own app.

OpenEnv's `create_app` builds the server (`/ws`, `/mcp`, `/health`, `/schema`, the Task API);
this module supplies the `Environment` it runs, one per WebSocket session, over
app/integrations/episodes.py: `reset(...)` (a task id, a split and index, a whole row, or a
seed) seeds a session and answers the prompt and the tool schemas; `step(...)` lists the tools
or runs one, answering what `POST /<tool>` answers, with `done: true`, verify's reward and its
answer after a successful terminal tool; `close()` closes the session. Sessions live in the
app's one SessionManager, so storage, verify, retention and capacity are the NeMo Gym server's.
Needs the `stategym[openenv]` extra; nothing outside app/integrations imports it
(docs/integrations.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app as openenv_create_app
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.mcp_types import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import (
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import Field

from app.integrations.episodes import Episode, TaskSets, episode_tool_schemas
from app.integrations.rollout import prompt_messages
from app.registry import load_environment
from app.runtime.lifecycle import serving
from app.runtime.sessions import SessionManager
from app.sdk.environment import Environment
from app.server.asgi import raise_open_file_limit
from app.settings import Settings

log = logging.getLogger("stategym.openenv")
# OpenEnv needs a bound on concurrent WebSocket sessions; STATEGYM_MAX_LIVE_SESSIONS sets it.
DEFAULT_CAPACITY = 4096
# A close from OpenEnv's session thread waits at most this long for the loop to close the session.
CLOSE_WAIT_SECONDS = 30.0


class ResetObservation(Observation):
    """The start of an episode: what the policy is shown and may call."""

    prompt: list[dict[str, str]] = Field(description="The task's messages [{role, content}].")
    tools: list[Tool] = Field(description="Every tool of the episode, `finish` included.")
    task_id: str | None = Field(default=None, description="The seeded task's id.")
    session_id: str = Field(description="StateGym's session id (for `stategym sessions`).")


class EpisodeState(State):
    """OpenEnv's state plus where the episode lives in StateGym."""

    session_id: str | None = Field(default=None, description="StateGym's session id.")
    task_id: str | None = Field(default=None, description="The seeded task's id.")
    done: bool = Field(default=False, description="Whether a terminal tool ended the episode.")
    reward: float | None = Field(default=None, description="The verify reward, once done.")


class Hub:
    """What every episode of one app shares: the SessionManager, task sets, tool list."""

    def __init__(self, settings: Settings, env: Environment):
        clash = sorted({t.name for t in env.tools} & RESERVED_TOOL_NAMES)
        if clash:
            raise ValueError(f"{env.name}: tools {clash} are reserved by OpenEnv")
        self.settings, self.env = settings, env
        self.sessions = SessionManager(settings, env)
        self.tasks = TaskSets(env)
        self.tools = [
            Tool(name=s["name"], description=s["description"], input_schema=s["parameters"])
            for s in episode_tool_schemas(env)
        ]
        self.loop: asyncio.AbstractEventLoop | None = None


class StateGymEnvironment(OpenEnvEnvironment[CallToolAction, Observation, EpisodeState]):
    """One OpenEnv session = one StateGym session at a time (a new one per reset)."""

    # Each instance seeds its own StateGym session; the SessionManager isolates them.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, hub: Hub):
        super().__init__()
        self.hub = hub
        self.episode = Episode(hub.sessions)

    # --- Task API (RFC 013): side-effect free, callable on a fresh instance ---------------------
    def list_splits(self) -> list[str]:
        return self.hub.tasks.splits()

    def num_tasks(self, split: str) -> int:
        return len(self.hub.tasks.rows(split))

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self.get_task_range(split)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        return TaskSets.describe(split, index, self.hub.tasks.row(split, index))

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        rows = self.hub.tasks.rows(split)
        first, last, _ = slice(start, stop).indices(len(rows))
        return [TaskSets.describe(split, i, rows[i]) for i in range(first, last)]

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.hub.env.name,
            description=self.hub.env.description,
            version="0.1.0",
        )

    # --- episode ----------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        """Sync entry (OpenEnv's stateless HTTP /reset): runs the async reset on a new loop."""
        return asyncio.run(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        self.hub.loop = self.hub.loop or asyncio.get_running_loop()
        row = self.hub.tasks.pick(
            task=kwargs.get("task"),
            task_id=kwargs.get("task_id"),
            split=kwargs.get("split"),
            index=kwargs.get("index"),
            seed=seed,
        )
        session_id = await self.episode.start(row, episode_id)
        prompt = prompt_messages(row)
        task_id = self.episode.task_id
        return ResetObservation(
            prompt=prompt,
            tools=self.hub.tools,
            task_id=task_id,
            session_id=session_id,
            done=False,
            reward=None,
            metadata={"prompt": prompt, "task_id": task_id, "session_id": session_id},
        )

    def step(
        self, action: CallToolAction, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return asyncio.run(self.step_async(action, timeout_s=timeout_s, **kwargs))

    async def step_async(
        self, action: CallToolAction, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=self.hub.tools, reward=None)
        if not isinstance(action, CallToolAction):
            kind = type(action).__name__
            error = ToolError(
                error_type=ToolErrorType.INVALID_ARGS,
                message=f"expected a call_tool or list_tools action, got {kind}",
            )
            return CallToolObservation(tool_name="", error=error)
        outcome = await self.episode.call(action.tool_name, action.arguments)
        error = None
        if outcome.error is not None:
            kind = ToolErrorType(outcome.error_kind or "execution_error")
            error = ToolError(error_type=kind, message=outcome.error)
        metadata: dict[str, Any] = {"step": self.episode.step_count}
        if outcome.done:
            metadata.update(outcome.verdict)
            metadata.pop("reward", None)
        return CallToolObservation(
            tool_name=outcome.tool_name,
            result=outcome.result,
            error=error,
            done=outcome.done,
            reward=outcome.reward if outcome.done else 0.0,
            metadata=metadata,
        )

    @property
    def state(self) -> EpisodeState:
        ep = self.episode
        return EpisodeState(
            episode_id=ep.episode_id,
            step_count=ep.step_count,
            session_id=ep.session_id,
            task_id=ep.task_id,
            done=ep.done,
            reward=ep.reward,
        )

    def close(self) -> None:
        """OpenEnv calls this on a thread of its own when the WebSocket closes (or on the loop
        itself as a fallback); either way the StateGym session gets closed."""
        self._on_loop(self.episode.close())

    def _on_loop(self, coro: Coroutine[Any, Any, None]) -> None:
        loop = self.hub.loop
        if loop is None or loop.is_closed():
            coro.close()  # never reset: no session to close
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            task = loop.create_task(coro)
            _PENDING.add(task)
            task.add_done_callback(_PENDING.discard)
            return
        try:
            asyncio.run_coroutine_threadsafe(coro, loop).result(CLOSE_WAIT_SECONDS)
        except Exception:  # noqa: BLE001 - close is best effort; the reaper closes what is left
            log.exception("closing StateGym session %s failed", self.episode.session_id)


_PENDING: set[asyncio.Task[None]] = set()


def create_openenv_app(settings: Settings, env: Environment | None = None) -> FastAPI:
    """OpenEnv's FastAPI app for one environment, sessions in a SessionManager of its own."""
    env = env or load_environment(settings.env)
    hub = Hub(settings, env)
    capacity = settings.max_live_sessions or DEFAULT_CAPACITY
    app = openenv_create_app(
        partial(StateGymEnvironment, hub),
        CallToolAction,
        CallToolObservation,
        env_name=env.name,
        # An OpenEnv session no WebSocket holds (one made over HTTP /mcp whose client died) is
        # destroyed after StateGym's idle TTL, which closes its StateGym session with it.
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=capacity, session_timeout=settings.session_idle_ttl_seconds or None
        ),
        state_cls=EpisodeState,
        reset_observation_cls=ResetObservation,
    )
    app.state.stategym_hub = hub
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[Any]:
        hub.loop = asyncio.get_running_loop()
        async with (
            serving(
                hub.sessions, settings.session_idle_ttl_seconds, settings.reaper_interval_seconds
            ),
            inner(app_) as state,
        ):
            yield state

    app.router.lifespan_context = lifespan
    return app


def app_from_env() -> FastAPI:
    """uvicorn's factory for `stategym serve --protocol openenv` (settings from STATEGYM_*)."""
    raise_open_file_limit()
    return create_openenv_app(Settings())
