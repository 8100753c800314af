"""The `stategym` command: every subcommand by name and one-line help, imported when it runs."""

from __future__ import annotations

import logging

import typer

from app.cli.lazy import Lazy, LazyGroup

TASKS = {
    "audit": Lazy(
        "Play shortcut policies that never read a tool output of the test task.",
        "app.cli.audit:audit_command",
    ),
    "check": Lazy(
        "Replay every task's gold, a no-op and hedged/declining submissions; exit 1 if any "
        "task's reward cannot be trusted.",
        "app.cli.tasks:check",
    ),
    "schema": Lazy("Print the JSON Schema of a task row (docs/tasks.md).", "app.cli.tasks:schema"),
    "fill": Lazy("Write full task rows from hand-written ones.", "app.cli.tasks:fill"),
    "generate": Lazy(
        "Generate tasks; every task is validated (gold 1, no-op 0, deterministic, unique) first.",
        "app.cli.generate:generate_command",
    ),
}

# In the order `stategym --help` lists them.
COMMANDS = {
    "browse": Lazy(
        "Explore runs in the browser: rewards, rollouts step by step, tables (read-only).",
        "app.cli.browse:browse",
    ),
    "report": Lazy(
        "Reward by task and environment, common failure reasons, and each failed rollout's diff.",
        "app.cli.report:report",
    ),
    "reverify": Lazy(
        "Re-score rollouts offline by replaying their function calls (no session needed).",
        "app.cli.reverify:reverify",
    ),
    "eval": Lazy(
        "k samples of every task by a model: pass@k, pass^k, mean reward by env/family/difficulty.",
        "app.cli.eval:eval_command",
    ),
    "mcp": Lazy(
        "Serve one task's session to a desktop MCP client over stdio (docs/mcp.md).",
        "app.cli.mcp:mcp",
    ),
    "new-env": Lazy(
        "Write a small, working environment package to start from (pip install -e it).",
        "app.cli.new_env:new_env",
    ),
    "serve": Lazy(
        "Serve one environment as a NeMo Gym Resources Server (or, with --protocol openenv, "
        "as an OpenEnv environment).",
        "app.cli.serve:serve",
    ),
    "prepare": Lazy(
        "Build the environment's template database (schema + base data) ahead of serving.",
        "app.cli.serve:prepare",
    ),
    "export": Lazy("Export tasks for other tools.", "app.cli.export:export_cli"),
    "tasks": Lazy("Check, fill, generate and audit task files.", commands=TASKS),
    "migrate": Lazy(
        "Schema migrations (Alembic: one branch per environment, one for the control "
        "database, one for the framework's tables every environment depends on).",
        "app.cli.migrate:migrate_cli",
    ),
    "envs": Lazy(
        "The environments this installation can serve, and the contract they must meet.",
        "app.cli.envs:envs_cli",
    ),
    "sessions": Lazy(
        "Inspect session databases after a run (list, show, diff, export, verify, gc).",
        "app.cli.sessions:sessions_app",
    ),
}


class StateGymGroup(LazyGroup):
    table = COMMANDS


cli = typer.Typer(
    cls=StateGymGroup,
    pretty_exceptions_enable=False,
    help="StateGym: persistent-state environments for LLM agents.",
    no_args_is_help=True,
)


@cli.callback()
def _root() -> None:
    """The subcommands come from COMMANDS (a group needs a callback to exist)."""


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # Importing Alembic logs each of its plugins at INFO; commands import it after this point.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    cli()
