"""`stategym export nemo-gym`: task rows in the JSONL shape NeMo Gym's rollout collector reads.

Each row keeps its ground-truth keys (they reach seed and verify unchanged), offers exactly the
tools `GET /tools` serves, and carries `agent_ref` naming the `simple_agent` instance of the
generated NeMo Gym config (`integrations/nemo_gym/configs/<env>.yaml`), so `ng_collect_rollouts`
routes it without `+agent_name`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.nemo_gym_config import (
    AGENT_REF_TYPE,
    RESOURCES_IMPL,
    TYPED_SERVER,
    Dataset,
    agent_instance_name,
    config_for,
    resources_instance_name,
)
from app.registry import load_environment
from app.sdk.environment import Environment

# Re-exported: callers import these names from here.
__all__ = ["RESOURCES_IMPL", "agent_instance_name", "resources_instance_name"]

export_cli = typer.Typer(help="Export tasks for other tools.", no_args_is_help=True)


def read_task_rows(path: Path) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: a task row must be a JSON object")
        yield row


def nemo_gym_rows(
    env: Environment, rows: Iterable[Mapping[str, Any]], agent_name: str
) -> Iterator[dict[str, Any]]:
    """Rows with the served tool schemas and `agent_ref` stamped; everything else kept as is."""
    tools = env.tool_schemas()
    for index, row in enumerate(rows):
        if row.get("env", env.name) != env.name:  # another environment's tools would be wrong
            raise ValueError(
                f"task {row.get('task_id', index)} is for {row['env']}, not {env.name}"
            )
        params = row.get("responses_create_params")
        if not isinstance(params, Mapping) or "input" not in params:
            raise ValueError(f"task {row.get('task_id', index)}: no responses_create_params.input")
        out = {k: v for k, v in row.items() if not str(k).startswith("_ng_")}
        # The model must be offered exactly the server's tool routes (NeMo Gym contract).
        out["responses_create_params"] = {**params, "tools": tools}
        out["agent_ref"] = {"type": AGENT_REF_TYPE, "name": agent_name}
        yield out


def export_nemo_gym(
    env: Environment,
    out: Path,
    *,
    agent_name: str | None = None,
    limit: int | None = None,
    source: Path | None = None,
) -> int:
    """Write `source`'s tasks (default: the shipped set) to `out`; returns the rows written."""
    rows = list(read_task_rows(source or env.tasks_path))
    if limit is not None:
        rows = rows[:limit]
    converted = nemo_gym_rows(env, rows, agent_name or agent_instance_name(env.name))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for row in converted:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(out)  # readers never see a half-written file
    return count


def check_gold(env: Environment, data_dir: Path, rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Replay every row's ground truth; the problems found (a gold call that fails)."""
    from app.core.tasks import task_from_data
    from app.storage.images import Store
    from app.verify.gold import GoldCache

    gold = GoldCache(Store(data_dir, env), capacity=1)
    problems = []
    for row in rows:
        task = task_from_data(row)
        failed = gold.get(task).failed_calls
        if failed:
            problems.append(f"{task.task_id}: gold calls fail: {list(failed)}")
    return problems


@export_cli.command("nemo-gym")
def nemo_gym(
    out: Annotated[Path, typer.Argument(help="Output JSONL file.", dir_okay=False)],
    env: Annotated[str, typer.Option("--env", help="Environment name.")] = "retail",
    agent_name: Annotated[
        str | None,
        typer.Option(help="agent_ref.name to stamp (default: stategym_<env>_simple_agent)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Export only the first N tasks.")] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="With --check: data folder for the templates the gold replay needs "
            "(default: $STATEGYM_DATA_DIR or ./var).",
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option(help="Replay every task's ground truth first; refuse broken tasks.")
    ] = False,
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            exists=True,
            dir_okay=False,
            help="Export this task file (e.g. a generated train split) instead of the shipped set.",
        ),
    ] = None,
    validation: Annotated[
        Path | None,
        typer.Option(
            "--validation-tasks",
            exists=True,
            dir_okay=False,
            help="Also export this file (e.g. the test split) as OUT's stem + _validation.jsonl.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            dir_okay=False,
            help="Write a NeMo Gym config whose agent "
            "lists OUT as its train dataset (and the validation set, if any).",
        ),
    ] = None,
) -> None:
    """Write an environment's tasks as NeMo Gym rows (agent_ref stamped, served tools)."""
    try:
        environment = load_environment(env)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0]), param_hint="--env") from None
    source = tasks or environment.tasks_path
    if not source.is_file():
        typer.echo(f"{env}: no task file at {environment.tasks_path} (generate it first)", err=True)
        raise typer.Exit(1)
    if check:
        from app.settings import Settings

        folder = data_dir or Settings().data_dir
        rows = list(read_task_rows(source))[:limit]
        problems = check_gold(environment, folder, rows)
        if problems:
            typer.echo("\n".join(problems), err=True)
            raise typer.Exit(1)
    try:
        count = export_nemo_gym(environment, out, agent_name=agent_name, limit=limit, source=source)
        typer.echo(f"{env}: {count} tasks -> {out}")
        sets = [Dataset(f"{env}_train", "train", str(out.resolve()), None)]
        if validation is not None:
            val_out = out.with_name(f"{out.stem}_validation.jsonl")
            n = export_nemo_gym(environment, val_out, agent_name=agent_name, source=validation)
            typer.echo(f"{env}: {n} validation tasks -> {val_out}")
            sets.append(Dataset(f"{env}_validation", "validation", str(val_out.resolve()), None))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if config is not None:
        write_config(environment, config, sets)
        typer.echo(f"{env}: NeMo Gym config -> {config}")


def write_config(env: Environment, path: Path, sets: list[Dataset]) -> None:
    """The shipped config's blocks with these datasets (absolute paths: run it from anywhere)."""
    import yaml  # only this option needs it

    header = f"# Written by stategym export nemo-gym --config for {env.name}; datasets:\n"
    body = yaml.safe_dump(config_for(env, TYPED_SERVER, sets), sort_keys=False, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join(f"#   {d.type}: {d.jsonl_fpath}\n" for d in sets) + body)
