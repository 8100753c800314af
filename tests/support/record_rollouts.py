"""Record fixtures/nemo_gym/ (NeMo Gym rollout rows, both session flows) and fixtures/openenv/.

A row is what NeMo Gym's collector writes: the verify response plus `_ng_task_index` and
`_ng_rollout_index`. Legacy flow: seed with the task row, close by cookie; typed (0.7.0): seed
with `resources_session_id`, `episode_id`, `task_id`, `task_data`, close by id and episode. Both
play one plan on retail (two gold rollouts, two no-ops, a wrong figure submitted); the system
prompt is cut from `responses_create_params` (nothing scores it; 20 KB a row). The OpenEnv
transcripts are episodes as the OpenEnv server's core plays them (app/integrations/episodes.py):
each step's exact result, error kind, end and reward. Run again after a meant change:

    python -m tests.support.record_rollouts
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from app.integrations.episodes import Episode, StepOutcome
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.api import create_app
from app.settings import Settings
from tests.support.rollouts import gold_answer, load_tasks, response_object

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "fixtures" / "nemo_gym"
OPENENV_OUT = REPO / "fixtures" / "openenv"
SECRET = "record-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
RETAIL = load_environment("retail")
TASKS = {t["task_id"]: t for t in load_tasks(RETAIL.tasks_path)}
WRONG_FIGURE = {"name": "submit_answer", "arguments": {"answer": "78.45"}}


def calls_of(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": c["name"], "arguments": c["arguments"]}
        if isinstance(c["arguments"], dict)
        else {"name": c["name"], "arguments": json.loads(c["arguments"])}
        for c in task["ground_truth"]
    ]


def plan() -> list[tuple[int, dict[str, Any], list[dict[str, Any]], str]]:
    """(task index, task row without its system prompt, calls, final text)."""
    cancel, address, lookup = (
        _without_system_prompt(TASKS[t]) for t in ("retail-020", "retail-018", "retail-005")
    )
    return [
        (0, cancel, calls_of(cancel), gold_answer(cancel)),
        (0, cancel, calls_of(cancel), gold_answer(cancel)),
        (0, cancel, [], "I could not do it."),
        (1, address, [], ""),
        (2, lookup, [*calls_of(lookup)[:-1], WRONG_FIGURE], "It is 87.45, I think."),
    ]


def _without_system_prompt(task: dict[str, Any]) -> dict[str, Any]:
    params = task["responses_create_params"]
    turns = [m for m in params["input"] if m.get("role") != "system"]
    return {**task, "responses_create_params": {**params, "input": turns}}


async def _play(client: httpx.AsyncClient, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        result = await client.post(f"/{call['name']}", json=call["arguments"])
        assert result.status_code == 200, result.text
        arguments = json.dumps(call["arguments"])
        outputs.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": call["name"],
                "arguments": arguments,
            }
        )
        outputs.append({"type": "function_call_output", "call_id": f"c{i}", "output": result.text})
    return outputs


async def record(flow: str) -> list[dict[str, Any]]:
    """The plan's rows in one flow ("legacy" or "typed"), on a fresh data dir."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(
            Settings(data_dir=Path(tmp), secret_key=SECRET), load_environment("retail")
        )
        rows = []
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            for n, (index, task, calls, text) in enumerate(plan()):
                async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
                    episode = {"rollout_id": f"rollout-{n}", "attempt": 0}
                    rsid = f"rs-{n}"
                    if flow == "typed":
                        data = {k: v for k, v in task.items() if k != "responses_create_params"}
                        seed = {
                            "resources_session_id": rsid,
                            "episode_id": episode,
                            "task_id": {"taskset": "retail", "task_id": task["task_id"]},
                            "task_data": data,
                        }
                    else:
                        seed = task
                    assert (await client.post("/seed_session", json=seed)).status_code == 200
                    outputs = await _play(client, calls)
                    body = {**task, "response": response_object(outputs, text)}
                    verified = await client.post("/verify", json=body)
                    assert verified.status_code == 200, verified.text
                    close = {"resources_session_id": rsid, "episode_id": episode}
                    closed = await client.post(
                        "/close_session", json=close if flow == "typed" else {}
                    )
                    assert closed.status_code == 200, closed.text
                rows.append({**verified.json(), "_ng_task_index": index, "_ng_rollout_index": n})
        return rows


def episode_plans() -> list[dict[str, Any]]:
    """What each OpenEnv episode does: a gold refusal, `finish` alone, a failed call then an
    unknown tool then `finish`, and a call after the episode ended."""
    refusal = TASKS["retail-011"]
    return [
        {
            "about": "the gold calls of a refusal task: decline_request ends it",
            "task_id": "retail-011",
            "calls": calls_of(refusal),
        },
        {
            "about": "finish alone: nothing done, reward 0",
            "task_id": "retail-001",
            "calls": [{"name": "finish", "arguments": {}}],
        },
        {
            "about": "a failed call and an unknown tool are results; the episode goes on",
            "task_id": "retail-001",
            "calls": [
                {"name": "get_order_details", "arguments": {"order_number": "#W0000000"}},
                {"name": "nope", "arguments": {}},
                {"name": "finish", "arguments": {"message": "I could not find it."}},
                {"name": "list_products", "arguments": {}},
            ],
        },
    ]


def step_record(outcome: StepOutcome) -> dict[str, Any]:
    return {
        "tool": outcome.tool_name,
        "result": outcome.result,
        "error_kind": outcome.error_kind,
        "error": outcome.error,
        "done": outcome.done,
        "reward": outcome.reward,
    }


async def record_episodes(data_dir: Path) -> list[dict[str, Any]]:
    """Play `episode_plans` on the episode core; each step as `step_record`."""
    sessions = SessionManager(Settings(data_dir=data_dir, secret_key=SECRET), RETAIL)
    try:
        episodes = []
        for plan_ in episode_plans():
            episode = Episode(sessions)
            await episode.start(TASKS[plan_["task_id"]], episode_id="recorded")
            steps = []
            for call in plan_["calls"]:
                outcome = await episode.call(call["name"], call["arguments"])
                steps.append({"arguments": call["arguments"], **step_record(outcome)})
            await episode.close()
            episodes.append({"about": plan_["about"], "task_id": plan_["task_id"], "steps": steps})
        return episodes
    finally:
        await sessions.aclose()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for flow in ("legacy", "typed"):
        rows = asyncio.run(record(flow))
        path = OUT / f"rollouts_{flow}.jsonl"
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        print(f"{path.relative_to(REPO)}: {len(rows)} rows, {path.stat().st_size} bytes")
    with tempfile.TemporaryDirectory() as tmp:
        episodes = asyncio.run(record_episodes(Path(tmp)))
    path = OPENENV_OUT / "episodes.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(episodes, indent=1, ensure_ascii=False) + "\n")
    print(f"{path.relative_to(REPO)}: {len(episodes)} episodes, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
