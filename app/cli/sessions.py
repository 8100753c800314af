"""`stategym sessions ...`: look into session databases after a run, and apply retention.

Every command takes `--data-dir` and `--json`; bad input ends with a one-line message and exit
code 1, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Column, Table

from app.cli.common import settings_or_exit
from app.errors import StateGymError
from app.runtime.inspection import (
    Inspector,
    parse_duration,
    parse_where,
    record_summary,
    session_query,
    utcnow,
)
from app.settings import Settings
from app.storage.base import ControlStore
from app.storage.control import SessionQuery, SessionRecord
from app.storage.factory import open_inspection, pack_retained_sessions

sessions_app = typer.Typer(
    help="Inspect session databases after a run (list, show, diff, export, verify, gc).",
    no_args_is_help=True,
)

# The same option as the other commands (app/cli/serve.py has its own).
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data folder (default: $STATEGYM_DATA_DIR or ./var)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")]
SessionArg = Annotated[str, typer.Argument(help="Session id (32 hex characters).")]

out = Console(soft_wrap=True)
if not out.is_terminal:
    out = Console(soft_wrap=True, width=160)  # piped: wide enough for ids and timestamps
err = Console(stderr=True, soft_wrap=True)  # messages stay one greppable line


def settings_for(data_dir: Path | None) -> Settings:
    return settings_or_exit(**({"data_dir": data_dir} if data_dir is not None else {}))


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn the expected failures into a clear message and exit code 1."""
    try:
        yield
    except StateGymError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        raise typer.Exit(1) from None
    except (ValidationError, ValueError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None


@contextmanager
def inspector(data_dir: Path | None) -> Iterator[Inspector]:
    """Sessions of the backend STATEGYM_DATABASE_URL names (SQLite files or PostgreSQL schemas)."""
    settings = settings_for(data_dir)
    with open_inspection(settings) as (control, view):
        yield Inspector(settings.data_dir, control, view)


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


@sessions_app.command("list")
def list_sessions(
    env: Annotated[str | None, typer.Option(help="Only this environment.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    status: Annotated[
        Literal["open", "closed", "verified"] | None, typer.Option(help="open, closed or verified.")
    ] = None,
    reward: Annotated[
        str | None, typer.Option(help="Reward filter: 1, '<1', '>=0.5' (unverified never match).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Created within a duration (2h, 7d) or since an ISO date.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (newest first).")] = 100,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, newest first."""
    with cli_errors(), inspector(data_dir) as insp:
        query = session_query(
            env=env, task_id=task, status=status, reward=reward, since=since, limit=limit
        )
        rows = [record_summary(r, insp.file_present(r)) for r in insp.query(query)]
    if as_json:
        emit_json(rows)
        return
    table = Table("env", "task", "status", "reward", "created (UTC)", "file")
    table.columns.insert(0, Column("session", no_wrap=True, min_width=32))  # ids stay whole
    for r in rows:
        reward_text = "-" if r["reward"] is None else f"{r['reward']:g}"
        file_text = "yes" if r["file_present"] else "[dim]gone[/dim]"
        table.add_row(
            r["id"],
            r["env"],
            r["task_id"] or "-",
            r["status"],
            reward_text,
            r["created_at"][:19],
            file_text,
        )
    out.print(table)
    out.print(f"{len(rows)} session(s)")


@sessions_app.command("show")
def show(
    session: SessionArg,
    table: Annotated[str | None, typer.Argument(help="Table to print (omit: list tables).")] = None,
    where: Annotated[
        list[str] | None, typer.Option("--where", help="column=value filter (repeatable).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Rows to print.")] = 50,
    offset: Annotated[int, typer.Option(min=0, help="Rows to skip.")] = 0,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Without TABLE: the session record and its tables with row counts. With TABLE: its rows."""
    with cli_errors(), inspector(data_dir) as insp:
        record = insp.record(session)
        if table is None:
            result: dict[str, Any] = {"session": record_summary(record), **insp.tables(record)}
        else:
            result = insp.rows(record, table, parse_where(where or []), limit, offset)
    if as_json:
        emit_json(result)
    elif table is None:
        _print_record(result)
    else:
        _print_rows(result)


def _print_record(result: dict[str, Any]) -> None:
    for key, value in result["session"].items():
        out.print(f"[bold]{key}[/bold]: {value}", highlight=False)
    counts = Table("table", "rows")
    for name, n in result["tables"].items():
        counts.add_row(name, str(n))
    out.print(counts)


def _print_rows(result: dict[str, Any]) -> None:
    columns = result["columns"]
    cells = [["NULL" if v is None else str(v) for v in row] for row in result["rows"]]
    if len(columns) > 8:  # too wide for a grid: one block per row, like sqlite's `.mode line`
        width = max(len(c) for c in columns)
        for n, row in enumerate(cells):
            out.print(f"[bold]-- {result['table']} row {result['offset'] + n + 1}[/bold]")
            for column, value in zip(columns, row, strict=True):
                out.print(f"{column:>{width}} = {value}", highlight=False)
    else:
        grid = Table(*columns, title=result["table"])
        for row in cells:
            grid.add_row(*row)
        out.print(grid)
    shown = len(result["rows"])
    out.print(f"{shown} of {result['total']} row(s) (offset {result['offset']})")


@sessions_app.command("diff")
def diff(
    session: SessionArg,
    against: Annotated[
        Literal["seed", "gold"], typer.Option(help="Compare with the seed or the gold state.")
    ] = "seed",
    limit: Annotated[int, typer.Option(min=0, help="Rows listed per table and kind.")] = 20,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per table, rows added / removed / changed (seed or gold state -> this session)."""
    with cli_errors(), inspector(data_dir) as insp:
        result = insp.diff(insp.record(session), against, limit)
    if as_json:
        emit_json(result)
        return
    out.print(f"session {session} vs {against}: {result['summary']}", highlight=False)
    legend = f"+ only in the session, - only in {against}, ~ changes as [{against}, session]"
    out.print(legend, markup=False, highlight=False)
    for name, d in result["tables"].items():
        out.print(
            f"[bold]{name}[/bold]: +{d['added']} -{d['removed']} ~{d['changed']}", highlight=False
        )
        for kind, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
            for row in d.get(f"{kind}_rows", []):
                out.print(f"  {mark} {json.dumps(row, default=str)}", highlight=False)


@sessions_app.command("export")
def export(
    session: SessionArg,
    target: Annotated[Path, typer.Argument(help="New .sqlite file to write.")],
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a consistent copy of the session database (SQLite backup API)."""
    with cli_errors(), inspector(data_dir) as insp:
        size = insp.export(insp.record(session), target)
    if as_json:
        emit_json({"session_id": session, "file": str(target), "bytes": size})
    else:
        out.print(f"wrote {target} ({size / 1024:.0f} KiB); open it with `sqlite3 {target}`")


@sessions_app.command("verify")
def verify(
    session: SessionArg,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify the session again, offline, against the task stored when it was seeded."""
    with cli_errors(), inspector(data_dir) as insp:
        result = insp.reverify(insp.record(session))
    if as_json:
        emit_json(result)
        return
    stored = result["stored_reward"]
    out.print(
        f"session {session}: reward {result['reward']:g} "
        f"(stored: {'-' if stored is None else f'{stored:g}'})",
        highlight=False,
    )
    if result.get("failure_reason"):
        out.print(f"failure: {result['failure_reason']}", highlight=False)
    out.print(f"[dim]{result['note']}[/dim]")


# --- retention -------------------------------------------------------------------------------
@dataclass
class GcPlan:
    remove: list[SessionRecord]
    kept_failed: int
    kept_open: int
    cutoff: timedelta | None


def plan_gc(
    control: ControlStore, settings: Settings, older_than: timedelta | None, keep_failed: bool
) -> GcPlan:
    """Which sessions retention removes; the flags override the `retention` setting."""
    policy = settings.retention
    if older_than is None:
        older_than = {
            "keep": None,
            "keep_days": timedelta(days=settings.retention_days),
            "delete_on_close": timedelta(0),
            "keep_failed": timedelta(0),
        }[policy]
    keep_failed = keep_failed or policy == "keep_failed"
    plan = GcPlan([], 0, 0, older_than)
    if older_than is None:
        return plan
    now = utcnow()
    # An open session is left alone until its cookie has expired: a rollout may still use it.
    stale_open = now - timedelta(seconds=settings.cookie_max_age_seconds)
    offset, page = 0, 1000
    while True:
        batch = control.query(SessionQuery(before=now - older_than, limit=page, offset=offset))
        for record in batch:
            if record.status == "open" and record.created_at >= stale_open:
                plan.kept_open += 1
            elif keep_failed and not (record.reward is not None and record.reward >= 1.0):
                plan.kept_failed += 1
            else:
                plan.remove.append(record)
        if len(batch) < page:
            return plan
        offset += page


def remove_session(insp: Inspector, record: SessionRecord, *, dry_run: bool = False) -> int:
    """Delete a session's database (not with `dry_run`); returns the bytes freed (or to free)."""
    return insp.remove(record, dry_run=dry_run)


@sessions_app.command("gc")
def gc(
    older_than: Annotated[
        str | None,
        typer.Option(
            help="Remove sessions created longer ago than this (7d, 12h). "
            "Default: from the retention setting."
        ),
    ] = None,
    keep_failed: Annotated[
        bool, typer.Option("--keep-failed", help="Keep sessions without a perfect reward.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove old sessions (files and records) per the flags or the retention setting."""
    with cli_errors(), inspector(data_dir) as insp:
        settings = settings_for(data_dir)
        cutoff = parse_duration(older_than) if older_than else None
        plan = plan_gc(insp.control, settings, cutoff, keep_failed)
        freed = 0
        for record in plan.remove:
            freed += remove_session(insp, record, dry_run=dry_run)
        if not dry_run:
            insp.control.delete([r.id for r in plan.remove])
    summary = {
        "dry_run": dry_run,
        "retention": settings.retention,
        "older_than": None if plan.cutoff is None else str(plan.cutoff),
        "removed": len(plan.remove) if not dry_run else 0,
        "would_remove": len(plan.remove) if dry_run else 0,
        "sessions": [r.id for r in plan.remove],
        "kept_failed": plan.kept_failed,
        "kept_open": plan.kept_open,
        "bytes_freed": freed,
    }
    if as_json:
        emit_json(summary)
        return
    if plan.cutoff is None:
        out.print("retention is 'keep' and no --older-than was given: nothing to do")
        return
    verb = "would remove" if dry_run else "removed"
    out.print(
        f"{verb} {len(plan.remove)} session(s) older than {plan.cutoff} "
        f"({freed / 1024:.0f} KiB); kept {plan.kept_failed} failed, "
        f"{plan.kept_open} still open",
        highlight=False,
    )
    for record in plan.remove:
        out.print(f"  {record.id} {record.env} {record.task_id} reward={record.reward}")


@sessions_app.command("pack")
def pack(
    env: Annotated[str | None, typer.Option("--env", help="Only this environment.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report the saving.")] = False,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pack closed session files kept as plain files (a data dir from before packing, or a
    crash between a close and its pack); open sessions are left alone (docs/inspecting.md)."""
    with cli_errors():
        settings = settings_for(data_dir)
        folder = settings.data_dir / "sessions"
        envs = [env] if env else sorted(p.name for p in folder.iterdir() if p.is_dir())
        if env and not (folder / env).is_dir():
            raise StateGymError(f"no sessions of environment {env!r} under {folder}")
        done = {e: pack_retained_sessions(settings, e, dry_run=dry_run) for e in envs}
    before = sum(b for files in done.values() for _, b, _ in files)
    after = sum(a for files in done.values() for _, _, a in files)
    packed = {e: len(files) for e, files in done.items()}
    if as_json:
        emit_json(
            {"dry_run": dry_run, "packed": packed, "bytes_before": before, "bytes_after": after}
        )
        return
    verb = "would pack" if dry_run else "packed"
    out.print(
        f"{verb} {sum(packed.values())} closed session file(s): {before / 2**20:.1f} MiB -> "
        f"{after / 2**20:.1f} MiB",
        highlight=False,
    )


@sessions_app.command("steps")
def steps(
    session: SessionArg,
    rows: Annotated[
        bool, typer.Option("--rows", help="Also print each step's rows, before -> after.")
    ] = False,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """The session's step log: step, tool, outcome, rows changed, step reward."""
    from app.core.tasks import task_from_data
    from app.runtime.timeline import timeline

    with cli_errors(), inspector(data_dir) as insp:
        record = insp.record(session)
        env = insp.env_of(record)
        with insp.scratch(record) as conn:
            task = task_from_data(record.task)
            result = timeline(env, insp.gold_cache(env), task, conn, rows=rows)
    if as_json:
        emit_json({"session_id": record.id, **result})
        return
    if not result["step_log"]:
        out.print(f"session {record.id} keeps no step log (seeded before step logging)")
        return
    table = Table("step", "tool", "outcome", "rows changed", "ms", "step reward")
    for step in result["steps"]:
        changed = ", ".join(f"{t} {n}" for t, n in step["rows_changed"].items()) or "-"
        reward = "-" if step["step_reward"] is None else f"{step['step_reward']:+.4g}"
        outcome = step["outcome"] if step["outcome"] == "ok" else f"[red]{step['outcome']}[/red]"
        table.add_row(
            str(step["step"]), step["tool"], outcome, changed, f"{step['duration_ms']:.1f}", reward
        )
        if rows:
            for change in step.get("changes", []):
                table.add_row(
                    "",
                    f"  {change['table']} {change['op']}",
                    "",
                    f"{change['before']} -> {change['after']}",
                    "",
                    "",
                )
    out.print(table)
    out.print(
        f"{len(result['steps'])} step(s); state credit {result['state_credit']:g}, "
        "the sum of the step rewards"
    )


@sessions_app.command("tree")
def tree(session: SessionArg, data_dir: DataDirOption = None, as_json: JsonOption = False) -> None:
    """The fork lineage holding the session: its root, forks (at which step) and restores."""
    from rich.tree import Tree

    with cli_errors(), inspector(data_dir) as insp:
        record = insp.record(session)
        result = insp.control.lineage_tree(record.id)
    if as_json:
        emit_json(result)
        return

    def label(node: dict[str, Any]) -> str:
        how = (
            "seeded" if node["kind"] == "seed" else f"{node['kind']} at step {node['parent_step']}"
        )
        reward = "" if node["reward"] is None else f", reward {node['reward']:g}"
        mark = " [bold]<-[/bold]" if node["marked"] else ""
        return f"{node['session_id']} ({how}, {node['status']}{reward}){mark}"

    def grow(branch: Tree, node: dict[str, Any]) -> None:
        for child in node["children"]:
            grow(branch.add(label(child)), child)

    root = Tree(label(result))
    grow(root, result)
    out.print(root, highlight=False)
