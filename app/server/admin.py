"""The read-only admin API under `/admin/...`: list sessions, table rows, diffs, file downloads.

Off (404) unless `admin_token` is set; then every call needs `Authorization: Bearer <token>`
(401 otherwise). It never writes: sessions are read through the backend's read-only view
(SQLite files or PostgreSQL schemas; app/storage/base.py), ids pass `check_session_id`, table
and column names are checked against the environment's metadata. Routes are plain `def`s, so
FastAPI runs their reads in its thread pool. Downloads are SQLite files: 501 on PostgreSQL.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from app.errors import StateGymError
from app.runtime.inspection import Inspector, parse_where, record_summary, session_query


class AdminOff(StateGymError):
    status_code = 404
    error_type = "not_found"


class AdminUnauthorized(StateGymError):
    status_code = 401
    error_type = "unauthorized"


def admin_inspector(request: Request) -> Inspector:
    proto = request.app.state.protocol
    token = proto.settings.admin_token
    if not token:
        raise AdminOff("the admin API is off (set STATEGYM_ADMIN_TOKEN to turn it on)")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise AdminUnauthorized("send `Authorization: Bearer <STATEGYM_ADMIN_TOKEN>`")
    backend = proto.sessions.backend
    return Inspector(
        proto.settings.data_dir,
        backend.control,
        backend.view(),
        envs={proto.env.name: proto.env},
        rebuild_missing=False,  # never write, not even a cache file
    )


InspectorDep = Annotated[Inspector, Depends(admin_inspector)]
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size.")]
# Bounded: SQLite's OFFSET is a 64-bit integer (a larger one was a 500).
Offset = Annotated[int, Query(ge=0, le=2**62, description="Rows to skip.")]

router = APIRouter(prefix="/admin", tags=["admin"])


@router.get("/sessions")
def list_sessions(
    insp: InspectorDep,
    env: str | None = None,
    task: str | None = None,
    status: Literal["open", "closed", "verified"] | None = None,
    reward: Annotated[str | None, Query(description="1, <1, >=0.5 ...")] = None,
    since: Annotated[str | None, Query(description="A duration (7d) or an ISO date.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Sessions, newest first."""
    query = session_query(
        env=env,
        task_id=task,
        status=status,
        reward=reward,
        since=since,
        limit=limit,
        offset=offset,
    )
    sessions = [record_summary(r, insp.file_present(r)) for r in insp.query(query)]
    return {"sessions": sessions, "limit": limit, "offset": offset}


@router.get("/sessions/{session_id}")
def show_session(insp: InspectorDep, session_id: str) -> dict[str, Any]:
    """The session record, its stored verify result and its tables with row counts."""
    record = insp.record(session_id)
    return {"session": record_summary(record), "verify": record.verify, **insp.tables(record)}


@router.get("/sessions/{session_id}/tables/{table}")
def table_rows(
    insp: InspectorDep,
    session_id: str,
    table: str,
    where: Annotated[list[str], Query(description="column=value (repeatable).")] = [],  # noqa: B006
    limit: Limit = 50,
    offset: Offset = 0,
) -> dict[str, Any]:
    """One table's rows, in primary-key order, a page at a time."""
    record = insp.record(session_id)
    return insp.rows(record, table, parse_where(where), limit, offset)


@router.get("/sessions/{session_id}/diff")
def session_diff(
    insp: InspectorDep,
    session_id: str,
    against: Literal["seed", "gold"] = "seed",
    limit: Annotated[int, Query(ge=0, le=1000)] = 20,
) -> dict[str, Any]:
    """Per table, rows added / removed / changed from the seed (or gold) state."""
    return insp.diff(insp.record(session_id), against, limit)


@router.get("/sessions/{session_id}/download")
def download(insp: InspectorDep, session_id: str) -> Response:
    """A consistent copy of the session database as one .sqlite file."""
    record = insp.record(session_id)
    return Response(
        insp.image(record),
        media_type="application/vnd.sqlite3",
        headers={"Content-Disposition": f'attachment; filename="{record.id}.sqlite"'},
    )
