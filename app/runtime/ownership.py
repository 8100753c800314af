"""Who may act on a session: the holder rule of every session route.

A session is reached only by its holder: the request whose signed cookie names it (MCP: the
token its seed answered, app/server/mcp_access.py). Routes that return a session's data or change
it (tools, verify of a live session, fork, rewind, export, session_tree) ask for that cookie; a
`resources_session_id` in the body only says which session the cookie must be.

The one exception is NeMo Gym's lost-reply close: an environment server whose seed answer was
lost never saw the cookie, so a cookieless `/close_session` naming the `resources_session_id`
with the `episode_id` that seeded it closes that session, and nothing more (an id and an episode
appear in logs and trajectories; they are not a credential for data). A close naming another
episode is 409 (NeMo Gym main's rule); a close with another session's cookie is 403.
"""

from __future__ import annotations

from app.errors import NoSession, NotOwner, SeedConflict, SessionNotFound
from app.storage.base import ControlStore
from app.storage.control import ResourcesClaim

_COOKIE_HINT = (
    "Send the session's cookie (the one its seed, fork or restore set). A resources_session_id "
    "with its seed's episode_id is enough to close a session, and for nothing else."
)
_CLOSE_HINT = (
    "Send the session's cookie, or, for a typed seed, its resources_session_id with the "
    "episode_id that seeded it."
)


def check_holder(held: ResourcesClaim, cookie_session_id: str) -> None:
    """403 when the request's cookie is another session's than the one `held` names."""
    if cookie_session_id != held.session_id:
        raise NotOwner(
            f"resources_session_id {held.resources_session_id!r} belongs to another session "
            "than this request's session cookie",
            hint="Send the cookie its seed set.",
        )


def check_closer(held: ResourcesClaim, episode: str | None, cookie_session_id: str | None) -> None:
    """May this request close the session `held` names? Its cookie (403 when another
    session's), or, cookieless, the episode of its seed (409 for another episode, 403 when
    none is named or the session was not made by a typed seed)."""
    rsid = held.resources_session_id
    if cookie_session_id is not None:
        if cookie_session_id != held.session_id:
            raise NotOwner(
                f"resources_session_id {rsid!r} belongs to another session than this "
                "request's session cookie",
                hint="Send the cookie its seed set, or no cookie and the episode_id of its seed.",
            )
        return
    if held.episode is None:
        raise NotOwner(
            f"resources_session_id {rsid!r} belongs to another rollout: it was not made by a "
            "typed seed, so only its session cookie may close it",
            hint=_CLOSE_HINT,
        )
    if episode is None:
        raise NotOwner(
            f"resources_session_id {rsid!r} belongs to another rollout: a close without the "
            "session cookie must carry the episode_id of its seed",
            hint=_CLOSE_HINT,
        )
    if episode != held.episode:
        raise SeedConflict(
            f"resources_session_id {rsid!r} belongs to another episode than {episode}",
            hint="Close it with the episode_id that seeded it (or its cookie).",
        )


def owned_session_id(
    control: ControlStore,
    env: str,
    resources_session_id: str | None,
    cookie_session_id: str | None,
) -> str:
    """The session the request holds (runs on a worker thread: one control read).

    401 without a cookie, whatever the id; without an id, the cookie's session; with one, the
    session its claim holds, after `check_holder` (404 when no open session holds it)."""
    if cookie_session_id is None:  # before the lookup: no answer says whether an id exists
        if resources_session_id is None:
            raise NoSession("no session cookie on this request", hint=_COOKIE_HINT)
        raise NoSession(
            f"no session cookie on this request: resources_session_id "
            f"{resources_session_id!r} is reached only with its session cookie (an id and an "
            "episode_id close a session and do nothing else)",
            hint=_COOKIE_HINT,
        )
    if resources_session_id is None:
        return cookie_session_id
    held = control.claim(env, resources_session_id)
    if held is None or held.session_id is None:
        raise SessionNotFound(f"no session holds resources_session_id {resources_session_id!r}")
    check_holder(held, cookie_session_id)
    return held.session_id
