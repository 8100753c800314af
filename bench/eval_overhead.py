"""What `stategym eval` adds to a run's wall time (issue 50's target: <= 5 % at concurrency 32,
against a model server that answers at once).

Both sides play the same rollouts (every shipped task of the environment, `-k` samples) against
the same scripted policy server (tests/support/policy_server.py, model `instant`: the gold
calls, no sleep) and a StateGym in process, at the same concurrency:
- baseline: the least a driver can do: seed, `POST /v1/chat/completions` with raw httpx, the
  tool calls, verify, close; nothing written;
- eval: `app.evaluation.runner.run` (the openai client, rows written and flushed, resume check).
Rounds alternate (baseline, eval, baseline, ...) so the machine's drift falls on both; the
figure is the ratio of the medians. `python -m bench.eval_overhead [--env retail] [-k 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.evaluation.model import chat_tools
from app.evaluation.runner import ModelSpec, RunSpec, run
from app.integrations.rollout import prompt_messages
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.support.policy_server import running_policy_server


async def _bare_rollout(
    env_http: httpx.AsyncClient, model_http: httpx.AsyncClient, row: dict[str, Any]
) -> float:
    env_http.cookies.clear()
    await env_http.post("/seed_session", json=row)
    tools = chat_tools(row["responses_create_params"]["tools"])
    messages: list[dict[str, Any]] = list(prompt_messages(row))
    output: list[dict[str, Any]] = []
    text = ""
    for _ in range(30):
        body = {"model": "instant", "messages": messages, "tools": tools}
        answer = (await model_http.post("/chat/completions", json=body)).json()
        message = answer["choices"][0]["message"]
        text = message.get("content") or ""
        calls = message.get("tool_calls") or []
        messages.append(message)
        if not calls:
            break
        for call in calls:
            fn = call["function"]
            result = await env_http.post(f"/{fn['name']}", json=json.loads(fn["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.text})
            output.append({"type": "function_call", "call_id": call["id"], **fn})
            output.append(
                {"type": "function_call_output", "call_id": call["id"], "output": result.text}
            )
    done = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    response = {"id": "r", "object": "response", "output": [*output, done]}
    verified = await env_http.post("/verify", json={**row, "response": response})
    await env_http.post("/close_session", json={})
    return float(verified.json()["reward"])


async def baseline(env_name: str, rows: list[dict[str, Any]], url: str, k: int, n: int) -> float:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as data_dir:
        started = time.perf_counter()  # from the app's start, as eval's run counts it
        settings = Settings(
            env=env_name, data_dir=Path(data_dir), secret_key=secrets.token_urlsafe(48)
        )
        app = create_app(settings, load_environment(env_name))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            gate = asyncio.Semaphore(n)
            async with httpx.AsyncClient(base_url=url, timeout=120) as model_http:

                async def one(row: dict[str, Any]) -> float:
                    async with (
                        gate,
                        httpx.AsyncClient(
                            transport=transport, base_url="http://stategym"
                        ) as env_http,
                    ):
                        return await _bare_rollout(env_http, model_http, row)

                rewards = await asyncio.gather(*(one(r) for r in rows for _ in range(k)))
                took = time.perf_counter() - started
    assert all(r == 1.0 for r in rewards), "the gold policy must earn 1 on both sides"
    return took


async def with_eval(env_name: str, rows: list[dict[str, Any]], url: str, k: int, n: int) -> float:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as scratch:
        spec = RunSpec(
            tasks=rows,
            k=k,
            out=Path(scratch) / "rollouts.jsonl",
            model=ModelSpec(base_url=url, name="instant"),
            concurrency=n,
            env=load_environment(env_name),
            data_dir=Path(scratch) / "data",
        )
        started = time.perf_counter()
        done = await run(spec)
        took = time.perf_counter() - started
    assert all(r["reward"] == 1.0 for r in done), "the gold policy must earn 1 on both sides"
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="retail")
    parser.add_argument("-k", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env = load_environment(args.env)
    rows = [json.loads(line) for line in env.tasks_path.read_text().splitlines() if line.strip()]
    times: dict[str, list[float]] = {"baseline": [], "eval": []}
    with running_policy_server(rows) as server:
        asyncio.run(baseline(args.env, rows[:4], server.url, 1, 4))  # warm imports and caches
        for _ in range(args.rounds):
            times["baseline"].append(
                asyncio.run(baseline(args.env, rows, server.url, args.k, args.concurrency))
            )
            times["eval"].append(
                asyncio.run(with_eval(args.env, rows, server.url, args.k, args.concurrency))
            )
    medians = {side: statistics.median(v) for side, v in times.items()}
    print(
        json.dumps(
            {
                "env": args.env,
                "rollouts": len(rows) * args.k,
                "concurrency": args.concurrency,
                "seconds": times,
                "median_seconds": medians,
                "eval_over_baseline": round(medians["eval"] / medians["baseline"], 3),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
