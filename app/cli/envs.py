"""`stategym envs` (list what is installed) and `stategym envs check NAME` (the environment
contract an author runs on their own environment, and this repository's tests run on every
registered one).

Each contract failure is one line: what is wrong and what to fix. The checks, in order:
import, tool schemas, template build, a deterministic base, migration branch, task rows (gold 1,
no-op 0, a deterministic gold, hedged/declined answers 0: the same checks as `stategym tasks
check`), and adversarial nudges (each gold write repeated with one argument changed: a tool that
refuses the nudge passes, one that accepts it must cost the reward).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from app.registry import DEFAULT_ENVIRONMENT, ENTRY_POINT_GROUP, environment_names
from app.registry import load_environment as _load

envs_cli = typer.Typer(
    help="The environments this installation can serve, and the contract they must meet.",
    invoke_without_command=True,
)


@envs_cli.callback()
def list_envs(ctx: typer.Context) -> None:
    """List the environments this installation can serve (entry-point group
    `stategym.environments`)."""
    if ctx.invoked_subcommand is not None:
        return
    names = environment_names()
    if not names:
        typer.echo(f"no environment is installed (none registers in {ENTRY_POINT_GROUP!r})")
    for name in names:
        marker = " (default)" if name == DEFAULT_ENVIRONMENT else ""
        try:
            description = _load(name).description
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the others
            description = f"[cannot load: {type(exc).__name__}: {exc}]"
        typer.echo(f"{name}{marker}: {description}")


@envs_cli.command("check")
def check(
    name: Annotated[str, typer.Argument(help="An installed environment's name.")],
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="Task file (default: the environment's own tasks_path)."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="Check at most this many tasks (0: all).")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the failures as JSON.")] = False,
) -> None:
    """Check an environment against the contract; exit 1 with one line per failure."""
    from app.cli.env_contract import contract_failures

    failures = list(contract_failures(name, tasks=tasks, limit=limit or None))
    if as_json:
        typer.echo(json.dumps({"env": name, "ok": not failures, "failures": failures}, indent=1))
    else:
        for line in failures:
            typer.echo(f"FAIL {name}: {line}", err=True)
        if not failures:
            typer.echo(f"{name}: meets the environment contract")
    raise typer.Exit(1 if failures else 0)
