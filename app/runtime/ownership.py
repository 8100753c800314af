"""Who may act on a session: the one ownership rule of every session route.

A request owns a session when its signed cookie names that session, or, without a cookie, when
it names the `episode_id` whose typed seed claimed the session's `resources_session_id`. A bare
id proves nothing: ids are chosen by callers and appear in logs. Fork children and restored
sessions are owned through the cookies the fork or restore answers with (and, for children of a
typed seed given ids of their own, through the parent's episode, which they inherit). A session
no episode seeded (a legacy seed, or a child of one) is owned by its cookie alone.

Used by fork, rewind, export, session_tree, close and verify (app/server); a restore is owned
by the export blob's signature instead (app/runtime/branching.py).
"""

from __future__ import annotations

from app.errors import NoSession, NotOwner, SessionNotFound
from app.storage.base import ControlStore
from app.storage.control import ResourcesClaim

_NO_PROOF_HINT = (
    "Send the session's cookie (the one its seed, fork or restore set), or, for a typed seed, "
    "its resources_session_id with the episode_id that seeded it."
)


def check_owner(held: ResourcesClaim, episode: str | None, cookie_session_id: str | None) -> None:
    """NotOwner (403) unless the request owns the session `held` names: the cookie's session
    is it, or, without a cookie, `episode` is the seed's (a cookie that names another session
    is refused even with the right episode: the cookie says which rollout is asking)."""
    rsid = held.resources_session_id
    if cookie_session_id is not None:
        if cookie_session_id != held.session_id:
            raise NotOwner(
                f"resources_session_id {rsid!r} belongs to another session than this "
                "request's session cookie",
                hint="Send the cookie its seed set, or no cookie and the episode_id of its seed.",
            )
        return
    if episode is None or held.episode is None or episode != held.episode:
        why = (
            "a request without the session cookie must carry the episode_id of its seed"
            if held.episode is not None
            else "it was not made by a typed seed, so only its session cookie proves ownership"
        )
        raise NotOwner(
            f"resources_session_id {rsid!r} belongs to another rollout: {why}",
            hint=_NO_PROOF_HINT,
        )


def owned_session_id(
    control: ControlStore,
    env: str,
    resources_session_id: str | None,
    episode: str | None,
    cookie_session_id: str | None,
) -> str:
    """The session the request may act on (runs on a worker thread: one control read).

    Without an id, the cookie's session (401 without a cookie); with one, the session its
    claim holds, after `check_owner` (404 when no open session holds it)."""
    if resources_session_id is None:
        if cookie_session_id is None:
            raise NoSession("no session cookie on this request", hint=_NO_PROOF_HINT)
        return cookie_session_id
    held = control.claim(env, resources_session_id)
    if held is None or held.session_id is None:
        raise SessionNotFound(f"no session holds resources_session_id {resources_session_id!r}")
    check_owner(held, episode, cookie_session_id)
    return held.session_id
