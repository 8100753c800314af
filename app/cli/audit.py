"""`stategym tasks audit TRAIN.jsonl TEST.jsonl`: can a policy score without reading the database?

Plays the shortcut policies of app/taskgen/audit.py on every test task and scores each play the
way a cookieless `/verify` does: its calls replayed on a fresh clone of the task's snapshot and
verified against the task's gold state (app/runtime/reverify.replay_result). Prints each
policy's mean reward and the identifiers most shared by the test set's gold calls; `--strict`
exits 1 when a target is missed (`TARGETS`). Deterministic for a `--seed`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress

from app.cli.common import environment_or_exit
from app.core.tasks import task_from_data
from app.errors import StateGymError
from app.runtime.reverify import replay_result
from app.sdk.environment import Environment
from app.storage.images import Store
from app.taskgen.audit import DESCRIPTIONS, TARGETS, AuditReport, Calls, audit
from app.verify.gold import GoldCache


class ReplayScore:
    """A play's reward: its calls replayed on the task's snapshot, verified as /verify does."""

    def __init__(self, env: Environment, data_dir: Path, capacity: int) -> None:
        self.env = env
        self.store = Store(data_dir, env)
        self.gold = GoldCache(self.store, capacity=max(capacity, 1))

    def __call__(self, row: dict[str, Any], calls: Calls) -> float:
        task = task_from_data(row)
        output = [
            {
                "type": "function_call",
                "call_id": f"audit-{i}",
                "name": c["name"],
                "arguments": json.dumps(c.get("arguments") or {}),
            }
            for i, c in enumerate(calls)
        ]
        result = replay_result(
            env=self.env,
            snapshot=self.store.snapshot(task),
            gold=self.gold,
            task=task,
            response={"output": output},
            diff_limit=0,
        )
        return result.reward


def read_task_file(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL task file; a line that is not a JSON object is a ValueError naming
    the file and line."""
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n} is not valid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n} is not a JSON object")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no task")
    return rows


def _env_of(rows: list[dict[str, Any]], explicit: str | None) -> str:
    if explicit:
        return explicit
    names = {r.get("env") for r in rows}
    if len(names) == 1 and isinstance(next(iter(names)), str):
        return str(names.pop())
    raise ValueError(f"the rows name environments {sorted(map(str, names))}; pass --env")


def audit_command(
    train_file: Annotated[Path, typer.Argument(dir_okay=False, help="The training set (JSONL).")],
    test_file: Annotated[Path, typer.Argument(dir_okay=False, help="The test set (JSONL).")],
    env: Annotated[
        str | None, typer.Option("--env", help="Environment (default: the rows' env).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Which same-family task is replayed.")] = 0,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when a target is missed.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Templates/snapshots here (default: temp).")
    ] = None,
) -> None:
    """Play shortcut policies that never read a tool output of the test task (replay a training
    task's gold by family or by the most similar request, with the request's identifiers
    substituted, decline by the most similar request's code), scored by the real verifier."""
    try:
        train, test = read_task_file(train_file), read_task_file(test_file)
        name = _env_of(train + test, env)
    except ValueError as exc:  # one line saying what to fix, not a usage panel
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    environment = environment_or_exit(name)
    err = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="stategym-audit-") as tmp:
        score = ReplayScore(environment, data_dir or Path(tmp), len(test))
        with Progress(console=err, transient=True, disable=len(test) < 20) as progress:
            bar = progress.add_task(f"auditing {test_file.name}", total=len(test))
            try:
                report = audit(train, test, score, seed=seed, advance=lambda: progress.advance(bar))
            except StateGymError as exc:  # a row that does not fit the environment
                typer.echo(f"error: {exc.message}", err=True)
                raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps({"env": name, **report.as_dict()}, indent=1))
    else:
        print_report(Console(soft_wrap=True), name, report)
    if strict and report.missed():
        raise typer.Exit(1)


def print_report(console: Console, env: str, report: AuditReport) -> None:
    console.print(
        f"audit of {env}: {report.test} test tasks ({report.refusals} refusals) against "
        f"{report.train} training tasks; no policy reads a tool output of the test task"
    )
    for name, p in report.policies.items():
        mark = "ok" if p.mean <= TARGETS[name] + 1e-12 else "[red]MISSED[/]"
        console.print(
            f"  {name:<16} mean reward {p.mean:.3f} over {p.played} tasks "
            f"({p.wins} rewarded 1; target <= {TARGETS[name]}) {mark}  {DESCRIPTIONS[name]}",
            highlight=False,
        )
    share = report.figure("identifier_share")
    top = report.top_identifiers[0] if report.top_identifiers else ("-", 0)
    mark = "ok" if share <= TARGETS["identifier_share"] + 1e-12 else "[red]MISSED[/]"
    console.print(
        f"  most shared identifier {top[0]!r}: in the gold of {top[1]} of {report.test} test "
        f"tasks ({share:.1%}; target <= {TARGETS['identifier_share']:.0%}) {mark}",
        highlight=False,
    )
    console.print(
        f"  test tasks whose gold shares an identifier with a training gold: "
        f"{report.shared_with_train} of {report.test}",
        highlight=False,
    )
