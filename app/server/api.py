"""The protocol layer: NeMo Gym's Resources Server routes mapped onto sessions.

Routers stay thin: parse the body, resolve the session from its signed cookie, call the
SessionManager, render the answer. Protocol errors are 4xx JSON; tool failures are 200 results.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from http import HTTPStatus
from math import inf
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse as StarletteJSONResponse
from fastapi.routing import APIRoute
from fastapi.telemetry import TelemetryConfig, get_telemetry_data
from pydantic import BaseModel, ConfigDict

from app import jsonio
from app.errors import (
    BadRequest,
    MethodNotAllowed,
    NoSession,
    SessionExpired,
    SessionNotFound,
    StateGymError,
    StorageFull,
    UnknownTool,
)
from app.registry import load_environment
from app.runtime.branching import Branching
from app.runtime.lanes import set_client
from app.runtime.lifecycle import check_capacity, serving
from app.runtime.sessions import SESSION_EXPIRED, SessionManager, lost_session
from app.sdk.environment import Environment, Tool
from app.server.admin import router as admin_router
from app.server.branching import router as branching_router
from app.server.cookies import CookieSigner, load_or_create_secret
from app.server.mcp_access import check_tool_names, mcp_seed_fields
from app.server.metrics import Stats, install_metrics
from app.server.middleware import (
    BodyLimitMiddleware,
    HostCheckMiddleware,
    RolloutPrefixMiddleware,
    allowed_host_names,
)
from app.server.models import (
    AggregateBody,
    LegacyCloseRequest,
    TypedCloseRequest,
    TypedCloseResponse,
    TypedSeedResponse,
    VerifyBody,
    close_body_schema,
    inline_schema,
    is_typed_close,
    parse_seed_body,
    seed_body_schema,
    validated,
)
from app.settings import Settings
from app.storage.driver import is_storage_full
from app.verify.metrics import aggregate
from app.verify.request_task import require_something_to_score

log = logging.getLogger("stategym.api")


class JSONResponse(StarletteJSONResponse):
    """Starlette's JSONResponse, rendered by app/jsonio.py (orjson where it agrees with json)."""

    def render(self, content: Any) -> bytes:
        return jsonio.dumps(content)


class ProtocolRoute(APIRoute):
    """A route whose endpoint takes only the Request and parses its body itself (to answer
    in our words): its handler awaits the endpoint directly, without FastAPI's dependency
    solving and response serialisation (~30 us a request, bench/history/cpu.md, "server CPU
    per rollout"). OpenAPI still comes from the route's declaration; errors reach the same
    handlers (tests/server/test_protocol_route.py compares both handlers' answers)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint: Callable[[Request], Awaitable[Any]] = self.endpoint

        async def handle(request: Request) -> Response:
            # Who is asking, for the lanes' per-client shares (app/runtime/lanes.py).
            set_client(request.client.host if request.client else None)
            telemetry = get_telemetry_data()  # None unless OpenTelemetry is configured
            if telemetry is not None:
                telemetry.request = request
            answer = await endpoint(request)
            return answer if isinstance(answer, Response) else JSONResponse(answer)

        return handle


class ErrorBody(BaseModel):
    type: str
    message: str
    hint: str | None = None
    model_config = ConfigDict(extra="allow")


class ErrorResponse(BaseModel):
    """Every protocol error: `{"error": {"type", "message", "hint"?, ...}}`."""

    error: ErrorBody


# Error responses point at one schema component instead of naming the model per route: FastAPI
# builds a pydantic adapter for every (route, status, model), about half of an app's build.
_ERROR_REF = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"description": HTTPStatus(code).phrase, "content": _ERROR_REF} for code in codes}


def _with_error_schemas(app: FastAPI) -> None:
    """Put ErrorResponse (and ErrorBody) into the OpenAPI components `_errors` refers to."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = build()
            schema = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            components.update(schema.pop("$defs", {}))
            components["ErrorResponse"] = schema
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


# Statuses any route can answer before reaching its handler (body limit, content type, bugs).
_COMMON = (400, 413, 415, 500, 507)
SESSION_ERRORS = _errors(*_COMMON, 401, 403, 404, 409, 422, 429, 503)
PLAIN_ERRORS = _errors(*_COMMON, 422)


_GET_ONLY_PATHS = {
    "health", "tools", "reverify_mode", "session_tree", "openapi.json", "docs", "redoc",
}  # fmt: skip


def _json_body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    """OpenAPI request body for routes that parse JSON themselves (to answer in our words)."""
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": required, "content": content}}


ROLLOUT_PATHS = ("/seed_session", "/verify", "/close_session")

_NO_SESSION_HINT = "Call POST /seed_session first and forward the cookie it sets."


def _header_safe(value: str) -> str:
    """A task id as a header value: printable ASCII only, bounded."""
    return "".join(c if " " <= c <= "~" else "?" for c in value)[:200]


async def json_body(request: Request, *, default: Any = None) -> Any:
    content_type = request.headers.get("content-type", "")
    if content_type and "json" not in content_type:
        raise StateGymErrorWithStatus(
            415, f"Content-Type must be application/json, got {content_type!r}"
        )
    raw = await request.body()
    if not raw.strip():
        if default is not None:
            return default
        raise BadRequest("the request body is empty; send a JSON object")
    try:
        return jsonio.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, >4300-digit ints
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None


class StateGymErrorWithStatus(StateGymError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status_code = status
        self.error_type = "unsupported_media_type" if status == 415 else "bad_request"


def _object(body: Any, route: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise BadRequest(f"{route} expects a JSON object, got {type(body).__name__}")
    return body


class Protocol:
    """Holds the per-app state the routes need (no module globals: one app per test)."""

    def __init__(self, settings: Settings, env: Environment):
        self.settings = settings
        self.env = env
        secret = load_or_create_secret(settings.secret_key, settings.data_dir)
        self.signer = CookieSigner(secret, settings.cookie_max_age_seconds)
        self.sessions = SessionManager(settings, env)
        # Fork, rewind, export, restore (app/server/branching.py); exports signed by the secret.
        exports = CookieSigner(secret, settings.cookie_max_age_seconds, purpose="export")
        self.branching = Branching(self.sessions, exports.mac)

    def session_id(self, request: Request) -> str:
        value = request.cookies.get(self.settings.cookie_name)
        if not value:
            raise NoSession("no session cookie on this request", hint=_NO_SESSION_HINT)
        return self.signer.unsign(value)

    def optional_session_id(self, request: Request, *, lenient: bool = False) -> str | None:
        """The cookie's session, None without one; `lenient` also turns a forged or expired
        cookie into None (a close by id then proves ownership by its episode instead)."""
        if not request.cookies.get(self.settings.cookie_name):
            return None
        try:
            return self.session_id(request)
        except NoSession:
            if lenient:
                return None
            raise

    async def owned_session(self, request: Request, resources_session_id: str | None) -> str:
        """The session this request holds, by the rule of every session route but close
        (app/runtime/ownership.py): its cookie's, or the one `resources_session_id` names
        when that is the cookie's. Without a valid cookie: 401, whatever the id."""
        return await self.sessions.owned(resources_session_id, self.optional_session_id(request))

    def set_cookie(
        self, response: JSONResponse, session_id: str, issued: int | None = None
    ) -> None:
        response.set_cookie(
            self.settings.cookie_name,
            self.signer.sign(session_id, issued),
            max_age=self.settings.cookie_max_age_seconds,
            httponly=True,
            samesite="lax",
        )


def _install_error_handlers(app: FastAPI) -> None:
    last_full_logged = [-inf]  # when a storage-full answer was last logged with its cause

    @app.exception_handler(StateGymError)
    async def _protocol_error(_request: Request, exc: StateGymError) -> JSONResponse:
        return JSONResponse(exc.as_payload(), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        payload = {"error": {"type": "invalid_request", "message": "; ".join(problems)}}
        return JSONResponse(payload, status_code=422)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if is_storage_full(exc) or is_storage_full(getattr(exc, "orig", None) or exc):
            if time.monotonic() - last_full_logged[0] > 60:  # a full disk fails every request
                last_full_logged[0] = time.monotonic()
                log.warning("%s %s: storage full", request.method, request.url.path, exc_info=exc)
            full = StorageFull(
                "no space left on the data dir's disk; nothing was written",
                hint="Free disk space (e.g. `stategym sessions gc`) and retry.",
            )
            return JSONResponse(full.as_payload(), status_code=full.status_code)
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        payload = {"error": {"type": "internal_error", "message": type(exc).__name__}}
        return JSONResponse(payload, status_code=500)


def _add_tool_route(app: FastAPI, tool: Tool) -> None:
    async def call_tool(request: Request) -> JSONResponse:
        proto = _protocol(request)
        body = await json_body(request, default={})
        session_id = proto.session_id(request)
        return JSONResponse(await proto.sessions.call_tool(session_id, tool, body))

    schema = tool.openai_schema()["parameters"]
    app.router.add_api_route(
        f"/{tool.name}",
        call_tool,
        methods=["POST"],
        route_class_override=ProtocolRoute,
        name=tool.name,
        summary=tool.description.splitlines()[0],
        description=tool.description,
        tags=["tools"],
        responses=SESSION_ERRORS,
        openapi_extra={
            "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}
        },
    )


def _protocol(request: Request) -> Protocol:
    proto: Protocol = request.app.state.protocol
    return proto


router = APIRouter()


@router.get("/", tags=["health"])
@router.get("/health", tags=["health"])
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/tools", tags=["protocol"])
async def tools(request: Request) -> dict[str, Any]:
    """The environment's OpenAI function-tool schemas (what every task row must offer)."""
    env = _protocol(request).env
    return {"env": env.name, "tools": env.tool_schemas()}


async def seed_session(request: Request) -> JSONResponse:
    """Legacy: the task row; answers {session_id, task_id} (+ resources_tools and mcp when MCP
    is on). Typed (NeMo Gym 0.7.0):
    answers exactly {resources_session_id}, idempotent for the same id and episode.
    Either way the session's cookie is set and X-StateGym-Session names the session."""
    proto = _protocol(request)
    seed_request = parse_seed_body(await json_body(request))
    # A legacy seed is always a new rollout: any StateGym cookie it carries is ignored.
    await check_capacity(proto.sessions, proto.settings.max_live_sessions)
    seeded = await proto.sessions.seed(seed_request)
    task_id = seed_request.task.task_id
    if seed_request.typed:
        payload = TypedSeedResponse(
            resources_session_id=seed_request.resources_session_id or ""
        ).payload()
    else:
        payload = {"session_id": seeded.session_id, "task_id": task_id}
    payload.update(mcp_seed_fields(request, seeded.session_id, seeded.issued))
    if not seed_request.typed and "resources_tools" in payload:
        # NeMo Gym main still answers a legacy seed with `mcp: {url_path, transport, headers}`
        # as well; verifiers' NeMoGymTaskset reads only that key to call the tools over MCP,
        # and refuses one without `transport: "http"`.
        block = payload["resources_tools"]
        payload["mcp"] = {k: block[k] for k in ("url_path", "transport", "headers")}
    headers = {"X-StateGym-Session": seeded.session_id}
    if task_id is not None:
        headers["X-StateGym-Task"] = _header_safe(task_id)
    response = JSONResponse(payload, headers=headers)
    proto.set_cookie(response, seeded.session_id, issued=seeded.issued)
    return response


async def verify(request: Request) -> JSONResponse:
    """Echoes the body plus reward and evidence. A closed or deleted session, and a request
    without a session cookie, are scored by replaying the response's calls (docs/steps.md);
    an unknown session or an expired cookie answers reward 0.0 and mask_sample: true."""
    proto = _protocol(request)
    body = await json_body(request)
    validated(VerifyBody, body, "verify")  # the echo is the body as sent
    try:
        session_id = proto.optional_session_id(request)
    except SessionExpired as exc:
        return JSONResponse({**body, **lost_session(SESSION_EXPIRED, exc.message)})
    if session_id is None:
        # Stateless reverify: the task row in the body, its calls replayed on its snapshot. A
        # row that asks nothing would match any untouched database: refused, never 1.0.
        require_something_to_score(body)
        return JSONResponse({**body, **await proto.sessions.reverify(body)})
    named = body.get("resources_session_id")
    if isinstance(named, str):
        # A body naming a session must name the cookie's own (the ownership rule); an id no
        # session holds is only echoed.
        with contextlib.suppress(SessionNotFound):
            await proto.sessions.owned(named, session_id)
    result = await proto.sessions.verify(session_id, body)
    return JSONResponse({**body, **result, "session_id": session_id})


async def close_session(request: Request) -> dict[str, Any]:
    """Typed body {resources_session_id, episode_id}: answers exactly {resources_session_id}.
    Legacy (cookie, optional resources_session_id): answers {status, closed}."""
    proto = _protocol(request)
    body = await json_body(request, default={})
    cookie_session = proto.optional_session_id(request, lenient=True)
    if isinstance(body, Mapping) and is_typed_close(dict(body)):
        typed = validated(TypedCloseRequest, body, "close_session (typed body)")
        await proto.sessions.close_by_resources_id(
            typed.resources_session_id, typed.episode_id.key(), cookie_session
        )
        return TypedCloseResponse(resources_session_id=typed.resources_session_id).model_dump()
    legacy = validated(LegacyCloseRequest, body, "close_session")
    if legacy.resources_session_id is not None:
        closed = await proto.sessions.close_by_resources_id(
            legacy.resources_session_id, None, cookie_session
        )
    elif cookie_session is not None:
        closed = await proto.sessions.close(cookie_session)
    else:
        closed = False
    return {"status": "ok", "closed": closed}


@router.get("/reverify_mode", tags=["protocol"])
async def reverify_mode() -> str:
    """NeMo Gym's `gym eval reverify` asks this; it re-scores only `stateless` servers. A
    verify needs no session: without one, the rollout's calls are replayed on its task's
    snapshot (docs/steps.md)."""
    return "stateless"


@router.post(
    "/aggregate_metrics",
    tags=["protocol"],
    responses=PLAIN_ERRORS,
    openapi_extra=_json_body(inline_schema(AggregateBody)),
)
async def aggregate_metrics(request: Request) -> dict[str, Any]:
    body = validated(AggregateBody, await json_body(request), "aggregate_metrics", BadRequest)
    return aggregate(body.verify_responses)


def _add_rollout_routes(app: FastAPI) -> None:
    """Seed, verify and close: on the app itself, not in `router`, so `_match_hot_first` can
    put them before every other route."""
    bodies = (
        (seed_session, _json_body(seed_body_schema())),
        (verify, _json_body(inline_schema(VerifyBody))),
        (close_session, _json_body(close_body_schema(), required=False)),
    )
    for endpoint, body in bodies:
        app.router.add_api_route(
            f"/{endpoint.__name__}",
            endpoint,
            methods=["POST"],
            route_class_override=ProtocolRoute,
            tags=["protocol"],
            responses=SESSION_ERRORS,
            openapi_extra=body,
        )


def _match_hot_first(app: FastAPI, env: Environment) -> None:
    """Routes are matched in order, and a miss costs each request a few us per route (three
    scans a request in FastAPI 0.16x): a rollout's routes go first, tool calls (most of the
    traffic) right after seed, verify and close. No two paths overlap, so the order changes
    nothing else (the catch-all stays last)."""
    rank = {path: i for i, path in enumerate(ROLLOUT_PATHS)}
    rank.update({f"/{t.name}": len(rank) for t in env.tools})
    app.router.routes.sort(key=lambda route: rank.get(getattr(route, "path", ""), len(rank)))


def _add_tool_routes(app: FastAPI, env: Environment) -> None:
    for tool in env.tools:
        _add_tool_route(app, tool)

    @app.post("/{name}", tags=["tools"], include_in_schema=False)
    async def unknown_tool(name: str) -> None:
        if name in _GET_ONLY_PATHS:
            raise MethodNotAllowed(f"/{name} answers GET only", headers={"Allow": "GET"})
        raise UnknownTool(
            f"no tool named {name!r} in environment {env.name}",
            known_tools=[t.name for t in env.tools],
        )


def _lifespan(proto: Protocol) -> Any:
    settings = proto.settings

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with serving(
            proto.sessions, settings.session_idle_ttl_seconds, settings.reaper_interval_seconds
        ):
            yield

    return lifespan


# FastAPI's native OpenTelemetry, off unless `Settings.opentelemetry`: with every signal off it
# does not look the global providers up on each request (bench/history/cpu.md, "FastAPI's
# native telemetry").
_NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


def create_app(settings: Settings, env: Environment | None = None) -> FastAPI:
    env = env or load_environment(settings.env)
    proto = Protocol(settings, env)
    app = FastAPI(
        title=f"StateGym · {env.name}",
        description=env.description,
        version="0.1.0",
        lifespan=_lifespan(proto),
        default_response_class=JSONResponse,  # routes that return a dict: rendered by orjson
        telemetry=None if settings.opentelemetry else _NO_TELEMETRY,
    )
    app.state.protocol = proto
    _with_error_schemas(app)
    _install_error_handlers(app)
    app.include_router(admin_router)  # read-only /admin/..., off unless admin_token is set
    app.include_router(router)
    # Before the tool routes' catch-all, so GET /metrics is not read as a tool name.
    stats = Stats(settings.data_dir, lambda: proto.sessions.control.count_live(env.name))
    install_metrics(app, stats, settings.stats_log_seconds, expose=settings.metrics)
    # Fork, rewind, export, restore: session errors, and 501 where the backend keeps no step log.
    app.include_router(branching_router, responses={**SESSION_ERRORS, **_errors(501)})
    _add_rollout_routes(app)
    _add_tool_routes(app, env)
    check_tool_names(env)  # whether or not /mcp is served
    app.state.mcp = None
    if settings.expose_tools_over_mcp:
        from app.server.mcp import mount_mcp  # the MCP SDK, imported only to serve /mcp

        mount_mcp(app, settings, env, proto.sessions)
    _match_hot_first(app, env)
    app.add_middleware(
        HostCheckMiddleware,
        allowed=allowed_host_names(settings.allowed_hosts, settings.host),
        prefixes=("/admin",),  # protocol routes are called by name from other machines
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RolloutPrefixMiddleware)
    return app
