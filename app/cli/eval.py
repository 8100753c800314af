"""`stategym eval`: run an OpenAI-compatible model through a task file (app/evaluation/)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.cli.common import environment_or_exit
from app.cli.sessions import DataDirOption, JsonOption, cli_errors, emit_json, err, out
from app.cli.tasks import read_rows
from app.evaluation.episode import EnvironmentRefused
from app.evaluation.model import ModelError
from app.evaluation.runner import ModelSpec, RunSpec, run
from app.evaluation.scores import summarize


def eval_command(
    tasks: Annotated[
        Path, typer.Option("--tasks", exists=True, dir_okay=False, help="Task rows (JSONL).")
    ],
    model_base_url: Annotated[
        str, typer.Option("--model-base-url", help="OpenAI-compatible base URL (…/v1).")
    ],
    model: Annotated[str, typer.Option("--model", help="Model name the endpoint serves.")],
    rollouts_out: Annotated[
        Path, typer.Option("--out", help="Rollout rows (JSONL; an existing file is resumed).")
    ],
    env: Annotated[str | None, typer.Option("--env", help="Environment to run in process.")] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="A served StateGym instead (http://host:port).")
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Samples per task.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Rollouts at a time.")] = 8,
    api: Annotated[
        str, typer.Option(help="`chat` (Chat Completions with tools) or `responses`.")
    ] = "chat",
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the endpoint's key.")
    ] = "OPENAI_API_KEY",
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.0,
    max_steps: Annotated[int, typer.Option(min=1, help="Most tool calls a rollout makes.")] = 30,
    timeout: Annotated[float, typer.Option(help="Seconds one model request may take.")] = 120.0,
    retries: Annotated[int, typer.Option(min=0, help="Retries of a failed model request.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the rollout order.")] = 0,
    shuffle: Annotated[bool, typer.Option(help="Play the (task, sample) pairs shuffled.")] = True,
    calibration: Annotated[
        Path | None,
        typer.Option(
            help="Per-task success rates and the mixed band (default: OUT.calibration.json)."
        ),
    ] = None,
    user_model_base_url: Annotated[
        str | None,
        typer.Option(
            help="In process: an OpenAI-compatible endpoint whose model plays the user of "
            "conversational tasks (default: the scripted user; docs/conversations.md)."
        ),
    ] = None,
    user_model: Annotated[str, typer.Option(help="The user model's name.")] = "gpt-4o-mini",
    user_model_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the user endpoint's key.")
    ] = "STATEGYM_USER_MODEL_KEY",
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """k samples of every task by a model: pass@k, pass^k, mean reward by env/family/difficulty."""
    import logging
    import os

    for name in ("httpx", "httpx2", "openai"):  # one line a request would bury the progress bar
        logging.getLogger(name).setLevel(logging.WARNING)
    if (env is None) == (url is None):
        err.print("[red]error:[/red] give --env (run in process) or --url (a served StateGym)")
        raise typer.Exit(2)
    if api not in ("chat", "responses"):
        err.print("[red]error:[/red] --api must be `chat` or `responses`")
        raise typer.Exit(2)
    if user_model_base_url is not None and url is not None:
        err.print(
            "[red]error:[/red] --user-model-base-url is for an in-process run; a served "
            "StateGym takes STATEGYM_USER_MODEL_URL"
        )
        raise typer.Exit(2)
    environment = environment_or_exit(env) if env is not None else None
    spec = RunSpec(
        tasks=read_rows(tasks),
        k=k,
        out=rollouts_out,
        model=ModelSpec(
            base_url=model_base_url,
            name=model,
            api=api,  # type: ignore[arg-type]  # checked above
            api_key=os.environ.get(api_key_env),
            temperature=temperature,
            timeout=timeout,
            retries=retries,
        ),
        concurrency=concurrency,
        seed=seed,
        shuffle=shuffle,
        max_steps=max_steps,
        server_url=url,
        env=environment,
        data_dir=data_dir or Path(os.environ.get("STATEGYM_DATA_DIR", "var")),
        user_model=None
        if user_model_base_url is None
        else ModelSpec(
            base_url=user_model_base_url,
            name=user_model,
            api="chat",
            api_key=os.environ.get(user_model_key_env),
            timeout=20.0,
        ),
    )
    with cli_errors():
        try:
            rows = asyncio.run(_run_with_progress(spec))
        except (ModelError, EnvironmentRefused) as exc:
            err.print(f"[red]error:[/red] {exc} (finished rollouts are kept; rerun to resume)")
            raise typer.Exit(1) from None
        summary = summarize(rows, k)
        where = calibration or rollouts_out.with_suffix(".calibration.json")
        where.write_text(json.dumps(summary["calibration"], indent=1) + "\n")
    if as_json:
        emit_json({**{k_: v for k_, v in summary.items() if k_ != "calibration"}})
        return
    _print(summary, k, where)


async def _run_with_progress(spec: RunSpec) -> list[dict[str, Any]]:
    total = len(spec.tasks) * spec.k
    rewards: list[float] = []
    columns = (
        TextColumn("eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("mean reward {task.fields[mean]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=not err.is_terminal) as bar:
        task = bar.add_task("eval", total=total, mean="-")

        def advance(row: Mapping[str, Any]) -> None:
            if not row.get("mask_sample"):
                rewards.append(float(row["reward"]))
            mean = f"{sum(rewards) / len(rewards):.3f}" if rewards else "-"
            bar.update(task, advance=1, mean=mean)

        rows = await run(spec, advance)
        bar.update(task, completed=total)
    return rows


def _print(summary: Mapping[str, Any], k: int, calibration: Path) -> None:
    out.print(
        f"{summary['rollouts']} rollouts of {summary['tasks']} tasks · mean reward "
        f"{summary['mean_reward']:.3f} · masked {summary['masked']} · "
        + " · ".join(f"pass@{j} {summary[f'pass@{j}']:.3f}" for j in range(1, k + 1))
        + " · "
        + " · ".join(f"pass^{j} {summary[f'pass^{j}']:.3f}" for j in range(1, k + 1)),
        highlight=False,
    )
    for key in ("env", "family", "difficulty"):
        table = Table(key, "rollouts", "mean reward", "success", title=f"By {key}")
        for name, group in summary[f"by_{key}"].items():
            table.add_row(
                name,
                str(group["rollouts"]),
                f"{group['mean_reward']:.3f}",
                f"{group['success']:.1%}",
            )
        out.print(table)
    mixed = len(summary["calibration"]["mixed_band"])
    out.print(f"calibration: {calibration} ({mixed} tasks in the mixed band)", highlight=False)
