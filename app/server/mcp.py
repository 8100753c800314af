"""Tools over MCP: the environment's tools served by the official `mcp` SDK (docs/mcp.md).

`/mcp` speaks streamable HTTP, stateless: every POST is answered on its own, so any uvicorn
worker can take any request; the session is named by the signed `X-NeMo-Gym-Session-Token`
that `/seed_session` hands out, not by process memory. The same `Server` runs over stdio for
`stategym mcp` (app/cli/mcp.py), bound to one session. Tokens and reserved names are in
app/server/mcp_access.py: this module, with the SDK, is imported only to serve MCP.

Invariants: `tools/list` offers exactly `GET /tools`; `tools/call` is `SessionManager.call_tool`
(one transaction, the same result JSON; a tool's `{"error": ...}` is `isError: true`, a 4xx is a
JSON-RPC error whose `data` holds the status and body); a token is signed with a key of its own
(`CookieSigner(purpose="mcp-token")`), so a cookie is never a token, nor the reverse.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from fastapi import FastAPI, Request
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import McpError
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app import jsonio
from app.errors import StateGymError, StorageFull, UnknownTool
from app.runtime.sessions import SessionManager
from app.sdk.environment import Environment
from app.server.cookies import load_or_create_secret
from app.server.mcp_access import (
    MCP_URL_PATH,
    TOKEN_HEADER,
    McpExposure,
    SessionTokens,
    server_name,
)
from app.settings import Settings
from app.storage.driver import is_storage_full

_VERSION = "0.1.0"  # StateGym's, as the app's OpenAPI version
log = logging.getLogger("stategym.mcp")
# The SDK logs one INFO line per request: at training rates that is a log line per tool call.
logging.getLogger("mcp.server.lowlevel.server").setLevel(logging.WARNING)

# Resolves the session a request acts on: the POST /mcp request over HTTP, None over stdio.
SessionOf = Callable[[Request | None], str]


def _protocol_error(exc: StateGymError) -> McpError:
    # Unknown tool is "invalid params" in the MCP spec; the rest are session problems.
    code = types.INVALID_PARAMS if isinstance(exc, UnknownTool) else types.INVALID_REQUEST
    data = {"status": exc.status_code, **exc.as_payload()}
    return McpError(types.ErrorData(code=code, message=exc.message, data=data))


def _unexpected_error(exc: Exception, tool: str) -> McpError:
    """What the HTTP app's last-resort handler answers: 507 when the disk is full, else a 500
    naming only the exception's type (never its text, which may quote SQL or paths)."""
    if is_storage_full(exc) or is_storage_full(getattr(exc, "orig", None) or exc):
        full = StorageFull(
            "no space left on the data dir's disk; nothing was written",
            hint="Free disk space (e.g. `stategym sessions gc`) and retry.",
        )
        return _protocol_error(full)
    log.exception("unexpected error in MCP tools/call %s", tool)
    error = {"type": "internal_error", "message": type(exc).__name__}
    data = {"status": 500, "error": error}
    return McpError(types.ErrorData(code=types.INTERNAL_ERROR, message=error["message"], data=data))


def _result_text(result: dict[str, Any]) -> str:
    # Byte for byte what `POST /<tool>` answers (app/jsonio.py renders both).
    return jsonio.dumps(result).decode()


def build_server(
    name: str,
    env: Environment,
    sessions: SessionManager,
    session_of: SessionOf,
    *,
    instructions: str | None = None,
) -> Server[Any, Any]:
    """The low-level MCP server of one environment; `session_of` names each call's session."""
    server: Server[Any, Any] = Server(
        name, version=_VERSION, instructions=instructions or env.description
    )
    listed = [
        types.Tool(name=s["name"], description=s["description"], inputSchema=s["parameters"])
        for s in env.tool_schemas()
    ]

    def current_request() -> Request | None:
        request = server.request_context.request
        return request if isinstance(request, Request) else None

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        request = current_request()
        # The list is the same for everyone (it is GET /tools), but a token that is sent must
        # be genuine: a forged one is refused here too.
        if request is not None and request.headers.get(TOKEN_HEADER) is not None:
            try:
                session_of(request)
            except StateGymError as exc:
                raise _protocol_error(exc) from None
        return listed

    async def call_tool(req: types.CallToolRequest) -> types.ServerResult:
        # Registered directly rather than with `@server.call_tool()`: that decorator turns every
        # exception into a tool result, and protocol errors must stay JSON-RPC errors.
        try:
            tool = env.tool_named(req.params.name)
            if tool is None:
                raise UnknownTool(
                    f"no tool named {req.params.name!r} in environment {env.name}",
                    known_tools=[t.name for t in env.tools],
                )
            session_id = session_of(current_request())
            result = await sessions.call_tool(session_id, tool, req.params.arguments or {})
        except StateGymError as exc:
            raise _protocol_error(exc) from None
        except Exception as exc:
            raise _unexpected_error(exc, req.params.name) from None
        content = [types.TextContent(type="text", text=_result_text(result))]
        return types.ServerResult(
            types.CallToolResult(
                content=content, structuredContent=result, isError="error" in result
            )
        )

    server.request_handlers[types.CallToolRequest] = call_tool
    return server


class _McpEndpoint:
    """ASGI app in front of the SDK's session manager, whose `run()` lives in the app's lifespan.

    A manager runs once only, so each lifespan gets a new one; served without a lifespan
    (in-process tests, Gym's conformance check) a request gets a manager of its own.
    """

    def __init__(self, server: Server[Any, Any]):
        self.server = server
        self.manager: StreamableHTTPSessionManager | None = None

    def _new_manager(self) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,  # one JSON answer per POST: nothing streams from a tool call
            stateless=True,  # no MCP session in memory: any worker answers any request
            # Agents reach /mcp server to server by whatever host name the launcher resolved;
            # the signed token, not a Host/Origin allow-list, is what guards the endpoint.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        manager = self._new_manager()
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is not None:
            await self.manager.handle_request(scope, receive, send)
            return
        manager = self._new_manager()
        async with manager.run():
            await manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI, settings: Settings, env: Environment, sessions: SessionManager) -> None:
    """Serve `/mcp` (`expose_tools_over_mcp`) and wrap the lifespan; tool names are checked
    already (app/server/api.py)."""
    secret = load_or_create_secret(settings.secret_key, settings.data_dir)
    exposure = McpExposure(
        server_name(settings, env), SessionTokens(secret, settings.cookie_max_age_seconds)
    )
    app.state.mcp = exposure

    def session_of(request: Request | None) -> str:
        return exposure.tokens.session_id(request.headers.get(TOKEN_HEADER) if request else None)

    endpoint = _McpEndpoint(build_server(exposure.server_name, env, sessions, session_of))
    routes = app.router.routes
    # Before the catch-all `POST /{name}` (unknown tools), which would otherwise answer /mcp.
    at = next((i for i, r in enumerate(routes) if "{" in getattr(r, "path", "")), len(routes))
    routes.insert(at, Route(MCP_URL_PATH, endpoint, include_in_schema=False))

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[Any]:
        async with endpoint.running(), inner(app_) as state:
            yield state

    app.router.lifespan_context = lifespan
