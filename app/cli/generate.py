"""`stategym tasks generate`: N validated tasks for an environment, a seed and a split.

    stategym tasks generate --env retail --count 10000 --seed 1 --split train out.jsonl
    stategym tasks generate --env retail --shipped envs/retail/tasks.jsonl

Byte-identical output for the same arguments (whatever --jobs); a progress bar and the summary
(by family, difficulty, tool, kind, answer kind, dropped) go to stderr.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.taskgen.driver import Request, Summary, generate
from app.taskgen.kit import StoryFailed, TaskGenerator
from app.taskgen.registry import NoGenerator, load_generator
from app.taskgen.splits import SPLITS

SplitOption = Annotated[str, typer.Option("--split", help="train or test (disjoint pools).")]


def generate_command(
    out: Annotated[Path, typer.Argument(dir_okay=False, help="The JSONL file to write.")],
    env: Annotated[str, typer.Option("--env", help="Environment name.")],
    count: Annotated[int, typer.Option("--count", min=1, help="Tasks to write.")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same bytes.")] = 0,
    split: SplitOption = "train",
    difficulty: Annotated[
        list[int] | None,
        typer.Option("--difficulty", min=1, max=5, help="Keep only these (repeatable)."),
    ] = None,
    families: Annotated[
        list[str] | None, typer.Option("--families", help="Only these families (repeatable).")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", min=1, help="Worker processes (default: one per core)."),
    ] = None,
    shipped: Annotated[
        bool, typer.Option("--shipped", help="Write the shipped evaluation set instead.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Generate tasks; every task is validated (gold 1, no-op 0, deterministic, unique) first."""
    try:
        gen = load_generator(env)
    except (KeyError, NoGenerator) as exc:
        # One line saying what to add, not a usage panel or a ModuleNotFoundError.
        typer.echo(f"error: {exc.args[0] if exc.args else exc}", err=True)
        raise typer.Exit(2) from None
    err = Console(stderr=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    if shipped:
        _write_shipped(gen, env, out, err)
        return
    if split not in SPLITS:
        raise typer.BadParameter(f"--split must be one of {', '.join(SPLITS)}")
    try:
        gen.families()  # refused here, in one line, rather than in every worker's initializer
    except StoryFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    request = Request(
        env,
        count,
        seed,
        split,
        frozenset(difficulty or ()),
        tuple(families or ()),
    )
    started = time.perf_counter()
    summary = _write_generated(request, jobs, out, err)
    seconds = time.perf_counter() - started
    if as_json:
        typer.echo(json.dumps(summary_dict(summary, seconds), indent=1))
    else:
        print_summary(err, env, out, summary, seconds)
    if summary.written < count:
        err.print(f"[red]only {summary.written} of {count} tasks after {summary.attempts} attempts")
        raise typer.Exit(1)


def _write_shipped(gen: TaskGenerator, env: str, out: Path, err: Console) -> None:
    """The shipped evaluation set, as `gen.shipped()` writes it."""
    try:
        lines = gen.shipped()
    except StoryFailed as exc:
        # One unwrapped line: what failed, where; the trace only on request.
        typer.echo(f"error: {exc} (STATEGYM_TASKGEN_TRACEBACK=1 shows the trace)", err=True)
        if os.environ.get("STATEGYM_TASKGEN_TRACEBACK"):
            raise
        raise typer.Exit(1) from None
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    err.print(f"wrote the shipped {env} set: {len(lines)} tasks to {out}")


def _write_generated(request: Request, jobs: int | None, out: Path, err: Console) -> Summary:
    """The drawn tasks into `out` as they come, with a progress bar; the run's summary."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    summary = Summary()
    with Progress(*columns, console=err, transient=True) as progress:
        name = f"{request.env} {request.split} seed {request.seed}"
        bar = progress.add_task(name, total=request.count)
        try:
            with out.open("w", encoding="utf-8", newline="\n") as fh:
                workers = jobs or len(os.sched_getaffinity(0))  # the same bytes whatever it is
                for item in generate(request, workers, lambda n: progress.advance(bar, n)):
                    if isinstance(item, Summary):
                        summary = item
                    else:
                        fh.write(json.dumps(item, ensure_ascii=False) + "\n")
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        except StoryFailed as exc:  # a family writes rows no reader accepts: nothing is kept
            out.unlink(missing_ok=True)
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    return summary


def summary_dict(summary: Summary, seconds: float) -> dict[str, object]:
    return {
        "written": summary.written,
        "attempts": summary.attempts,
        "filtered": summary.filtered,
        "dropped": dict(sorted(summary.dropped.items())),
        "seconds": round(seconds, 2),
        "tasks_per_second": round(summary.written / seconds, 1) if seconds else None,
        "family": dict(sorted(summary.family.items())),
        "difficulty": {str(k): v for k, v in sorted(summary.difficulty.items())},
        "kind": dict(sorted(summary.kind.items())),
        "answer_kind": dict(sorted(summary.answer_kind.items())),
        "tool": dict(sorted(summary.tool.items())),
        **spread_dict(summary),
    }


def spread_dict(summary: Summary) -> dict[str, object]:
    """What a policy could memorise and what makes it read: distinct gold call lists and
    identifiers, the most shared identifier, twins (tasks by kind) and distractors per family."""
    top, n = summary.most_shared()
    written = max(summary.written, 1)
    return {
        "distinct_gold_call_lists": len(summary.golds),
        "distinct_identifiers": len(summary.identifiers),
        "most_shared_identifier": {"identifier": top, "tasks": n, "share": round(n / written, 4)},
        "twins": summary.twins(),
        "distractors": {
            family: {"tasks": total, "with_distractor": summary.distracted[family]}
            for family, total in sorted(summary.family.items())
        },
    }


def print_summary(console: Console, env: str, out: Path, s: Summary, seconds: float) -> None:
    rate = s.written / seconds if seconds else 0.0
    console.print(
        f"wrote {s.written} {env} tasks to {out} in {seconds:.1f} s ({rate:.1f}/s); "
        f"{s.attempts} attempts, {sum(s.dropped.values())} dropped, {s.filtered} filtered out"
    )
    top, n = s.most_shared()
    share = n / s.written if s.written else 0.0
    console.print(
        f"  [bold]spread[/]: {len(s.golds)} distinct gold call lists, {len(s.identifiers)} "
        f"distinct identifiers; most shared {top!r} in {n} tasks ({share:.1%})",
        soft_wrap=False,
        highlight=False,
    )
    twins = ", ".join(
        f"{family} {kinds.get('write', 0) + kinds.get('read', 0)}/{kinds.get('refusal', 0)}"
        for family, kinds in s.twins().items()
    )
    if twins:
        console.print(f"  [bold]twins[/] (allowed/forbidden): {twins}", soft_wrap=False)
    distracted = sum(s.distracted.values())
    per_family = ", ".join(f"{f} {s.distracted[f]}/{t}" for f, t in sorted(s.family.items()))
    console.print(
        f"  [bold]distractors[/]: {distracted} of {s.written} tasks; by family: {per_family}",
        soft_wrap=False,
    )
    for title, counter in (
        ("difficulty", Counter({str(k): v for k, v in s.difficulty.items()})),
        ("kind", s.kind),
        ("answer kind", s.answer_kind),
        ("dropped", s.dropped),
        ("family", s.family),
        ("tool calls", s.tool),
    ):
        if counter:
            parts = ", ".join(f"{k} {v}" for k, v in sorted(counter.items()))
            console.print(f"  [bold]{title}[/]: {parts}", soft_wrap=False)
