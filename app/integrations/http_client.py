"""A small synchronous client of a running StateGym server's NeMo Gym routes, one rollout at a time.

It does what NeMo Gym's agent does (legacy seed with the task row, cookies forwarded, `POST
/<tool>`, `/verify` with the trace, `/close_session`), so it works against any StateGym: one
server, several workers, or PostgreSQL replicas behind a load balancer (the cookie names the
session; the database holds it). Only httpx and the standard library are needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx


class StateGymError(RuntimeError):
    """A protocol failure (seed or verify refused, server unreachable), with the server's text."""


class StateGymClient:
    """One rollout at a time; `seed` again for the next (the cookie jar follows the session)."""

    def __init__(self, base_url: str, *, timeout: float = 60.0):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)
        self.session_id: str | None = None

    def tools(self) -> list[dict[str, Any]]:
        """The environment's OpenAI function tools (`GET /tools`)."""
        answer = self._http.get("/tools")
        _check(answer, "GET /tools")
        tools: list[dict[str, Any]] = answer.json()["tools"]
        return tools

    def seed(self, row: Mapping[str, Any]) -> str:
        """Seed a new session from a task row (the legacy body); returns its id."""
        self._http.cookies.clear()  # a legacy seed is always a new rollout
        answer = self._http.post("/seed_session", json=dict(row))
        _check(answer, "seed_session")
        self.session_id = answer.headers.get("X-StateGym-Session") or answer.json()["session_id"]
        return self.session_id

    def call(self, name: str, arguments: Mapping[str, Any]) -> httpx.Response:
        """`POST /<name>`: the body text is what the model sees, whatever the status."""
        return self._http.post(f"/{name}", json=dict(arguments))

    def verify(self, row: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
        """`/verify` of the current session: the row plus the rollout's `response`."""
        answer = self._http.post("/verify", json={**row, "response": dict(response)})
        _check(answer, "verify")
        verdict: dict[str, Any] = answer.json()
        return verdict

    def close_session(self) -> None:
        """Close the current session (idempotent; nothing to do without one)."""
        if self.session_id is None:
            return
        self.session_id = None
        _check(self._http.post("/close_session", json={}), "close_session")
        self._http.cookies.clear()

    def close(self) -> None:
        """Close the session and the connection pool."""
        try:
            self.close_session()
        finally:
            self._http.close()


def _check(answer: httpx.Response, what: str) -> None:
    if answer.is_success:
        return
    raise StateGymError(f"{what} answered {answer.status_code}: {answer.text[:2000]}")
