"""`stategym mcp`: one task's session served over stdio to a desktop MCP client.

The command seeds a session from a task row, serves the environment's tools on it (the same
`Server` as `/mcp`, bound to that one session) and, with `--verify-on-exit`, verifies the final
state when the client disconnects. stdout carries the MCP protocol, so everything meant for a
person goes to stderr.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.common import environment_or_exit, settings_or_exit
from app.errors import StateGymError
from app.runtime.sessions import SessionManager
from app.sdk.environment import Environment
from app.server.mcp import build_server
from app.server.mcp_access import server_name
from app.server.models import parse_seed_body
from app.settings import Settings


def find_task(path: Path, task_id: str) -> dict[str, Any]:
    """The row of `task_id` in a JSONL task file (exit 2 with a clear line when absent)."""
    if not path.is_file():
        typer.echo(f"error: no task file at {path}", err=True)
        raise typer.Exit(2)
    known = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if str(row.get("task_id")) == task_id:
                return row
            known.append(str(row.get("task_id")))
    typer.echo(
        f"error: no task {task_id!r} in {path} (first ids: {', '.join(known[:5])})", err=True
    )
    raise typer.Exit(2)


def task_prompt(row: Mapping[str, Any]) -> str:
    """The row's messages as text: the client's instructions, and what the person should ask."""
    messages = (row.get("responses_create_params") or {}).get("input") or []
    if isinstance(messages, str):
        return messages
    return "\n\n".join(
        f"[{m.get('role', 'user')}]\n{m.get('content', '')}"
        for m in messages
        if isinstance(m, Mapping) and isinstance(m.get("content"), str)
    )


async def serve_task(
    settings: Settings, env: Environment, row: Mapping[str, Any], *, verify_on_exit: bool
) -> dict[str, Any] | None:
    """Seed, serve over stdio until the client leaves, then verify (optionally) and close."""
    from mcp.server.stdio import stdio_server

    sessions = SessionManager(settings, env)
    try:
        session_id = (await sessions.seed(parse_seed_body(row))).session_id
        typer.echo(
            f"stategym mcp: {env.name} task {row.get('task_id')}, session {session_id}", err=True
        )
        server = build_server(
            server_name(settings, env),
            env,
            sessions,
            lambda _request: session_id,
            instructions=task_prompt(row),
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        verdict = None
        if verify_on_exit:
            # The client's final answer never reaches this process: expected outputs are
            # checked against an empty answer, so state_match is the figure to read.
            verdict = await sessions.verify(session_id, {**row, "response": None})
        await sessions.close(session_id)
        return verdict
    finally:
        await sessions.aclose()


def mcp(
    task: Annotated[str, typer.Option("--task", help="task_id of the row to play.")],
    env: Annotated[str | None, typer.Option("--env", help="Environment name.")] = None,
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="Task file (default: the environment's own, its tasks_path)."),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Data folder (default: $STATEGYM_DATA_DIR or ./var)."),
    ] = None,
    verify_on_exit: Annotated[
        bool,
        typer.Option(
            "--verify-on-exit", help="Verify when the client disconnects; print to stderr."
        ),
    ] = False,
) -> None:
    """Serve one task's session to a desktop MCP client over stdio (docs/mcp.md)."""
    overrides = {k: v for k, v in {"env": env, "data_dir": data_dir}.items() if v is not None}
    settings = settings_or_exit(**overrides)
    environment = environment_or_exit(settings.env)
    row = find_task(tasks or environment.tasks_path, task)
    try:
        verdict = asyncio.run(serve_task(settings, environment, row, verify_on_exit=verify_on_exit))
    except StateGymError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    if verdict is not None:
        typer.echo(f"reward: {verdict['reward']}", err=True)
        typer.echo(f"reward_components: {json.dumps(verdict.get('reward_components'))}", err=True)
        if verdict.get("failure_reason"):
            typer.echo(f"failure_reason: {verdict['failure_reason']}", err=True)
        typer.echo("verification (diff against the gold state):", err=True)
        typer.echo(json.dumps(verdict.get("verification"), indent=2, default=str), err=True)
