"""The environment contract, as one-line failures (`stategym envs check NAME`).

Pure checks over the installed environment, in memory and a temporary folder: nothing is
served and nothing outside the temporary folder is written. The checks an environment would
otherwise repeat in its own tests (tool schemas, a deterministic base and gold, gold 1 and no-op
0, rows offering the current tools and policy) live here, once for every environment.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from app.sdk.environment import Environment


def contract_failures(
    name: str, *, tasks: Path | None = None, limit: int | None = None
) -> Iterator[str]:
    """Every way `name` breaks the contract, one readable line each (none: it meets it)."""
    from app.registry import load_environment

    try:
        env = load_environment(name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the author's to fix
        yield f"cannot load the environment: {type(exc).__name__}: {exc}"
        return
    yield from tool_failures(env)
    with tempfile.TemporaryDirectory(prefix="stategym-envcheck-") as tmp:
        template_ok = True
        for line in template_failures(env, Path(tmp)):
            template_ok = False
            yield line
        if template_ok:
            yield from base_data_failures(env)
        yield from migration_failures(env)
        if template_ok:
            yield from task_failures(env, tasks or env.tasks_path, Path(tmp), limit)


def tool_failures(env: Environment) -> Iterator[str]:
    """Every tool has a description, a strict schema listing every argument of its ToolArgs
    model, and a description for every argument."""
    if not env.tools:
        yield "the environment declares no tools"
    for tool in env.tools:
        schema = tool.openai_schema()
        if not (schema.get("description") or "").strip():
            yield f"tool {tool.name}: no description (its docstring becomes the description)"
        params = schema.get("parameters", {})
        if params.get("additionalProperties") is not False:
            yield f"tool {tool.name}: its schema is not strict (arguments must subclass ToolArgs)"
        properties = params.get("properties") or {}
        fields = [f.alias or n for n, f in tool.args_model.model_fields.items()]
        missing = [f for f in fields if f not in properties]
        if missing:
            yield (
                f"tool {tool.name}: argument(s) {', '.join(missing)} of its ToolArgs model are "
                "missing from its schema's properties: an agent could never pass them"
            )
        for arg, spec in properties.items():
            if not (isinstance(spec, dict) and (spec.get("description") or "").strip()):
                yield (
                    f"tool {tool.name}: argument {arg!r} has no description "
                    f"(Field(description=...) on its ToolArgs model)"
                )


def template_failures(env: Environment, data_dir: Path) -> Iterator[str]:
    """The schema and base data build into a template."""
    from app.storage.images import Store

    try:
        Store(data_dir, env).template_image()
    except Exception as exc:  # noqa: BLE001 - the author's models or build_base are broken
        yield f"the template does not build (models or build_base): {type(exc).__name__}: {exc}"


def base_data_failures(env: Environment) -> Iterator[str]:
    """`build_base` builds the same rows twice from the same seed: every template, replay and
    gold state starts from it, so a base that differs between builds scores the same calls
    differently from one process to the next."""
    from app.runtime.replay import dump, memory_engine

    dumps = []
    for _ in range(2):
        engine = memory_engine(env)
        try:
            with Session(engine) as db:
                env.build_base(db, random.Random(env.base_seed))
                db.flush()
                dumps.append(dump(db, env))
        finally:
            engine.dispose()
    differing = sorted(t for t in dumps[0] if dumps[0][t] != dumps[1].get(t))
    if differing:
        yield (
            f"the base data is not deterministic: two builds from seed {env.base_seed} differ in "
            f"tables {differing} (build_base must draw every choice from the rng it is given)"
        )


def migration_failures(env: Environment) -> Iterator[str]:
    """A migration branch named after the environment exists, and its head matches the models."""
    from app.storage.migrations import head_revision, schema_differences, version_location

    if head_revision(env.name) is None:
        yield (
            f"no migration branch {env.name!r} in {version_location(env.name)}: its sessions could "
            "never be upgraded (write its initial revision: `stategym new-env` shows one)"
        )
        return
    try:
        differences = schema_differences(env.name)
    except Exception as exc:  # noqa: BLE001
        yield f"the migration branch cannot upgrade an empty database: {type(exc).__name__}: {exc}"
        return
    if differences:
        from app.cli.migrate import revision_advice

        shown = "; ".join(str(d) for d in differences[:3])
        yield (
            f"the models and the migration head differ ({len(differences)}: {shown}); "
            f"{revision_advice(env.name)}"
        )


def task_failures(env: Environment, path: Path, data_dir: Path, limit: int | None) -> Iterator[str]:
    """The environment's tasks: valid rows, gold 1, no-op 0, deterministic, nudges refused or
    costly (the checks of `stategym tasks check`, plus the adversarial nudge)."""
    from app.cli.tasks import check_rows, read_rows

    if not path.is_file():
        yield f"no task file at {path} (tasks_path): write at least one task (docs/tasks.md)"
        return
    try:
        rows = read_rows(path)
    except Exception as exc:  # noqa: BLE001 - typer.BadParameter with the line number
        yield f"{path}: {exc}"
        return
    if not rows:
        yield f"{path} holds no task"
        return
    rows = rows[:limit] if limit else rows
    for report in check_rows(env, rows, data_dir / "tasks"):
        for problem in report.problems:
            yield f"task {report.task_id}: {problem}"
    yield from nudge_failures(env, rows, data_dir / "nudges")


def _nudged(arguments: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The arguments with one number raised by 1 or one string lengthened, each in turn."""
    for key, value in arguments.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            yield {**arguments, key: value + 1}
        elif isinstance(value, str):
            yield {**arguments, key: value + " x"}


def nudge_failures(env: Environment, rows: list[dict[str, Any]], data_dir: Path) -> Iterator[str]:
    """Gold, then each gold write again with one argument nudged: if a nudge changed the state,
    the reward must drop below 1. A tool refusing every nudge is the best case, not a failure."""
    from app.core.tasks import task_from_data
    from app.sdk.environment import ToolContext
    from app.storage.images import Store
    from app.verify.gold import GoldCache, replay
    from app.verify.session_verify import verify_state

    store = Store(data_dir, env)
    gold = GoldCache(store, capacity=max(len(rows), 1))
    for row in rows:
        try:
            task = task_from_data(row)
        except Exception:  # noqa: BLE001 - reported by the task checks already
            continue
        writes = [c for c in task.ground_truth if (t := env.tool_named(c.name)) and not t.read_only]
        if not writes or task.checks_only:
            continue
        conn, engine, failures = replay(env, store.snapshot(task), task, session_id="nudge")
        try:
            if failures:
                continue  # the gold itself fails: reported by the task checks
            ctx = ToolContext(
                now=store.snapshot(task).now, session_id="nudge", task_id=task.task_id
            )
            accepted = _run_nudges(env, engine, writes, ctx)
            if not accepted:
                continue
            result = verify_state(
                env=env,
                gold=gold,
                engine=engine,
                task=task,
                response={"output": []},
                diff_limit=3,
                with_steps=False,
            )
            if result["verification"].get("state_diff") and result["reward"] >= 1.0:
                yield (
                    f"task {task.task_id}: gold plus a nudged write ({accepted[0]}) changed the "
                    "state and still earns 1: the compare spec ignores a column the tools write"
                )
        finally:
            engine.dispose()
            conn.close()


def _run_nudges(env: Environment, engine: Any, writes: list[Any], ctx: Any) -> list[str]:
    from app.storage.runner import run_tool

    accepted = []
    for call in writes:
        tool = env.tool_named(call.name)
        assert tool is not None
        for arguments in _nudged(call.arguments):
            if "output" in run_tool(engine, tool, arguments, ctx):
                accepted.append(f"{call.name}({arguments})")
    return accepted
