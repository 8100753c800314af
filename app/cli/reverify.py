"""`stategym reverify ROLLOUTS.jsonl`: score finished rollouts again by replaying their calls.

Each line is a rollout as NeMo Gym's collector writes it (the task row, `response`, and the
`reward` verify gave). Its calls are replayed on a fresh copy of the task's snapshot and the
result verified (app/runtime/reverify.py); no server and no session are needed. A replayed reward
that differs from the recorded one, or a replayed output that differs from the one the rollout
recorded, is a disagreement: printed in red, counted, and the exit code is 1. Tools are meant to
be deterministic under the session's frozen clock, so a disagreement is a bug in an environment
(or a rollout file that was edited).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress

from app.cli.common import environment_or_exit, settings_or_exit
from app.core.tasks import task_from_data
from app.errors import StateGymError
from app.runtime.reverify import replay_result
from app.sdk.environment import Environment
from app.storage.images import Store
from app.verify.gold import GoldCache

err = Console(stderr=True, soft_wrap=True)
REWARD_TOLERANCE = 1e-9


class _Envs:
    """Environment, store and gold cache per environment name, built on first use."""

    def __init__(self, data_dir: Path, default: str):
        self.data_dir, self.default = data_dir, default
        self._made: dict[str, tuple[Environment, Store, GoldCache]] = {}

    def get(self, name: str | None) -> tuple[Environment, Store, GoldCache]:
        name = name or self.default
        if name not in self._made:
            env = environment_or_exit(name)
            store = Store(self.data_dir, env)
            self._made[name] = (env, store, GoldCache(store, 256))
        return self._made[name]


def reverify_row(envs: _Envs, row: dict[str, Any], diff_limit: int) -> dict[str, Any]:
    env, store, gold = envs.get(row.get("env") if isinstance(row.get("env"), str) else None)
    task = task_from_data(row)
    return replay_result(
        env=env,
        snapshot=store.snapshot(task),
        gold=gold,
        task=task,
        response=row.get("response"),
        diff_limit=diff_limit,
    ).to_payload()


def reverify(
    rollouts: Annotated[Path, typer.Argument(help="JSONL of rollouts (task row + response).")],
    env: Annotated[
        str | None, typer.Option("--env", help="Environment of rows without an `env` field.")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Data folder (default: $STATEGYM_DATA_DIR or ./var)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write each replayed verify answer here (JSONL).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Re-score rollouts offline by replaying their function calls (no session needed)."""
    overrides: dict[str, Any] = {"env": env, "data_dir": data_dir}
    settings = settings_or_exit(**{k: v for k, v in overrides.items() if v is not None})
    if not rollouts.is_file():
        err.print(f"[red]error:[/red] {rollouts} is not a file", highlight=False)
        raise typer.Exit(1)
    lines = [line for line in rollouts.read_text().splitlines() if line.strip()]
    envs = _Envs(settings.data_dir, settings.env)
    summary = {"rollouts": len(lines), "agree": 0, "disagree": 0, "unrecorded": 0, "failed": 0}
    disagreements: list[dict[str, Any]] = []
    answers = []
    with Progress(console=err, transient=True, disable=as_json) as progress:
        bar = progress.add_task("replaying", total=len(lines))
        for number, line in enumerate(lines, 1):
            progress.advance(bar)
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("a line is not a JSON object")
                result = reverify_row(envs, row, settings.verify_diff_limit)
            except (ValueError, StateGymError) as exc:
                summary["failed"] += 1
                message = exc.message if isinstance(exc, StateGymError) else str(exc)
                err.print(f"[red]line {number}: cannot replay:[/red] {message}", highlight=False)
                continue
            answers.append({"line": number, "task_id": row.get("task_id"), **result})
            disagreement = _judged(number, row, result, summary)
            if disagreement is not None:
                disagreements.append(disagreement)
    if out is not None:
        out.write_text("".join(json.dumps(a, default=str) + "\n" for a in answers))
    if as_json:
        typer.echo(json.dumps({**summary, "disagreements": disagreements}, indent=2))
    else:
        for d in disagreements:
            _print_disagreement(d)
        typer.echo(
            f"{summary['rollouts']} rollout(s): {summary['agree']} agree, "
            f"{summary['disagree']} disagree, {summary['unrecorded']} without a recorded reward, "
            f"{summary['failed']} could not be replayed"
        )
    if summary["disagree"] or summary["failed"]:
        raise typer.Exit(1)


def _judged(
    number: int, row: dict[str, Any], result: dict[str, Any], summary: dict[str, int]
) -> dict[str, Any] | None:
    """Count a replayed row against its recorded reward (and outputs); its disagreement, if any."""
    trajectory = result.get("verification", {}).get("trajectory", {})
    differs = trajectory.get("output_differs", [])
    recorded = row.get("reward")
    if not isinstance(recorded, int | float):
        summary["unrecorded"] += 1
        same = not differs
    else:
        same = abs(float(recorded) - result["reward"]) <= REWARD_TOLERANCE and not differs
    if same:
        summary["agree"] += isinstance(recorded, int | float)
        return None
    summary["disagree"] += 1
    return {
        "line": number,
        "task_id": row.get("task_id"),
        "recorded_reward": recorded,
        "replayed_reward": result["reward"],
        "outputs_differ_at": [d.get("position") for d in differs],
    }


def _print_disagreement(d: dict[str, Any]) -> None:
    err.print(
        f"[bold red]DISAGREEMENT[/bold red] line {d['line']} task {d['task_id']}: recorded "
        f"reward {d['recorded_reward']}, replayed {d['replayed_reward']}"
        + (
            f"; replayed outputs differ at response.output{d['outputs_differ_at']}"
            if d["outputs_differ_at"]
            else ""
        )
        + " (non-deterministic tool, or an edited rollout)",
        highlight=False,
    )
