"""`stategym migrate ...`: Alembic for the control database, templates and retained sessions."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress

from app.cli.common import settings_or_exit
from app.settings import Settings
from app.storage.factory import retained_schema_upgrader
from app.storage.migration_lint import Unfilled, unfilled_columns
from app.storage.migrations import (
    CONTROL,
    NotReplaceable,
    branch_revisions,
    branches,
    downgrade_file,
    editable_file,
    file_revision,
    head_revision,
    new_revision,
    replace_initial_revision,
    retained_session_files,
    revision_formatter_missing,
    revision_path,
    schema_differences,
    stamp_revision,
    upgrade_file,
)

migrate_cli = typer.Typer(
    help="Schema migrations (Alembic: one branch per environment, one for the control database, "
    "one for the framework's tables every environment depends on)."
)
console = Console()

TargetOption = Annotated[
    str | None,
    typer.Option("--env", help="Environment name, 'control' or 'framework'. Default: all."),
]
DataDirOption = Annotated[Path | None, typer.Option("--data-dir", help="Data folder.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _settings(data_dir: Path | None) -> Settings:
    return settings_or_exit(**({"data_dir": data_dir} if data_dir else {}))


def _chosen(target: str | None) -> list[str]:
    if target is None:
        return branches()
    if target not in branches():
        raise typer.BadParameter(f"unknown target {target!r}; choose from {branches()}")
    return [target]


def database_files(data_dir: Path, target: str, *, sessions: bool = False) -> list[Path]:
    """The files of one target: control DB, or an env's templates/snapshots (or sessions)."""
    if target == CONTROL:
        path = data_dir / "control.sqlite"
        return [path] if path.exists() and not sessions else []
    if sessions:
        return retained_session_files(data_dir / "sessions" / target)
    kinds = ("templates", "snapshots", "gold")
    return sorted(p for kind in kinds for p in (data_dir / kind / target).glob("*.sqlite"))


def _revision(path: Path) -> str | None:
    return file_revision(path)


@migrate_cli.command()
def upgrade(env: TargetOption = None, data_dir: DataDirOption = None) -> None:
    """Upgrade the control database and retained templates/snapshots to their branch heads."""
    settings = _settings(data_dir)
    for target in _chosen(env):
        for path in database_files(settings.data_dir, target):
            upgrade_file(path, target)
            console.print(f"{target}: {path} at {_revision(path)}")


@migrate_cli.command()
def downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. retail@-1 or an id.")],
    env: Annotated[str, typer.Option("--env", help="Environment name, 'control' or 'framework'.")],
    data_dir: DataDirOption = None,
) -> None:
    """Downgrade one target's control/template files to REVISION."""
    settings = _settings(data_dir)
    for path in database_files(settings.data_dir, _chosen(env)[0]):
        downgrade_file(path, env, revision)
        console.print(f"{env}: {path} at {_revision(path)}")


@migrate_cli.command()
def current(env: TargetOption = None, data_dir: DataDirOption = None, as_json: JsonOption = False):
    """Show each database's revision beside its branch head."""
    settings = _settings(data_dir)
    rows = [
        {"target": t, "file": str(p), "revision": _revision(p), "head": head_revision(t)}
        for t in _chosen(env)
        for p in database_files(settings.data_dir, t)
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    for row in rows:
        mark = "current" if row["revision"] == row["head"] else "BEHIND"
        console.print(
            f"{row['target']:10} {row['revision']} (head {row['head']}) {mark} {row['file']}"
        )


@migrate_cli.command()
def history(
    env: TargetOption = None, data_dir: DataDirOption = None, as_json: JsonOption = False
) -> None:
    """List each branch's revisions, newest first (`--data-dir` is accepted, as by every
    migrate command; the history is the code's, not the data's)."""
    data = {t: list(branch_revisions(t)) for t in _chosen(env)}
    if as_json:
        typer.echo(json.dumps(data, indent=1))
        return
    for target, revisions in data.items():
        console.print(f"[bold]{target}[/]: " + (" <- ".join(revisions) or "(no migrations)"))


def stamped_files(data_dir: Path, target: str, revision: str) -> list[Path]:
    """Every database of `target` under `data_dir` (control, templates, snapshots, gold,
    retained sessions, packs included) stamped at `revision`; an unreadable file counts, since
    what it holds cannot be ruled out."""
    files = [
        *database_files(data_dir, target),
        *database_files(data_dir, target, sessions=True),
    ]
    found = []
    for path in files:
        try:
            at = _revision(path)
        except sqlite3.DatabaseError:
            at = revision
        if at == revision:
            found.append(path)
    return found


def _refuse_if_served(data_dir: Path, target: str) -> None:
    """`--initial` rewrites the branch's only revision: refused while any database in the data
    dir is stamped at it (rewriting it would strand them: their schema would no longer be the
    one the revision id names)."""
    revisions = branch_revisions(target)
    if len(revisions) != 1:
        return  # none: nothing to rewrite; several: replace_initial_revision refuses
    served = stamped_files(data_dir, target, revisions[0])
    if served:
        shown = ", ".join(str(p) for p in served[:3]) + (" ..." if len(served) > 3 else "")
        raise NotReplaceable(
            f"{len(served)} database(s) in {data_dir} are stamped at {target}'s initial revision "
            f"{revisions[0]} ({shown}): rewriting it would strand them; write a revision for "
            f"the change instead (stategym migrate revision --env {target} -m MSG)"
        )


def _warn_unfilled(found: list[Unfilled]) -> None:
    for item in found:
        console.print(f"[yellow]warning:[/] {item}", highlight=False)
    if found:
        console.print(
            "[yellow]`stategym migrate check` fails until each is filled[/] (docs/migrations.md)",
            highlight=False,
        )


@migrate_cli.command()
def revision(
    env: Annotated[str, typer.Option("--env", help="Environment, 'control' or 'framework'.")],
    message: Annotated[str, typer.Option("-m", "--message", help="What the revision changes.")],
    initial: Annotated[
        bool,
        typer.Option(
            "--initial",
            help="Replace the branch's only revision (its initial one) instead of adding one: "
            "for a new environment whose models changed before anything was served (refused "
            "when a database in the data dir is stamped at it).",
        ),
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Write the next revision of a branch from the models (autogenerate, then Alembic's
    post-write hooks run ruff when it is installed); the first one starts the branch, in the
    environment's own `migrations_path` if it has one. `--initial` rewrites a one-revision
    branch's initial revision instead. A required column with no default or backfill is reported
    as a warning."""
    if env not in branches():
        raise typer.BadParameter(f"unknown target {env!r}; known: {', '.join(branches())}")
    try:
        if initial:
            _refuse_if_served(_settings(data_dir).data_dir, env)
            path = replace_initial_revision(env, message)
        else:
            path = new_revision(env, message)
    except NotReplaceable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    unformatted = revision_formatter_missing()
    how = "ruff-formatted" if unformatted is None else f"left unformatted: {unformatted}"
    console.print(
        f"{env}: wrote {path} ({how}); read it, then `stategym migrate check --env {env}`"
    )
    if len(branch_revisions(env)) > 1:  # an initial revision creates its tables empty
        _warn_unfilled(unfilled_columns(path))


def revision_advice(target: str) -> str:
    """What to run when the models moved past the branch head, in one line: a branch with only
    its initial revision may still be a new environment's, rewritten rather than extended."""
    add = f"`stategym migrate revision --env {target} -m MSG`"
    if len(branch_revisions(target)) != 1:
        return f"write a revision for the change ({add})"
    return (
        f"while nothing was served yet (a new environment), replace the initial revision: "
        f'`stategym migrate revision --env {target} -m "initial schema" --initial`; once '
        f"sessions or templates exist, write a revision for the change ({add})"
    )


def unfilled_in_branch(target: str) -> list[Unfilled]:
    """Required columns with no default or backfill in any revision after the initial one."""
    later = branch_revisions(target)[:-1]
    return [u for rev in later for u in unfilled_columns(revision_path(rev))]


@migrate_cli.command()
def check(env: TargetOption = None, data_dir: DataDirOption = None) -> None:
    """Fail when models and migrations disagree (Alembic autogenerate finds a difference), or
    when a revision adds a required column with no default or backfill (it would fail on every
    database with rows). `--data-dir` is accepted, as by every migrate command."""
    failed = False
    for target in _chosen(env):
        unfilled = unfilled_in_branch(target)
        if unfilled:
            failed = True
            console.print(f"[red]{target}: a revision cannot run on a database with rows:[/]")
            for item in unfilled:
                console.print(f"  {item}", highlight=False)
        if head_revision(target) is None:
            console.print(
                f"[red]{target}: no migrations[/] (stategym migrate revision --env {target} "
                '-m "initial schema")'
            )
            failed = True
            continue
        diffs = schema_differences(target)
        if diffs:
            failed = True
            console.print(f"[red]{target}: models and migrations differ:[/]")
            for diff in diffs:
                console.print(f"  {diff}")
            console.print(revision_advice(target), highlight=False)
        else:
            console.print(f"{target}: models match migrations at {head_revision(target)}")
    if failed:
        raise typer.Exit(1)


@dataclass
class Outcome:
    file: str
    status: str  # upgraded | current | would_upgrade | failed | archived (PostgreSQL)
    detail: str = ""


def upgrade_sessions(
    data_dir: Path, target: str, dry_run: bool, adopt: bool = False
) -> list[Outcome]:
    """Upgrade every retained session file of one environment, each in its own transaction.

    `adopt`: a file with no revision (created while the environment had no migration branch) is
    taken to be at the branch's first revision, stamped so, then upgraded like the others; a
    failed upgrade puts the file back exactly as it was."""
    head = head_revision(target)
    known = set(branch_revisions(target))
    first = branch_revisions(target)[-1] if known else None
    outcomes: list[Outcome] = []
    files = database_files(data_dir, target, sessions=True)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"{target} sessions", total=len(files))
        for path in files:
            progress.advance(task)
            try:
                revision = _revision(path)
            except sqlite3.DatabaseError as exc:
                outcomes.append(Outcome(path.name, "failed", f"not a database: {exc}"))
                continue
            if revision is None and adopt and first is not None:
                outcomes.append(_adopt(path, target, first, head, dry_run))
            elif revision == head:
                outcomes.append(Outcome(path.name, "current"))
            elif revision is None:
                outcomes.append(
                    Outcome(
                        path.name,
                        "failed",
                        "no revision: created before the branch existed (--adopt stamps it at "
                        f"{first} and upgrades it)",
                    )
                )
            elif revision not in known:
                outcomes.append(Outcome(path.name, "failed", f"unknown revision {revision!r}"))
            elif dry_run:
                outcomes.append(Outcome(path.name, "would_upgrade", f"{revision} -> {head}"))
            else:
                try:
                    with editable_file(path) as plain:
                        upgrade_file(plain, target)
                    outcomes.append(Outcome(path.name, "upgraded", f"{revision} -> {head}"))
                except Exception as exc:  # noqa: BLE001 - reported per file, others go on
                    outcomes.append(Outcome(path.name, "failed", str(exc).splitlines()[0]))
    return outcomes


def _adopt(path: Path, target: str, first: str, head: str | None, dry_run: bool) -> Outcome:
    if dry_run:
        return Outcome(path.name, "would_upgrade", f"adopt at {first} -> {head}")
    original = path.read_bytes()
    try:
        with editable_file(path) as plain:
            conn = sqlite3.connect(plain)
            try:
                stamp_revision(conn, first)
                conn.commit()
            finally:
                conn.close()
            upgrade_file(plain, target)
        return Outcome(path.name, "upgraded", f"adopted at {first} -> {head}")
    except Exception as exc:  # noqa: BLE001 - reported per file; the file is put back
        path.write_bytes(original)
        return Outcome(path.name, "failed", f"adopt: {str(exc).splitlines()[0]}")


@migrate_cli.command()
def sessions(
    env: TargetOption = None,
    data_dir: DataDirOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only.")] = False,
    adopt: Annotated[
        bool,
        typer.Option(
            "--adopt",
            help="Also upgrade files with no revision (made before the environment had a "
            "migration branch), taking them to be at its first revision.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Upgrade retained session databases in bulk; a failure leaves that file as it was."""
    settings = _settings(data_dir)
    schemas = retained_schema_upgrader(settings)
    if schemas is not None:

        def upgrade(target: str) -> list[Outcome]:
            # Same summary shape: a schema stands where a file would.
            return [Outcome(*o) for o in schemas(target, dry_run)]
    else:

        def upgrade(target: str) -> list[Outcome]:
            return upgrade_sessions(settings.data_dir, target, dry_run, adopt)

    report: dict[str, list[Outcome]] = {t: upgrade(t) for t in _chosen(env) if t != CONTROL}
    counts = {
        t: {
            s: sum(o.status == s for o in outs)
            for s in ("upgraded", "current", "would_upgrade", "failed", "archived")
        }
        for t, outs in report.items()
    }
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "counts": counts,
                    "files": {t: [o.__dict__ for o in outs] for t, outs in report.items()},
                }
            )
        )
    else:
        for target, c in counts.items():
            console.print(
                f"{target}: {c['upgraded']} upgraded, {c['current']} already current, "
                f"{c['would_upgrade']} would upgrade, {c['failed']} failed"
                + (
                    f", {c['archived']} archived at older revisions (not migrated)"
                    if c["archived"]
                    else ""
                )
            )
            for o in report[target]:
                if o.status == "failed":
                    console.print(f"  [red]failed[/] {o.file}: {o.detail}")
    if any(c["failed"] for c in counts.values()):
        raise typer.Exit(1)
