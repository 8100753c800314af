"""A scripted OpenAI-compatible *policy* model on 127.0.0.1 for `stategym eval`'s tests.

It knows the task rows it was given and finds the task by the conversation's user message; the
model name picks the script:
  gold     -> each gold call in turn (one per turn), then "Done. <expected outputs>"
  noop     -> "I cannot help with that." at once (no call)
  deviate  -> the first gold call with its first argument changed, then stops
  badjson  -> a call whose arguments are not JSON, then the gold
  flaky    -> HTTP 500 the first time it sees a request, gold on the retry (the client's
              retries absorb it)
  broken   -> HTTP 500 always (the rollout is masked)
  slow     -> gold, each turn after 0.2 s
  instant  -> gold, no sleep (the overhead benchmark)
Both `/v1/chat/completions` and `/v1/responses` answer in their own shape. Requests are counted.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass
class PolicyServer:
    url: str  # base URL ending in /v1
    requests: list[dict[str, Any]] = field(default_factory=list)


def _user_text(items: Sequence[Any]) -> str:
    for item in items:
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _results_so_far(items: Sequence[Any], api: str) -> int:
    if api == "chat":
        return sum(1 for i in items if isinstance(i, Mapping) and i.get("role") == "tool")
    return sum(
        1 for i in items if isinstance(i, Mapping) and i.get("type") == "function_call_output"
    )


def _script(model: str, task: Mapping[str, Any], done: int) -> tuple[str, dict[str, Any] | None]:
    """(text, call) of the next turn: `call` is {"name", "arguments"(str)} or None."""
    gold = list(task.get("ground_truth") or [])
    final = "Done. " + " ".join(task.get("expected_outputs") or [])
    if model == "noop":
        return "I cannot help with that.", None
    if model == "deviate":
        if done == 0 and gold:
            args = dict(gold[0]["arguments"])
            for key, value in args.items():
                args[key] = f"{value}x" if isinstance(value, str) else value
                break
            return "", {"name": gold[0]["name"], "arguments": json.dumps(args)}
        return "Done.", None
    if model == "badjson":
        if done == 0:
            return "", {"name": gold[0]["name"] if gold else "submit_answer", "arguments": "{oops"}
        done -= 1
    if done < len(gold):
        call = gold[done]
        arguments = call["arguments"]
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return "", {"name": call["name"], "arguments": text}
    return final, None


def build_app(server: PolicyServer, tasks: Sequence[Mapping[str, Any]]) -> FastAPI:
    app = FastAPI()
    by_prompt = {_user_text(t["responses_create_params"]["input"]): t for t in tasks}
    seen: set[str] = set()

    async def handle(request: Request, api: str) -> JSONResponse:
        body = await request.json()
        model = body.get("model", "")
        items = body.get("messages") if api == "chat" else body.get("input")
        server.requests.append({"api": api, "model": model})
        key = json.dumps(body, sort_keys=True)
        first = key not in seen
        seen.add(key)
        if model == "broken" or (model == "flaky" and first):
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=500)
        if model == "slow":
            await asyncio.sleep(0.2)
        task = by_prompt.get(_user_text(items or []))
        if task is None:
            return JSONResponse({"error": {"message": "unknown task"}}, status_code=400)
        text, call = _script(model, task, _results_so_far(items or [], api))
        n = len(server.requests)
        if api == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if call is not None:
                message["tool_calls"] = [{"id": f"call_{n}", "type": "function", "function": call}]
            choice = {
                "index": 0,
                "finish_reason": "tool_calls" if call else "stop",
                "message": message,
            }
            return JSONResponse(
                {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [choice],
                }
            )
        output: list[dict[str, Any]] = []
        if call is not None:
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{n}",
                    "call_id": f"call_{n}",
                    "status": "completed",
                    **call,
                }
            )
        else:
            output.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{n}",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        return JSONResponse(
            {
                "id": f"resp_{n}",
                "object": "response",
                "created_at": 0,
                "model": model,
                "status": "completed",
                "output": output,
                "tools": [],
                "tool_choice": "auto",
                "parallel_tool_calls": True,
            }
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        return await handle(request, "chat")

    @app.post("/v1/responses")
    async def responses(request: Request) -> JSONResponse:
        return await handle(request, "responses")

    return app


@contextmanager
def running_policy_server(tasks: Sequence[Mapping[str, Any]]) -> Iterator[PolicyServer]:
    """Serve the scripted policy on a free port in a background thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = PolicyServer(url=f"http://127.0.0.1:{port}/v1")
    config = uvicorn.Config(build_app(server, tasks), log_level="warning", lifespan="off")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the scripted policy server did not start")
        time.sleep(0.02)
    try:
        yield server
    finally:
        uv.should_exit = True
        uv.force_exit = True
        thread.join(timeout=10)
        sock.close()
