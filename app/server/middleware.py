"""ASGI middleware: strip NeMo Gym's `/ng-rollout/<id>` prefix and refuse oversized bodies."""

from __future__ import annotations

import json
import re
from typing import Any

ROLLOUT_PREFIX = re.compile(r"^/ng-rollout/[A-Za-z0-9][A-Za-z0-9._-]*(?=/)")

Scope = dict[str, Any]


class RolloutPrefixMiddleware:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            stripped = ROLLOUT_PREFIX.sub("", scope["path"], count=1)
            if stripped != scope["path"]:
                scope = {**scope, "path": stripped, "raw_path": stripped.encode()}
        await self.app(scope, receive, send)


async def _send_json(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """413 for bodies over the limit, whether announced by Content-Length or streamed."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> dict[str, Any]:
        return {
            "error": {
                "type": "payload_too_large",
                "message": f"request body exceeds {self.max_bytes} bytes",
                "hint": "Send a smaller body (limit: STATEGYM_MAX_BODY_BYTES).",
            }
        }

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _send_json(send, 413, self._too_large())
                return
        received = 0
        exceeded = False

        async def limited_receive() -> Any:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await _send_json(send, 413, self._too_large())


class _BodyTooLarge(Exception):
    pass


LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def allowed_host_names(configured: list[str], serve_host: str | None = None) -> frozenset[str]:
    """The Host names a server answers /admin (or browse) for: loopback names, the address it
    serves on, and `Settings.allowed_hosts`; compared case-insensitively, without the port."""
    names = {*LOCAL_HOSTS, *configured}
    if serve_host and serve_host not in ("0.0.0.0", "::"):  # a wildcard bind is no name
        names.add(f"[{serve_host}]" if ":" in serve_host and "[" not in serve_host else serve_host)
    return frozenset(n.lower() for n in names)


def host_name(header: str) -> str:
    """'example.org:8000' -> 'example.org'; '[::1]:8000' -> '[::1]'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostCheckMiddleware:
    """400 for a request whose Host header is not an allowed name (DNS rebinding: a web page
    on evil.example whose name now resolves to 127.0.0.1 sends `Host: evil.example`).

    `prefixes`: only paths under these are checked (None: every path)."""

    def __init__(self, app: Any, allowed: frozenset[str], prefixes: tuple[str, ...] | None = None):
        self.app = app
        self.allowed = allowed
        self.prefixes = prefixes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (
            self.prefixes is None or scope["path"].startswith(self.prefixes)
        ):
            raw = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if host_name(raw) not in self.allowed:
                message = (
                    f"Host header {raw!r} is not a name this server answers to "
                    f"(allowed: {', '.join(sorted(self.allowed))})"
                )
                hint = "Use http://127.0.0.1, or add the name to STATEGYM_ALLOWED_HOSTS."
                payload = {"error": {"type": "bad_host", "message": message, "hint": hint}}
                await _send_json(send, 400, payload)
                return
        await self.app(scope, receive, send)
