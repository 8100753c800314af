"""k samples of every task, at most `concurrency` rollouts at a time, each written as a NeMo Gym
rollout row the moment it ends (so a killed run loses at most the rollouts in flight).

Resumable: rows already in `out` (same task id and sample index, same model) are kept and not
played again; a line cut short by a crash is dropped, and so is a rollout the model endpoint
failed (masked, `failure_kind: "model_error"`): a rerun plays it again. Shuffled by default
(with `seed`), so a run stopped halfway has sampled every kind of task, not the first ones.
The environment is a served StateGym (`server_url`) or one started in process from `env`.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.evaluation.episode import MODEL_ERROR, play
from app.evaluation.model import Api, Conversation, make_client
from app.sdk.environment import Environment


class EvalError(ValueError):
    """A run that cannot start as asked: the message says what to change."""


@dataclass(frozen=True)
class ModelSpec:
    base_url: str
    name: str
    api: Api = "chat"
    api_key: str | None = None
    temperature: float = 0.0
    timeout: float = 120.0
    retries: int = 2


@dataclass(frozen=True)
class RunSpec:
    tasks: Sequence[Mapping[str, Any]]
    k: int
    out: Path
    model: ModelSpec
    concurrency: int = 8
    seed: int = 0
    shuffle: bool = True
    max_steps: int = 30
    server_url: str | None = None
    env: Environment | None = None
    data_dir: Path | None = None
    # In process: the model that plays the user of conversational tasks (None: the scripted
    # user, or what STATEGYM_USER_MODEL_URL says). A served StateGym uses its own setting.
    user_model: ModelSpec | None = None


Progress = Callable[[Mapping[str, Any]], None]


def finished_rows(out: Path, model: str) -> list[dict[str, Any]]:
    """The rows a previous run of this file finished (a torn last line is dropped)."""
    if not out.exists():
        return []
    rows, torn = [], False
    for line in out.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            torn = True
            continue
        if not isinstance(row, dict) or "_ng_rollout_index" not in row or "reward" not in row:
            torn = True
            continue
        if row.get("eval_model") != model:
            raise EvalError(
                f"{out} holds rollouts of model {row.get('eval_model')!r}, not {model!r}: "
                "write this run to another file"
            )
        if row.get("failure_kind") == MODEL_ERROR:
            torn = True
            continue
        rows.append(row)
    if torn:  # rewrite without the broken lines, so appending keeps one row a line
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return rows


def _jobs(spec: RunSpec, done: set[tuple[str, int]]) -> list[tuple[int, int]]:
    jobs = [
        (index, sample)
        for index, task in enumerate(spec.tasks)
        for sample in range(spec.k)
        if (str(task.get("task_id")), sample) not in done
    ]
    if spec.shuffle:
        random.Random(spec.seed).shuffle(jobs)
    return jobs


@asynccontextmanager
async def environment(spec: RunSpec) -> AsyncIterator[tuple[httpx.AsyncBaseTransport, str]]:
    """(transport, base URL) of the StateGym the rollouts run against."""
    if spec.server_url is not None:
        limits = httpx.Limits(max_connections=spec.concurrency * 2)
        transport = httpx.AsyncHTTPTransport(limits=limits)
        async with transport:
            yield transport, spec.server_url.rstrip("/")
        return
    if spec.env is None or spec.data_dir is None:
        raise EvalError("give a server URL, or an environment and a data dir to run in process")
    from app.server.api import create_app
    from app.settings import Settings

    settings = Settings(
        env=spec.env.name, data_dir=spec.data_dir, secret_key=secrets.token_urlsafe(48)
    )
    if spec.user_model is not None:
        user = spec.user_model
        settings = settings.model_copy(
            update={
                "user_model_url": user.base_url,
                "user_model": user.name,
                "user_model_key": user.api_key,
                "user_model_timeout_s": user.timeout,
                # The user's reply counts against a tool call's time limit.
                "tool_time_limit_ms": max(settings.tool_time_limit_ms, int(user.timeout * 1250)),
            }
        )
    app = create_app(settings, spec.env)
    async with app.router.lifespan_context(app):
        yield httpx.ASGITransport(app=app), "http://stategym"


def check_tasks(spec: RunSpec) -> None:
    if spec.k < 1 or spec.concurrency < 1 or spec.max_steps < 1:
        raise EvalError("-k, --concurrency and --max-steps must be at least 1")
    if not spec.tasks:
        raise EvalError("the task file holds no tasks")
    ids = [str(t.get("task_id")) for t in spec.tasks]
    if len(set(ids)) != len(ids):
        raise EvalError("task ids repeat in the task file: each task needs its own id")
    if spec.env is not None:
        other = sorted({str(t.get("env")) for t in spec.tasks if t.get("env") != spec.env.name})
        if other:
            raise EvalError(f"tasks of environments {other} in a run of {spec.env.name!r}")


async def run(spec: RunSpec, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Play every missing (task, sample); all rows of the file, old and new."""
    check_tasks(spec)
    rows = finished_rows(spec.out, spec.model.name)
    jobs = _jobs(spec, {(str(r.get("task_id")), int(r["_ng_rollout_index"])) for r in rows})
    client = make_client(
        spec.model.base_url, spec.model.api_key, spec.model.timeout, spec.model.retries
    )
    gate = asyncio.Semaphore(spec.concurrency)
    spec.out.parent.mkdir(parents=True, exist_ok=True)
    async with environment(spec) as (transport, base_url):
        with spec.out.open("a") as sink:

            async def one(index: int, sample: int) -> None:
                task = spec.tasks[index]
                tools = list((task.get("responses_create_params") or {}).get("tools") or [])
                conversation = Conversation(
                    client,
                    spec.model.name,
                    spec.model.api,
                    tools,
                    temperature=spec.model.temperature,
                )
                async with gate:
                    row = await play(
                        transport, base_url, task, conversation, max_steps=spec.max_steps
                    )
                row.update(
                    _ng_task_index=index,
                    _ng_rollout_index=sample,
                    eval_model=spec.model.name,
                    eval_api=spec.model.api,
                )
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                rows.append(row)
                if progress is not None:
                    progress(row)

            await asyncio.gather(*(one(i, s) for i, s in jobs))
    await client.close()
    return rows
