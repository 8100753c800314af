"""NeMo Gym main's stricter session sequence, over real HTTP against a real server.

Main (after 0.7.0) tightens the session checker beyond 0.7.0's (tests/nemo_gym_conformance):
its reference server `resources_servers/example_session_state_mgmt` answers 409 for a seed of
an id under another episode or with other task data, 409 for a close naming another episode,
closes a session by id and episode without its cookie (the seed's reply was lost), and an
optional verify after close still scores. This follows that sequence step by step, on a
uvicorn process on an ephemeral port, with the retail environment's first shipped task.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from app.registry import load_environment

COOKIE = "stategym_session"


def _row() -> dict[str, Any]:
    row: dict[str, Any] = json.loads(
        load_environment("retail").tasks_path.read_text().splitlines()[0]
    )
    return row


def _seed(rsid: str, rollout: str, task_data: dict[str, Any], task_id: str) -> dict[str, Any]:
    return {
        "resources_session_id": rsid,
        "episode_id": {"rollout_id": rollout, "attempt": 0},
        "task_id": {"taskset": "retail", "task_id": task_id},
        "task_data": task_data,
    }


def _close(rsid: str, rollout: str) -> dict[str, Any]:
    return {"resources_session_id": rsid, "episode_id": {"rollout_id": rollout, "attempt": 0}}


def _gold_response(row: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": call["name"],
            "arguments": json.dumps(call["arguments"]),
        }
        for i, call in enumerate(row["ground_truth"])
    ]
    return {"output": calls}


def test_gym_main_session_sequence(live_server) -> None:
    url = live_server("retail")
    row = _row()
    task_id = str(row["task_id"])
    data = {k: v for k, v in row.items() if k != "responses_create_params"}
    tool = load_environment("retail").tools[0].name
    with (
        httpx.Client(base_url=url, timeout=60) as agent,
        httpx.Client(base_url=url, timeout=60) as cleanup,
    ):
        # seed, and the same seed again: the same session, exactly Gym's answer, a cookie.
        first = agent.post("/seed_session", json=_seed("rs-main", "r-1", data, task_id))
        assert first.status_code == 200 and first.json() == {"resources_session_id": "rs-main"}
        assert COOKIE in agent.cookies
        again = agent.post("/seed_session", json=_seed("rs-main", "r-1", data, task_id))
        assert again.status_code == 200
        assert again.headers["X-StateGym-Session"] == first.headers["X-StateGym-Session"]

        # the same id under another episode, or with other task data: 409, no cookie.
        other_episode = cleanup.post("/seed_session", json=_seed("rs-main", "r-2", data, task_id))
        assert other_episode.status_code == 409, other_episode.text
        other_data = {**data, "ground_truth": []}
        edited = cleanup.post("/seed_session", json=_seed("rs-main", "r-1", other_data, task_id))
        assert edited.status_code == 409, edited.text
        assert COOKIE not in cleanup.cookies

        # a close naming another episode: 409, and the session is still the agent's.
        foreign = cleanup.post("/close_session", json=_close("rs-main", "r-2"))
        assert foreign.status_code == 409, foreign.text
        assert agent.post(f"/{tool}", json={}).status_code == 200

        # close with the cookie, then again: exactly {resources_session_id}, both times.
        for _ in range(2):
            closed = agent.post("/close_session", json=_close("rs-main", "r-1"))
            assert closed.status_code == 200
            assert closed.json() == {"resources_session_id": "rs-main"}
        assert agent.post(f"/{tool}", json={}).status_code == 404  # a call after close
        late = agent.post("/seed_session", json=_seed("rs-main", "r-1", data, task_id))
        assert late.status_code == 409  # a seed after close

        # optional verify after close: scored by replay, with or without the cookie.
        body = {**row, "response": _gold_response(row)}
        for client in (agent, cleanup):
            verified = client.post("/verify", json=body)
            assert verified.status_code == 200, verified.text
            assert verified.json()["verified_by"] == "replay"
            assert verified.json()["reward"] == 1.0

        # a seed whose reply was lost: the cookie never arrives; the close by id and episode
        # without it closes the session, and the id stays closed.
        lost = httpx.post(url + "/seed_session", json=_seed("rs-lost", "r-3", data, task_id))
        assert lost.status_code == 200
        closed = cleanup.post("/close_session", json=_close("rs-lost", "r-3"))
        assert closed.status_code == 200 and closed.json() == {"resources_session_id": "rs-lost"}
        assert COOKIE not in cleanup.cookies
        stale = httpx.Client(base_url=url, cookies={COOKIE: lost.cookies[COOKIE]})
        with stale:
            assert stale.post(f"/{tool}", json={}).status_code == 404
        refused = cleanup.post("/seed_session", json=_seed("rs-lost", "r-3", data, task_id))
        assert refused.status_code == 409
        # a closed session closed again by another episode: 409, as the reference answers.
        assert cleanup.post("/close_session", json=_close("rs-lost", "r-9")).status_code == 409

        # a close of a never-seeded id: 200, and its racing seed is refused.
        ghost = cleanup.post("/close_session", json=_close("rs-ghost", "r-4"))
        assert ghost.status_code == 200 and ghost.json() == {"resources_session_id": "rs-ghost"}
        racing = cleanup.post("/seed_session", json=_seed("rs-ghost", "r-4", data, task_id))
        assert racing.status_code == 409
