"""`stategym report ROLLOUTS.jsonl`: what a NeMo Gym run earned, and where to look next."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from app.cli.rollout_report import load_rollouts, summarize, with_task_fields, write_report
from app.cli.sessions import DataDirOption, JsonOption, cli_errors, emit_json, out
from app.cli.tasks import read_rows


def report(
    rollouts: Annotated[Path, typer.Argument(help="NeMo Gym rollout output (JSONL).")],
    report_out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Also write a summary: report.md (+ an SVG histogram) or report.html."
        ),
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Failure reasons listed.")] = 10,
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            exists=True,
            dir_okay=False,
            help="Task file to take difficulty and family from (when rollouts lack them).",
        ),
    ] = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reward by task and environment, common failure reasons, and each failed rollout's diff."""
    with cli_errors():
        loaded = load_rollouts(rollouts)
        if tasks is not None:
            loaded = with_task_fields(loaded, read_rows(tasks))
        summary = summarize(loaded, data_dir, top)
        written = write_report(summary, report_out) if report_out is not None else []
    if as_json:
        emit_json({**summary, "written": [str(p) for p in written]})
        return
    out.print(
        f"{summary['rollouts']} rollouts · mean reward {summary['mean_reward']:.3f} · "
        f"success {summary['success_rate']:.1%}",
        highlight=False,
    )
    by_env = Table("env", "rollouts", "mean reward", "success", title="Reward by environment")
    for g in summary["by_env"]:
        by_env.add_row(
            g["env"], str(g["rollouts"]), f"{g['mean_reward']:.3f}", f"{g['success_rate']:.0%}"
        )
    out.print(by_env)
    by_task = Table("task", "env", "rollouts", "mean reward", "success", title="Reward by task")
    for g in summary["by_task"]:
        by_task.add_row(
            g["task"],
            g["env"],
            str(g["rollouts"]),
            f"{g['mean_reward']:.3f}",
            f"{g['success_rate']:.0%}",
        )
    out.print(by_task)
    for key in ("difficulty", "family"):
        if summary[f"by_{key}"]:
            table = Table(key, "rollouts", "mean reward", "success", title=f"Reward by {key}")
            for g in summary[f"by_{key}"]:
                table.add_row(
                    str(g[key]),
                    str(g["rollouts"]),
                    f"{g['mean_reward']:.3f}",
                    f"{g['success_rate']:.0%}",
                )
            out.print(table)
    if summary["failure_reasons"]:
        out.print("[bold]Most common failure reasons[/bold]")
        for f in summary["failure_reasons"]:
            out.print(f"  {f['count']:>5}  {f['reason']}", highlight=False)
    if summary["failed"]:
        out.print("[bold]Failed rollouts[/bold] (task, rollout, reward, then the diff command)")
        for f in summary["failed"]:
            out.print(
                f"  {f['task']} #{f['rollout_index']} reward {f['reward']:g}", highlight=False
            )
            out.print(
                f"    {f['diff_command'] or '(no session_id in the rollout)'}",
                highlight=False,
                soft_wrap=True,
            )
    for path in written:
        out.print(f"wrote {path}", highlight=False)
