"""NeMo Gym's verifier fixture for StateGym: our verifier cases in Gym's `VerifierFixtureCase`
shape, and the in-process server Gym's onboarding check (`gym env test`) scores them on.

One source: each environment's `verifier_cases.jsonl` (beside its `tasks.jsonl`) stays the
cases' only home; `fixture_cases` turns them into Gym rows by playing each case's calls on a real
in-process server and keeping the verify request it sends (the task row and a Responses object
with every call, its real output and the final message). Gym then posts that request without a
session, so StateGym scores it by replay (`verified_by: "replay"`): the fixture checks that a
rollout's reward can be recomputed from its request alone. Case kinds: reward exactly 1 ->
`full_reward`, 0 -> `zero_reward`, another exact value -> `determinism`, a bad body ->
`malformed`; cases with a range (`{"gt": 0}`) stay in our own suite only. Each environment's
first full case is repeated as a `determinism` case. Nothing here imports nemo_gym.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from app.registry import load_environment
from app.sdk.environment import Environment

# The error text a malformed case expects: what `FixtureServer.verify` raises on a 4xx.
MALFORMED_PREFIX = "verify answered HTTP"
# The final message a fixture rollout ends with when the case says "gold".
GOLD_PREFIX = "Done. "


class FixtureVerifyError(RuntimeError):
    """Verify refused the request (a 4xx): the message says the status, type and reason."""


def case_source(env: Environment) -> Path:
    """Where an environment keeps its verifier cases: beside its shipped tasks."""
    return env.tasks_path.parent / "verifier_cases.jsonl"


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text().splitlines():
        if line.strip():
            yield json.loads(line)


def _calls(case: Mapping[str, Any], task: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = task["ground_truth"] if case["calls"] == "gold" else case["calls"]
    return [
        {
            "name": c["name"],
            "arguments": c["arguments"]
            if isinstance(c["arguments"], dict)
            else json.loads(c["arguments"]),
        }
        for c in calls
    ]


def _kind(expected: Any) -> str | None:
    if isinstance(expected, dict):
        return None  # a range: Gym pins exact rewards only
    value = float(expected)
    return "full_reward" if value == 1.0 else "zero_reward" if value == 0.0 else "determinism"


async def _request(
    client: httpx.AsyncClient, task: dict[str, Any], calls: list[dict[str, Any]], answer: str
) -> dict[str, Any]:
    """Play `calls` in a fresh session; the verify request the rollout ends with."""
    client.cookies.clear()
    seeded = await client.post("/seed_session", json=task)
    seeded.raise_for_status()
    output: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        result = await client.post(f"/{call['name']}", json=call["arguments"])
        result.raise_for_status()
        arguments = json.dumps(call["arguments"])
        output.append(
            {"type": "function_call", "call_id": f"c{i}", "name": call["name"]}
            | {"arguments": arguments}
        )
        output.append({"type": "function_call_output", "call_id": f"c{i}", "output": result.text})
    text = {"type": "output_text", "text": answer}
    output.append({"type": "message", "role": "assistant", "content": [text]})
    await client.post("/close_session", json={})
    response = {"id": "resp_fixture", "object": "response", "output": output}
    return {**task, "response": response}


async def fixture_cases(env_name: str) -> list[dict[str, Any]]:
    """Gym `VerifierFixtureCase` rows for one environment, from its verifier cases."""
    from app.server.api import create_app
    from app.settings import Settings

    env = load_environment(env_name)
    tasks = {t["task_id"]: t for t in _lines(env.tasks_path)}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="stategym-fixture-") as data_dir:
        settings = Settings(data_dir=Path(data_dir), secret_key=secrets.token_urlsafe(48))
        app = create_app(settings, env)
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app)
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://stategym", timeout=60)
            )
            for case in _lines(case_source(env)):
                name = f"{env_name}:{case['case']}"
                task = {**tasks[case["task_id"]], **case.get("overrides", {})}
                if "verify_body" in case:
                    if isinstance(case["verify_body"], dict):  # Gym's requests are objects
                        # One fixture server serves every environment: the body names its own.
                        body = {"env": env_name, **case["verify_body"]}
                        rows.append(_malformed(name, body, case["expect"]["status"]))
                    continue
                kind = _kind(case["expect"].get("reward"))
                if kind is None:
                    continue
                answer = case["answer"]
                if answer == "gold":
                    answer = GOLD_PREFIX + " ".join(task.get("expected_outputs") or [])
                request = await _request(client, task, _calls(case, task), answer)
                reward = float(case["expect"]["reward"])
                rows.append(_case(name, kind, request, reward))
                if kind == "full_reward" and not any(r["kind"] == "determinism" for r in rows):
                    rows.append(_case(f"{name}:twice", "determinism", request, reward))
            first = next(iter(tasks.values()))
            not_an_object = {**first, "response": 7}
            rows.append(_malformed(f"{env_name}:response_not_an_object", not_an_object, 422))
    return rows


def _case(name: str, kind: str, request: dict[str, Any], reward: float) -> dict[str, Any]:
    return {"name": name, "kind": kind, "request": request, "expected_reward": reward}


def _malformed(name: str, body: dict[str, Any], status: int) -> dict[str, Any]:
    expected = f"{MALFORMED_PREFIX} {status}"
    return {"name": name, "kind": "malformed", "request": body, "expected_error": expected}


def render(rows: list[dict[str, Any]]) -> str:
    """The fixture file's text: one case a line, keys sorted (as Gym itself rewrites it)."""
    return "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)


class FixtureServer:
    """What Gym's fixture runner calls `verify` on: a fresh StateGym app per environment, in
    process, over a shared data dir (templates and snapshots are built once per process; a
    verify without a session is scored by replay, so no state carries from one case to the
    next). `verify` answers the verify response, or raises FixtureVerifyError on a 4xx."""

    _data_dir: Path | None = None

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._clients: dict[str, httpx.AsyncClient] = {}

    @classmethod
    def data_dir(cls) -> Path:
        if cls._data_dir is None:
            cls._data_dir = Path(tempfile.mkdtemp(prefix="stategym-gym-fixture-"))
        return cls._data_dir

    async def _client(self, env_name: str) -> httpx.AsyncClient:
        from app.server.api import create_app
        from app.settings import Settings

        if env_name not in self._clients:
            secret = secrets.token_urlsafe(48)
            settings = Settings(data_dir=self.data_dir() / env_name, secret_key=secret)
            app = create_app(settings, load_environment(env_name))
            await self._stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="http://stategym", timeout=120)
            self._clients[env_name] = await self._stack.enter_async_context(client)
        return self._clients[env_name]

    async def verify(self, request: Any) -> dict[str, Any]:
        body = request.model_dump() if hasattr(request, "model_dump") else dict(request)
        env_name = body.get("env")
        if not isinstance(env_name, str):
            raise FixtureVerifyError(f"{MALFORMED_PREFIX} 400: the task row names no `env`")
        try:
            answer = await (await self._client(env_name)).post("/verify", json=body)
        finally:
            await self._stack.aclose()
            self._clients.clear()
        if answer.status_code >= 400:
            error = answer.json().get("error", {}) if answer.content else {}
            raise FixtureVerifyError(
                f"{MALFORMED_PREFIX} {answer.status_code}: {error.get('type')}: "
                f"{error.get('message')}"
            )
        result: dict[str, Any] = answer.json()
        return result
