"""Who may use `/mcp`: the names MCP reserves, the signed session tokens a seed answer hands out,
and that answer's `resources_tools`, without the MCP SDK (app/server/mcp.py serves `/mcp` and is
imported only when `expose_tools_over_mcp` is on: the SDK takes ~150 ms to import).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from app.errors import NoSession
from app.sdk.environment import Environment
from app.server.cookies import CookieSigner
from app.server.models import MCPServerMetadata
from app.settings import Settings

MCP_URL_PATH = "/mcp"
TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
# NeMo Gym's reserved names: protocol routes that must never be advertised as tools.
RESERVED_TOOL_NAMES = frozenset(
    {"verify", "seed_session", "close_session", "aggregate_metrics", "mcp"}
)
# MCP clients refuse other names, and `mcp__<server>__<tool>` could not be mapped back.
_TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
_TOKEN_HINT = "Use the X-NeMo-Gym-Session-Token header from this rollout's /seed_session answer."


def check_tool_names(env: Environment) -> None:
    """Refuse at app start an environment whose tools MCP cannot serve safely."""
    for tool in env.tools:
        if tool.name in RESERVED_TOOL_NAMES:
            raise ValueError(f"{env.name}: tool {tool.name!r} collides with a protocol route")
        if not _TOOL_NAME_RE.fullmatch(tool.name):
            raise ValueError(f"{env.name}: tool name {tool.name!r} is not a valid MCP tool name")


class SessionTokens:
    """Signed, expiring MCP session tokens (`<session id>.<issued>.<hmac>`)."""

    def __init__(self, secret: str, max_age_seconds: int):
        self._signer = CookieSigner(secret, max_age_seconds, purpose="mcp-token")

    def issue(self, session_id: str, issued: int | None = None) -> str:
        return self._signer.sign(session_id, issued)

    def session_id(self, token: str | None) -> str:
        if not token:
            raise NoSession(f"no {TOKEN_HEADER} header on this MCP request", hint=_TOKEN_HINT)
        try:
            return self._signer.unsign(token)
        except NoSession as exc:  # reworded: the signer speaks of cookies
            reason = exc.message.replace("session cookie", "MCP session token")
            raise type(exc)(reason, hint=_TOKEN_HINT) from None  # expired stays expired


@dataclass(frozen=True)
class McpExposure:
    """What the seed route needs to hand out MCP access (kept on `app.state.mcp`)."""

    server_name: str
    tokens: SessionTokens

    def resources_tools(self, session_id: str, issued: int | None = None) -> dict[str, Any]:
        """NeMo Gym's `MCPServerMetadata`, exactly its four keys."""
        return MCPServerMetadata(
            server_name=self.server_name,
            url_path=MCP_URL_PATH,
            transport="http",
            headers={TOKEN_HEADER: self.tokens.issue(session_id, issued)},
        ).model_dump(mode="json")


def server_name(settings: Settings, env: Environment) -> str:
    return settings.mcp_server_name or env.name


def mcp_seed_fields(request: Request, session_id: str, issued: int | None = None) -> dict[str, Any]:
    """`{"resources_tools": ...}` for a seed answer when MCP is on, else nothing. `issued` is
    the cookie's: a repeated typed seed then answers the very same token."""
    exposure: McpExposure | None = getattr(request.app.state, "mcp", None)
    return {"resources_tools": exposure.resources_tools(session_id, issued)} if exposure else {}
