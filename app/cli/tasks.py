"""`stategym tasks check FILE`: are a task file's rewards trustworthy before any training run?

Every row must also offer the environment's current policy and tool schemas (app/cli/task_fill).

For every task, in memory (no server): replay the gold solution twice (the same state both times,
every call succeeding), verify the gold end state with the gold answer (reward must be 1), verify
a no-op with an empty answer (reward must be 0), and try the submissions a policy could hope to
win with: hedged answers, declining an action task with each code, declining a refusal with the
wrong code (app/cli/task_probes.py; each must earn 0).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from app.cli.task_fill import fill_row, stale_problems
from app.cli.task_probes import probe_problems
from app.core.tasks import TaskSpec, task_from_data
from app.errors import StateGymError
from app.registry import load_environment
from app.sdk.environment import Environment
from app.storage import images
from app.storage.images import Store
from app.storage.seeding import SeedError
from app.verify.gold import GoldCache, replay
from app.verify.session_verify import verify_state

# Progress bars only pay off on long files.
PROGRESS_FROM = 20


@dataclass
class TaskReport:
    task_id: str
    problems: list[str] = field(default_factory=list)
    gold_reward: float | None = None
    noop_reward: float | None = None
    probes_tried: int = 0


def _gold_answer(task: TaskSpec) -> dict[str, Any]:
    text = "Done. " + " ".join(task.expected_outputs)
    return {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        ]
    }


@contextmanager
def _clone(image: bytes) -> Iterator[Any]:
    conn = images.memory_from_image(image)
    engine = images.bind_engine(conn)
    try:
        yield engine
    finally:
        engine.dispose()
        conn.close()


def check_task(
    env: Environment, store: Store, gold: GoldCache, task: TaskSpec, all_codes: bool = False
) -> TaskReport:
    report = TaskReport(task.task_id or "?")
    snapshot = store.snapshot(task)
    if not task.checks_only:
        reference = gold.get(task)  # the first replay, as verify caches it
        for f in reference.failed_calls:
            error = _error_text(f["error"])
            report.problems.append(f"gold call {f['index']} ({f['name']}) failed: {error}")
        conn, engine, _ = replay(env, snapshot, task, session_id="check")  # the second replay
        try:
            result = verify_state(
                env=env,
                gold=gold,
                engine=engine,
                task=task,
                response=_gold_answer(task),
                diff_limit=3,
            )
        finally:
            engine.dispose()
            conn.close()
        report.gold_reward = result["reward"]
        # The same calls on the same snapshot reached another state: the gold is not deterministic.
        differing = sorted(result["verification"]["state_diff"])
        if differing:
            report.problems.append(
                f"gold is not deterministic: two replays differ in tables {differing}"
            )
        if result["reward"] != 1.0:
            reason = result.get("failure_reason") or ""
            report.problems.append(f"gold reaches reward {result['reward']:g} ({reason})")
    with _clone(snapshot.image) as engine:
        noop = verify_state(
            env=env, gold=gold, engine=engine, task=task, response={"output": []}, diff_limit=0
        )
    report.noop_reward = noop["reward"]
    if noop["reward"] != 0.0:
        report.problems.append(
            f"a no-op (no calls, nothing submitted, empty answer) earns reward {noop['reward']:g}"
        )
    if not task.checks_only:
        report.probes_tried, found = probe_problems(
            env, store, gold, task, _gold_answer(task), all_codes
        )
        report.problems.extend(found)
    return report


def _error_text(error: Any) -> str:
    return error.get("message", str(error)) if isinstance(error, dict) else str(error)


def check_rows(
    env: Environment,
    rows: list[dict[str, Any]],
    data_dir: Path,
    advance: Callable[[], None] = lambda: None,
    all_codes: bool = False,
) -> list[TaskReport]:
    store = Store(data_dir, env)
    gold = GoldCache(store, capacity=max(len(rows), 1))
    tools = env.tool_schemas()  # what GET /tools serves: every row must offer exactly these
    reports = []
    for i, row in enumerate(rows):
        label = (
            str(row.get("task_id", f"line {i + 1}")) if isinstance(row, dict) else f"line {i + 1}"
        )
        try:
            report = check_task(env, store, gold, task_from_data(row), all_codes)
        except (StateGymError, SeedError) as exc:  # a task that does not fit the environment
            message = exc.message if isinstance(exc, StateGymError) else str(exc)
            report = TaskReport(label, [f"invalid task: {message}"])
        report.problems[:0] = stale_problems(env, row, tools) if isinstance(row, dict) else []
        reports.append(report)
        advance()
    return reports


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"{path}:{n} is not valid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise typer.BadParameter(f"{path}:{n} is not a JSON object")
        rows.append(row)
    return rows


def _env_name(path: Path, rows: list[dict[str, Any]], explicit: str | None) -> str:
    if explicit:
        return explicit
    names = {r["env"] for r in rows if isinstance(r.get("env"), str)}
    if len(names) == 1:
        return names.pop()
    if not names and path.parent.name:
        return path.parent.name  # <env>/tasks.jsonl, as in envs/<env>/
    raise typer.BadParameter(
        f"cannot tell the environment of {path} (rows name {sorted(names)}); pass --env"
    )


def _summary(console: Console, path: Path, env: str, reports: list[TaskReport]) -> None:
    bad = [r for r in reports if r.problems]
    table = Table(title=f"{path} · {env}: {len(reports)} tasks, {len(bad)} with problems")
    for col in ("task", "gold", "no-op", "problems"):
        table.add_column(col)
    tried = sum(r.probes_tried for r in reports)
    if not bad:
        console.print(
            f"{path} · {env}: all {len(reports)} tasks OK (gold 1, no-op 0, "
            f"{tried} hedged or declining submissions 0)"
        )
        return
    for r in bad:
        table.add_row(r.task_id, _fmt(r.gold_reward), _fmt(r.noop_reward), "\n".join(r.problems))
    console.print(table)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def check(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A tasks.jsonl file.")],
    env: Annotated[
        str | None, typer.Option("--env", help="Environment (default: rows' env).")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Templates/snapshots here (default: temp).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
    all_codes: Annotated[
        bool,
        typer.Option("--all-codes", help="Decline every task with every reason code (slow)."),
    ] = False,
) -> None:
    """Replay every task's gold, a no-op and hedged/declining submissions; exit 1 if any task's
    reward cannot be trusted (gold below 1, or anything else above 0) or a row offers another
    policy or other tool schemas than the environment's (`stategym tasks fill` rewrites them)."""
    rows = read_rows(file)
    name = _env_name(file, rows, env)
    try:
        environment = load_environment(name)
    except KeyError as exc:
        raise typer.BadParameter(str(exc)) from None
    console = Console(stderr=as_json)
    with tempfile.TemporaryDirectory(prefix="stategym-check-") as tmp:
        with Progress(
            console=Console(stderr=True), transient=True, disable=len(rows) < PROGRESS_FROM
        ) as progress:
            bar = progress.add_task(f"checking {file.name}", total=len(rows))
            reports = check_rows(
                environment,
                rows,
                data_dir or Path(tmp),
                lambda: progress.advance(bar),
                all_codes=all_codes,
            )
    bad = [r for r in reports if r.problems]
    if as_json:
        payload = {
            "file": str(file),
            "env": name,
            "tasks": len(reports),
            "ok": not bad,
            "probes_tried": sum(r.probes_tried for r in reports),
            "problems": [asdict(r) for r in bad],
        }
        typer.echo(json.dumps(payload, indent=1))
    else:
        _summary(console, file, name, reports)
    raise typer.Exit(1 if bad else 0)


def schema() -> None:
    """Print the JSON Schema of a task row (docs/tasks.md), generated from the model that
    validates every row (app/core/tasks.py); keys it does not name pass through."""
    from app.core.tasks import TaskRow

    typer.echo(json.dumps(TaskRow.model_json_schema(), indent=2))


def fill(
    source: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Rows to fill.")],
    out: Annotated[Path, typer.Argument(dir_okay=False, help="The JSONL file to write.")],
    env: Annotated[str, typer.Option("--env", help="Environment name.")],
) -> None:
    """Write full task rows from hand-written ones (task_id, prompt, seed, ground_truth and the
    expected_* fields): the environment's current policy and tool schemas filled in. Rows that
    already have them are refreshed (a stale row's fix). Check the result with `tasks check`."""
    rows = read_rows(source)
    try:
        environment = load_environment(env)
    except KeyError as exc:
        raise typer.BadParameter(str(exc)) from None
    tools = environment.tool_schemas()
    filled = []
    for n, row in enumerate(rows, 1):
        try:
            filled.append(fill_row(environment, row, tools))
        except ValueError as exc:
            label = row.get("task_id", f"line {n}")
            typer.echo(f"error: {source}: task {label}: {exc}", err=True)
            raise typer.Exit(1) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in filled)
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {len(filled)} {env} tasks to {out}; check them: stategym tasks check {out}")
