"""`stategym browse`: the run explorer (app/explorer/) on 127.0.0.1, read-only, both backends.

On SQLite files, with the `datasette` extra installed, Datasette's raw SQL view is mounted too
(`/-/datasette/`): each session file is one Datasette database named by its session id, next to
the control database. Datasette opens files with `mode=ro` (or `immutable=1`); nothing it serves
can write. A file without a `-wal` is served as immutable (no connection holds it, and that mode
creates no -wal/-shm next to it); a live one as `mode=ro`, so rows still in its WAL are shown.
Sessions not named at start are added on their first request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.sessions import DataDirOption, cli_errors, inspector, settings_for
from app.errors import BadRequest, StateGymError
from app.explorer.pages import Explorer
from app.explorer.queries import RunQueries
from app.explorer.web import DATASETTE_PREFIX, explorer_app
from app.runtime.inspection import Inspector
from app.server.middleware import HostCheckMiddleware, allowed_host_names
from app.settings import Settings
from app.storage.control import SessionQuery
from app.storage.factory import open_inspection

HOST = "127.0.0.1"  # the default: without an admin token, never another interface


def browse_files(
    data_dir: Path,
    sessions: list[str] | None,
    env: str | None,
    task: str | None,
    limit: int,
    scratch: Path,
) -> tuple[list[str], list[str], dict[str, Any]]:
    """(mutable files, immutable files, Datasette metadata) for the chosen sessions; packed
    sessions are unpacked into `scratch`."""
    mutable = [str(data_dir / "control.sqlite")]
    immutable: list[str] = []
    databases: dict[str, Any] = {
        "control": {"description": "StateGym control database: one row per session."}
    }
    with inspector(data_dir) as insp:
        if sessions:
            records = [insp.record(s) for s in sessions]
        else:
            records = insp.query(SessionQuery(env=env, task_id=task, limit=limit))
        for record in records:
            if not insp.view.present(record):
                if sessions:
                    raise StateGymError(f"session {record.id} has no database file")
                continue
            path = insp.view.file(record, scratch)
            wal = path.with_name(path.name + "-wal")
            (mutable if wal.exists() else immutable).append(str(path))
            reward = "-" if record.reward is None else f"{record.reward:g}"
            databases[record.id] = {
                "description": f"{record.env} · task {record.task_id} · {record.status} · "
                f"reward {reward} · created {record.created_at:%Y-%m-%d %H:%M:%S} UTC"
            }
    metadata = {"title": "StateGym sessions", "databases": databases}
    return mutable, immutable, metadata


def build_datasette(
    data_dir: Path,
    sessions: list[str] | None = None,
    env: str | None = None,
    task: str | None = None,
    limit: int = 20,
    base_url: str = "/",
    *,
    scratch: Path,
) -> Any:
    """Datasette over the control database and the chosen sessions; packed sessions are
    unpacked into `scratch` (the caller's directory)."""
    from datasette.app import Datasette

    mutable, immutable, metadata = browse_files(data_dir, sessions, env, task, limit, scratch)
    return Datasette(
        files=mutable,
        immutables=immutable,
        metadata=metadata,
        # Facet suggestions run extra queries on every table page; sessions are browsed row-wise.
        settings={
            "sql_time_limit_ms": 5000,
            "default_page_size": 100,
            "suggest_facets": False,
            "base_url": base_url,
        },
    )


@contextmanager
def explorer_for(
    settings: Settings, sessions: list[str] | None = None, limit: int = 20
) -> Iterator[tuple[Explorer, Any]]:
    """The explorer over the data dir's sessions (either backend) and, on SQLite files, a
    Datasette for the raw SQL view (None on PostgreSQL)."""
    with (
        open_inspection(settings) as (control, view),
        tempfile.TemporaryDirectory(prefix="stategym-browse-") as scratch,
    ):
        insp = Inspector(settings.data_dir, control, view, rebuild_missing=False)
        ds = None
        if view.capabilities.file_copy:
            for sid in sessions or []:
                insp.record(sid)  # unknown or malformed ids end here, before serving
            if find_spec("datasette") is not None:  # the `datasette` extra (pyproject.toml)
                ds = build_datasette(
                    settings.data_dir,
                    sessions,
                    limit=limit,
                    base_url=DATASETTE_PREFIX + "/",
                    scratch=Path(scratch),
                )
        x = Explorer(
            insp,
            RunQueries(control),
            settings.data_dir,
            backend=view.capabilities.name,
            datasette=ds is not None,
            scratch=Path(scratch),
        )
        yield x, ds


def browse(
    session: Annotated[
        list[str] | None,
        typer.Option("--session", help="Open this session in Datasette at start (repeatable)."),
    ] = None,
    # Datasette's index counts every table of every database: keep the default set small.
    limit: Annotated[
        int, typer.Option(min=1, help="Newest sessions Datasette lists at start.")
    ] = 20,
    host: Annotated[
        str, typer.Option(help="Interface to listen on; not loopback only with an admin token.")
    ] = HOST,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8001,
    data_dir: DataDirOption = None,
) -> None:
    """Explore runs in the browser: rewards, rollouts step by step, tables (read-only)."""
    import uvicorn

    with cli_errors():
        settings = settings_for(data_dir)
        check_host(host, settings.admin_token)
        with explorer_for(settings, session, limit) as (x, ds):
            if ds is not None:
                asyncio.run(ds.invoke_startup())
            app = browse_app(x, ds, settings, host)
            typer.echo(
                f"exploring runs on http://{host}:{port}/ ({x.backend} backend"
                + (f", raw SQL at {DATASETTE_PREFIX}/" if ds is not None else "")
                + (", admin token required" if settings.admin_token else "")
                + ")"
            )
            uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="off")


def check_host(host: str, token: str | None) -> None:
    """Loopback only, unless every page needs the admin token."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not token:
        raise BadRequest(
            f"--host {host} would serve every session to the network without authentication: "
            "set STATEGYM_ADMIN_TOKEN first (every page then needs it), or keep 127.0.0.1"
        )


def browse_app(x: Explorer, ds: Any, settings: Settings, host: str = HOST) -> Any:
    """The explorer (and Datasette) behind the Host check: a page whose name was rebound to
    127.0.0.1 (DNS rebinding) gets 400, as /admin does (names besides the loopback ones and
    `host`: STATEGYM_ALLOWED_HOSTS); with an admin token, every page needs it."""
    app = explorer_app(x, settings.admin_token, ds)
    return HostCheckMiddleware(app, allowed_host_names(settings.allowed_hosts, host))
