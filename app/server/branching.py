"""Routes that copy or move a session's state: fork, rewind, export, restore (docs/steps.md).

The session is the request's cookie (a `resources_session_id` in the body must name the
cookie's own: app/runtime/ownership.py). Children of a fork and restored sessions are ordinary
sessions with ids the server mints: their cookie values are in the answer (fork) or set on it
(restore); a restore is owned by the blob's signature.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app import jsonio
from app.errors import BadRequest, InvalidTask
from app.server.models import EpisodeId

router = APIRouter(tags=["steps"])


class _Body(BaseModel):
    # Strict: `"to_step": false` is no step 0 (lax pydantic read it as 0 and undid every step),
    # and "3" or 3.0 are no step numbers either.
    model_config = ConfigDict(extra="forbid", strict=True)
    resources_session_id: str | None = Field(
        None, description="The session a typed seed made under this id (instead of the cookie)."
    )
    episode_id: EpisodeId | None = Field(
        None,
        description="Accepted and ignored: an episode_id proves nothing here (it closes a "
        "session, app/runtime/ownership.py); the session's cookie is the proof.",
    )


class ForkRequest(_Body):
    n: int = Field(1, ge=1, le=64, description="How many children.")
    at_step: int | None = Field(
        None, ge=0, description="The parent's step to start from (default: its current state)."
    )
    resources_session_ids: list[str] | None = Field(
        None,
        description="Refused (422): children's ids are minted by the server and answered, so "
        "no client can squat an id another rollout will seed.",
    )


class RewindRequest(_Body):
    to_step: int = Field(ge=0, description="The step to return to; 0 is the seeded state.")


class ExportRequest(_Body):
    pass


class RestoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    export: dict[str, Any] = Field(description="A blob /export_session returned.")
    resources_session_id: str | None = Field(
        None, description="Refused (422): the new session's id is minted by the server."
    )


ModelT = TypeVar("ModelT", bound=BaseModel)


async def _body(request: Request, model: type[ModelT]) -> ModelT:
    """The JSON body as `model`: 400 when it is not JSON, 422 (our error shape) when invalid."""
    raw = await request.body()
    try:
        data = jsonio.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise BadRequest("the body is not valid JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise InvalidTask("; ".join(problems) or "invalid body") from None


def _json(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": schema}}}}


async def _session_id(request: Request, body: _Body) -> str:
    """The session the request holds (app/runtime/ownership.py): 401 without its cookie, 403
    for another rollout's session, 404 for an id no session holds."""
    proto = request.app.state.protocol
    session_id: str = await proto.owned_session(request, body.resources_session_id)
    return session_id


def _no_client_ids(given: object, field: str) -> None:
    """New sessions' ids are the server's to mint: a chosen one could squat another's id."""
    if given is not None:
        raise InvalidTask(
            f"{field} is not accepted: the ids of new sessions are minted by the server",
            hint="Leave it out and read the new sessions' resources_session_id in the answer.",
        )


@router.post("/fork_session", openapi_extra=_json(ForkRequest))
async def fork_session(request: Request) -> dict[str, Any]:
    """n new sessions with this session's state (as of `at_step`); the parent is untouched."""
    proto = request.app.state.protocol
    body = await _body(request, ForkRequest)
    _no_client_ids(body.resources_session_ids, "resources_session_ids")
    parent = await _session_id(request, body)
    step, children = await proto.branching.fork(parent, body.n, body.at_step)
    return {
        "parent": parent,
        "at_step": step,
        "cookie_name": proto.settings.cookie_name,
        "sessions": [
            {
                "session_id": c.session_id,
                "resources_session_id": c.resources_session_id,
                "cookie": proto.signer.sign(c.session_id, c.issued),
            }
            for c in children
        ],
    }


@router.post("/rewind_session", openapi_extra=_json(RewindRequest))
async def rewind_session(request: Request) -> dict[str, Any]:
    """Back to the state after step `to_step` (0: as seeded); later steps leave the log."""
    proto = request.app.state.protocol
    body = await _body(request, RewindRequest)
    session_id = await _session_id(request, body)
    result: dict[str, Any] = await proto.branching.rewind(session_id, body.to_step)
    return result


@router.post("/export_session", openapi_extra=_json(ExportRequest))
async def export_session(request: Request) -> dict[str, Any]:
    """The session's state (its database image, step log included) and task, signed."""
    proto = request.app.state.protocol
    body = await _body(request, ExportRequest)
    result: dict[str, Any] = await proto.branching.export(await _session_id(request, body))
    return result


@router.post("/restore_session", openapi_extra=_json(RestoreRequest))
async def restore_session(request: Request) -> JSONResponse:
    """A new session from an export of this server (or one sharing its secret key)."""
    proto = request.app.state.protocol
    body = await _body(request, RestoreRequest)
    _no_client_ids(body.resources_session_id, "resources_session_id")
    child = await proto.branching.restore(body.export)
    response = JSONResponse(
        {"session_id": child.session_id, "resources_session_id": child.resources_session_id}
    )
    proto.set_cookie(response, child.session_id, issued=child.issued)
    return response


@router.get("/session_tree")
async def session_tree(request: Request, resources_session_id: str | None = None) -> dict[str, Any]:
    """The fork lineage holding the cookie's session (or the one `resources_session_id`
    names, when the cookie is that session's), from its root."""
    proto = request.app.state.protocol
    session_id = await proto.owned_session(request, resources_session_id)
    result: dict[str, Any] = await proto.branching.tree(session_id)
    return result
