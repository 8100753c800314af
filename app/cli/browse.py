"""`stategym browse`: the session databases, read-only, in Datasette on 127.0.0.1.

Each session file is one Datasette database named by its session id (`/<session_id>/<table>`),
next to the control database (`/control/sessions`). Datasette opens files with `mode=ro`
(or `immutable=1`); nothing it serves can write. A file without a `-wal` is served as immutable
(no connection holds it, and that mode creates no -wal/-shm next to it); a live one as `mode=ro`,
so rows still in its WAL are shown.
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.sessions import DataDirOption, cli_errors, inspector, settings_for
from app.errors import StateGymError
from app.server.middleware import HostCheckMiddleware, allowed_host_names
from app.storage.control import SessionQuery

HOST = "127.0.0.1"  # never another interface: Datasette here has no authentication


def browse_files(
    data_dir: Path, sessions: list[str] | None, env: str | None, task: str | None, limit: int
) -> tuple[list[str], list[str], dict[str, Any]]:
    """(mutable files, immutable files, Datasette metadata) for the chosen sessions."""
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
            path = insp.view.file(record)
            if not path.is_file():
                if sessions:
                    raise StateGymError(f"session {record.id} has no database file")
                continue
            wal = path.with_name(path.name + "-wal")
            (mutable if wal.exists() else immutable).append(str(path))
            reward = "-" if record.reward is None else f"{record.reward:g}"
            databases[record.id] = {
                "description": f"{record.env} · task {record.task_id} · {record.status} · "
                f"reward {reward} · created {record.created_at:%Y-%m-%d %H:%M:%S} UTC"
            }
    metadata = {"title": f"StateGym sessions ({data_dir})", "databases": databases}
    return mutable, immutable, metadata


def build_datasette(
    data_dir: Path,
    sessions: list[str] | None = None,
    env: str | None = None,
    task: str | None = None,
    limit: int = 20,
) -> Any:
    from datasette.app import Datasette

    mutable, immutable, metadata = browse_files(data_dir, sessions, env, task, limit)
    return Datasette(
        files=mutable,
        immutables=immutable,
        metadata=metadata,
        # Facet suggestions run extra queries on every table page; sessions are browsed row-wise.
        settings={"sql_time_limit_ms": 5000, "default_page_size": 100, "suggest_facets": False},
    )


def browse(
    session: Annotated[
        list[str] | None, typer.Option("--session", help="Serve this session (repeatable).")
    ] = None,
    env: Annotated[str | None, typer.Option(help="Only this environment's sessions.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task's sessions.")] = None,
    # Datasette's index counts every table of every database: keep the default set small.
    limit: Annotated[int, typer.Option(min=1, help="Newest sessions served.")] = 20,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 8001,
    data_dir: DataDirOption = None,
) -> None:
    """Browse session databases read-only in Datasette (127.0.0.1 only)."""
    import uvicorn

    with cli_errors():
        settings = settings_for(data_dir)
        ds = build_datasette(settings.data_dir, session, env, task, limit)
    asyncio.run(ds.invoke_startup())
    typer.echo(
        f"serving {len(ds.databases) - 1} session(s) on http://{HOST}:{port}/ "
        f"(a rollout step by step: {TIMELINE_PREFIX}<session_id>)"
    )
    app = browse_app(ds, settings.allowed_hosts, settings.data_dir)
    uvicorn.run(app, host=HOST, port=port, log_level="warning", lifespan="on")


def browse_app(ds: Any, allowed_hosts: list[str], data_dir: Path | None = None) -> Any:
    """Datasette's ASGI app behind the Host check: on 127.0.0.1 without authentication, it
    must not answer a page whose name was rebound to 127.0.0.1 (DNS rebinding). With
    `data_dir`, `/-/timeline/<session_id>` shows a rollout step by step (timeline_page)."""
    app = ds.app() if data_dir is None else _with_timeline(ds.app(), data_dir)
    return HostCheckMiddleware(app, allowed_host_names(allowed_hosts, HOST))


TIMELINE_PREFIX = "/-/timeline/"


def _with_timeline(inner: Any, data_dir: Path) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(TIMELINE_PREFIX):
            await inner(scope, receive, send)
            return
        session_id = path[len(TIMELINE_PREFIX) :].strip("/")
        try:
            status, body = 200, await asyncio.to_thread(timeline_page, data_dir, session_id)
        except StateGymError as exc:
            status, body = 404, f"<p>{html.escape(exc.message)}</p>"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/html; charset=utf-8")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body.encode()})

    return app


def timeline_page(data_dir: Path, session_id: str) -> str:
    """A rollout as a timeline: each step's call, output, rows before -> after, step reward."""
    from app.runtime.tasks import task_from_data
    from app.runtime.timeline import timeline

    with inspector(data_dir) as insp:
        record = insp.record(session_id)
        env = insp.env_of(record)
        with insp.scratch(record) as conn:
            result = timeline(env, insp.gold_cache(env), task_from_data(record.task), conn)
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>timeline {esc(record.id)}</title><style>body{{font-family:sans-serif}}"
        "td,th{border:1px solid #ccc;padding:4px;vertical-align:top}"
        "table{border-collapse:collapse} .error{color:#a00} pre{margin:0;white-space:pre-wrap}"
        "</style></head><body>",
        f"<h1>Session {esc(record.id)}</h1>",
        f"<p>{esc(record.env)} · task {esc(str(record.task_id))} · {esc(record.status)} · "
        f"reward {esc(str(record.reward))}</p>",
    ]
    if not result["step_log"]:
        parts.append("<p>This session keeps no step log.</p></body></html>")
        return "".join(parts)
    parts.append(
        "<table class='timeline'><tr><th>step</th><th>call</th><th>outcome</th><th>output</th>"
        "<th>rows before → after</th><th>step reward</th></tr>"
    )
    for step in result["steps"]:
        output = step["output"] if step["output"] is not None else f"sha256 {step['output_digest']}"
        changes = "".join(
            f"<div>{esc(c['table'])} {esc(c['op'])}: {esc(json.dumps(c['before'], default=str))}"
            f" → {esc(json.dumps(c['after'], default=str))}</div>"
            for c in step.get("changes", [])
        )
        outcome = step["outcome"]
        css = "" if outcome == "ok" else " class='error'"
        reward = "-" if step["step_reward"] is None else f"{step['step_reward']:+.4g}"
        parts.append(
            f"<tr class='step' id='step-{step['step']}'><td>{step['step']}</td>"
            f"<td><pre>{esc(step['tool'])}({esc(json.dumps(step['arguments'], default=str))})"
            f"</pre></td><td{css}>{esc(outcome)}</td>"
            f"<td><pre>{esc(json.dumps(output, default=str)[:2000])}</pre></td>"
            f"<td>{changes or '-'}</td><td class='reward'>{reward}</td></tr>"
        )
    parts.append(
        f"</table><p>State credit {result['state_credit']:g} (the sum of the step rewards)."
        "</p></body></html>"
    )
    return "".join(parts)
