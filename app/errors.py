"""Protocol errors: each class carries its HTTP status; one handler renders them as JSON.

Domain failures inside a tool are not here: they are `app.environment.ToolError` and go back to
the agent as a 200 tool result. These are for callers that broke the protocol.
"""

from __future__ import annotations

from typing import Any


class StateGymError(Exception):
    status_code = 400
    error_type = "bad_request"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None, **details: Any):
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers or {}

    def as_payload(self) -> dict[str, Any]:
        return {"error": {"type": self.error_type, "message": self.message, **self.details}}


class BadRequest(StateGymError):
    status_code = 400
    error_type = "bad_request"


class CannotRewind(StateGymError):
    """The step asked for is not in the session's log, or the log cannot restore it."""

    status_code = 409
    error_type = "cannot_rewind"


class InvalidExport(StateGymError):
    """A /restore_session blob that is not a session this server exported (or was altered)."""

    status_code = 422
    error_type = "invalid_export"


class ExportExpired(InvalidExport):
    """A genuine /export_session blob past its expiry (STATEGYM_EXPORT_TTL_SECONDS)."""

    status_code = 410
    error_type = "export_expired"


class InvalidTask(StateGymError):
    """The task row in a seed or verify body does not fit the environment."""

    status_code = 422
    error_type = "invalid_task"


class NoSession(StateGymError):
    """No valid session cookie: missing, forged or expired."""

    status_code = 401
    error_type = "no_session"


class SessionExpired(NoSession):
    """A genuine cookie past its max age: the session may live on, but not for this caller."""

    error_type = "session_expired"


class SessionNotFound(StateGymError):
    status_code = 404
    error_type = "session_not_found"


class SessionClosed(StateGymError):
    """A call on a closed session: 404, as NeMo Gym answers for a lost session (the body says
    why, and it reaches the model as the tool's answer)."""

    status_code = 404
    error_type = "session_closed"


class SeedConflict(StateGymError):
    """A seed that would reopen a closed id, or reuse an id under another episode."""

    status_code = 409
    error_type = "conflict"


class NotOwner(StateGymError):
    """A request on a session that belongs to another rollout (another cookie or episode)."""

    status_code = 403
    error_type = "forbidden"


class ReleaseFailed(StateGymError):
    """Closing could not release the session; it is not recorded as closed, so retry."""

    status_code = 503
    error_type = "release_failed"


class UnknownTool(StateGymError):
    status_code = 404
    error_type = "unknown_tool"


class SessionUnavailable(StateGymError):
    """The session database cannot be opened (corrupt, missing, wrong schema revision)."""

    status_code = 409
    error_type = "session_unavailable"


class PayloadTooLarge(StateGymError):
    status_code = 413
    error_type = "payload_too_large"


class MethodNotAllowed(StateGymError):
    status_code = 405
    error_type = "method_not_allowed"


class CapacityReached(StateGymError):
    """The server holds as many live sessions as it is configured for."""

    status_code = 503
    error_type = "capacity_reached"


class StorageFull(StateGymError):
    """The data dir's disk is full: nothing was written, the caller may retry later."""

    status_code = 507
    error_type = "insufficient_storage"


class RequestOverBudget(StateGymError):
    """A request that asks to write more than one request may (a fork's n copies, an image
    larger than a session may be): refused whole, nothing written."""

    status_code = 413
    error_type = "over_budget"


class StorageBudget(StorageFull):
    """The server's disk budget (STATEGYM_DATA_MAX_MB) has no room for this write."""

    error_type = "storage_budget"


def validation_message(route: str, exc: Any) -> str:
    """A pydantic ValidationError as one line that says what to fix, field by field."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return f"{route}: " + "; ".join(problems)
