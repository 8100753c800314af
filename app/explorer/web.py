"""The explorer's ASGI app: routes, the admin-token gate, error pages, Datasette under /-/datasette.

Read-only, on 127.0.0.1 unless an admin token is set (app/cli/browse.py refuses otherwise), and
behind the same Host check as `/admin` (a DNS-rebinding guard). With `admin_token` set, every
page needs it, as `/admin` does: `Authorization: Bearer <token>`, or the cookie `/-/login` sets
after the token is typed once (a browser cannot send the header itself). Bad input of any kind
is a 4xx page saying what was wrong; JSON clients (`?format=json`) get the error as JSON.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import tempfile
from collections import deque
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from app.errors import BadRequest, StateGymError
from app.explorer.filters import parse_filter
from app.explorer.pages import Explorer, rollout_page, runs_page, table_page, task_page
from app.explorer.render import render
from app.explorer.templates import CSS
from app.jsonio import dumps_text

log = logging.getLogger("stategym.explorer")
COOKIE = "stategym_browse"
DATASETTE_PREFIX = "/-/datasette"
_SID_IN_PATH = re.compile(r"^/-/datasette/([0-9a-f]{32})(?:[/.]|$)")
_OPEN_PATHS = ("/-/static/explorer.css", "/-/login")
# Packed sessions Datasette opened, each unpacked into the browse process's scratch directory
# (~0.8 MB a retail session): past this many the least recently added is closed and deleted.
MAX_UNPACKED = 64


def cookie_value(token: str) -> str:
    """What the sign-in cookie holds: a keyed digest of the token, never the token itself."""
    return hmac.new(token.encode(), b"stategym browse", hashlib.sha256).hexdigest()


def _wants_json(request: Request) -> bool:
    return request.query_params.get("format") == "json"


def _page(request: Request, x: Explorer, template: str, data: dict[str, Any], title: str) -> Any:
    if _wants_json(request):
        return Response(dumps_text(data), media_type="application/json")
    query = request.url.query
    json_url = f"{request.url.path}?{query + '&' if query else ''}format=json"
    context = {"title": title, "backend": x.backend, "datasette": x.datasette,
               "json_url": json_url, **data}  # fmt: skip
    html = render(template, **context)
    return HTMLResponse(html)


def _int_param(request: Request, name: str, default: int, high: int) -> int:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    if not raw.isdigit() or len(raw) > 12 or int(raw) > high:
        raise BadRequest(f"{name} must be a whole number from 0 to {high}")
    return int(raw)


def explorer_app(x: Explorer, token: str | None = None, datasette: Any = None) -> Starlette:
    """The explorer over `x`; `datasette` (a Datasette instance) is mounted when given."""
    pages = _Pages(x, token)
    routes: list[Any] = [
        Route("/", pages.safe(pages.runs)),
        Route("/rollouts/{session_id}", pages.safe(pages.rollout)),
        Route("/rollouts/{session_id}/tables/{table}", pages.safe(pages.table)),
        Route("/tasks/{env}/{task_id:path}", pages.safe(pages.task)),
        Route("/-/static/explorer.css", _css),
        Route("/-/timeline/{session_id}", _timeline),
        Route("/-/login", pages.safe(pages.login), methods=["GET", "POST"]),
    ]
    if datasette is not None:
        routes.append(Mount(DATASETTE_PREFIX, app=_lazy_datasette(x, datasette)))
    handlers: dict[Any, Callable[..., Any]] = {HTTPException: pages.error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return _TokenGate(app, token) if token else app  # type: ignore[return-value]


async def _css(_request: Request) -> Response:
    return Response(CSS, media_type="text/css", headers={"cache-control": "max-age=300"})


async def _timeline(request: Request) -> Response:
    return RedirectResponse(f"/rollouts/{quote(request.path_params['session_id'])}", 308)


class _Pages:
    """The explorer's pages over one store; each renders HTML, or JSON when asked for."""

    def __init__(self, x: Explorer, token: str | None) -> None:
        self.x = x
        self.token = token

    async def runs(self, request: Request) -> Any:
        params = dict(request.query_params)
        f = parse_filter(params)
        data = await run_in_threadpool(runs_page, self.x, f)
        envs = sorted({s["env"] for s in data["by_task"]})
        prev_offset = None if f.keyset or not f.offset else max(0, f.offset - f.limit)
        columns = [("created", "run"), ("env", "env"), ("task", "task"), ("", "difficulty"),
                   ("", "family"), ("status", "status"), ("reward", "reward"),
                   ("", "failure reason"), ("", "calls"), ("created", "started"),
                   ("", "ended")]  # fmt: skip
        if _wants_json(request):
            return _page(request, self.x, "runs", data, "Runs")
        html_extra = {
            "envs": envs,
            "prev_offset": prev_offset,
            "columns": columns,
            "f_active": f.active(),
            "after": f.after is not None,
            "link": lambda **changes: f.params(**{"offset": 0, "after": None, **changes}),
            "sort_label": "newest first" if f.keyset else f"by {f.sort} ({f.order})",
        }
        return _page(request, self.x, "runs", {**data, **html_extra}, "Runs")

    async def rollout(self, request: Request) -> Any:
        sid = request.path_params["session_id"]
        data = await run_in_threadpool(rollout_page, self.x, sid)
        return _page(request, self.x, "rollout", data, f"Rollout {sid[:12]}")

    async def task(self, request: Request) -> Any:
        env, task_id = request.path_params["env"], request.path_params["task_id"]
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", env) or not 0 < len(task_id) <= 200:
            raise BadRequest("a task page is /tasks/<environment>/<task id>")
        limit = _int_param(request, "limit", 32, 64) or 32
        data = await run_in_threadpool(task_page, self.x, env, task_id, limit)
        return _page(request, self.x, "task", data, f"Task {task_id}")

    async def table(self, request: Request) -> Any:
        sid, name = request.path_params["session_id"], request.path_params["table"]
        raw_step = request.query_params.get("step", "")
        step = None if raw_step == "" else _int_param(request, "step", 0, 10**9)
        offset = _int_param(request, "offset", 0, 10**9)
        limit = _int_param(request, "limit", 50, 1000) or 50
        data = await run_in_threadpool(table_page, self.x, sid, name, step, offset, limit)
        return _page(request, self.x, "table", data, f"{name} · {sid[:12]}")

    async def login(self, request: Request) -> Response:
        nxt = request.query_params.get("next", "/")
        failed = False
        if request.method == "POST":
            form = parse_qs((await request.body())[:4096].decode("utf-8", "replace"))
            given = (form.get("token") or [""])[0]
            nxt = (form.get("next") or ["/"])[0]
            if self.token and hmac.compare_digest(given.encode(), self.token.encode()):
                # Only a path of this site: never //host or /\\host, which browsers follow out.
                target = nxt if re.fullmatch(r"/(?:[^/\\].*)?", nxt) else "/"
                response = RedirectResponse(target, 303)
                response.set_cookie(
                    COOKIE, cookie_value(self.token), httponly=True, samesite="strict"
                )
                return response
            failed = True
        html = render(
            "login",
            title="Sign in",
            backend=self.x.backend,
            datasette=False,
            json_url=None,
            cli=None,
            next=nxt,
            failed=failed,
        )
        return HTMLResponse(html, status_code=401 if failed else 200)

    def safe(self, endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """Any failure of a page becomes an error page (4xx for bad input), never a traceback."""

        async def wrapped(request: Request) -> Any:
            try:
                return await endpoint(request)
            except Exception as exc:  # noqa: BLE001 - rendered by `error`, logged when a 500
                return await self.error(request, exc)

        return wrapped

    async def error(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, StateGymError):
            status, message = exc.status_code, exc.message
        elif isinstance(exc, HTTPException):
            status = exc.status_code
            message = (
                "no such page: pages are /, /rollouts/<session id>, "
                "/rollouts/<session id>/tables/<table>, /tasks/<env>/<task id>"
                if status == 404
                else str(exc.detail)
            )
        else:
            log.exception("explorer page failed: %s", request.url.path)
            status, message = 500, "the page failed; the server log has the details"
        if _wants_json(request):
            return JSONResponse({"error": {"status": status, "message": message}}, status)
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        html = render(
            "error",
            title=f"{status} {reason}",
            backend=self.x.backend,
            datasette=self.x.datasette,
            json_url=None,
            cli=None,
            status=status,
            reason=reason,
            message=message,
        )
        return HTMLResponse(html, status_code=status)


def _lazy_datasette(x: Explorer, ds: Any) -> Any:
    """Datasette's app, serving a session's file from its first request on (a data dir may
    hold 100,000 sessions: Datasette opens only those someone looks at)."""
    from datasette.database import Database

    inner = ds.app()
    scratch = x.scratch or Path(tempfile.mkdtemp(prefix="stategym-browse-"))
    unpacked: deque[str] = deque()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if not path.startswith(DATASETTE_PREFIX):  # a Starlette that strips mounts
                path = scope.get("root_path", "") + path
            match = _SID_IN_PATH.match(path)
            if match and match.group(1) not in ds.databases:
                record = x.insp.control.get(match.group(1))
                if record is not None and x.insp.file_present(record):
                    file = await run_in_threadpool(x.insp.view.file, record, scratch)
                    mutable = file.with_name(file.name + "-wal").exists()
                    ds.add_database(Database(ds, path=str(file), is_mutable=mutable), record.id)
                    if file.parent == scratch:
                        unpacked.append(record.id)
                    while len(unpacked) > MAX_UNPACKED:  # the oldest copy goes, and its name
                        name = unpacked.popleft()
                        ds.remove_database(name)
                        (scratch / f"{name}.sqlite").unlink(missing_ok=True)
            # Datasette routes on the whole path; Starlette's Mount split it.
            scope = {**scope, "path": path, "root_path": ""}
        await inner(scope, receive, send)

    return app


class _TokenGate:
    """Every request carries the admin token (Bearer header or the sign-in cookie); a browser
    without it is sent to /-/login, a script gets 401."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token
        self.cookie = cookie_value(token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN_PATHS or self._signed_in(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if request.method == "GET" and "format=json" not in request.url.query:
            target = scope["path"] + ("?" + request.url.query if request.url.query else "")
            response: Response = RedirectResponse(f"/-/login?next={quote(target)}", 303)
        else:
            response = JSONResponse(
                {"error": {"status": 401, "message": "send `Authorization: Bearer <token>`"}}, 401
            )
        await response(scope, receive, send)

    def _signed_in(self, scope: dict[str, Any]) -> bool:
        headers = dict(scope.get("headers") or [])
        scheme, _, given = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            return True
        for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self.cookie.encode()):
                return True
        return False
