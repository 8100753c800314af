"""A scripted OpenAI-compatible *user* model on 127.0.0.1 for the LLM user's tests.

It reads the facts from the system prompt the LLM user sends and answers JSON; the model name
picks the behaviour:
  faithful -> a question gets the first fact (declared), a proposal gets "Yes, please do that."
  stubborn -> like faithful, but never takes a message as a proposal (nothing is confirmed)
  leaky    -> states every fact's value without declaring it (the guard refuses: masked)
  quitter  -> "Thanks, goodbye!" while a change is pending (the guard refuses: masked)
  garbage  -> text that is no JSON (malformed: masked)
  broken   -> HTTP 500 (masked)
  slow     -> answers after 3 s (past the test's timeout: masked)
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse


def _answer(model: str, system: str, message: str) -> str:
    found = re.search(r"Facts you know .*?: (\{.*?\})\n", system, re.S)
    facts: dict[str, str] = json.loads(found.group(1)) if found else {}
    proposal = any(w in message.lower() for w in ("proceed", "confirm"))
    if model == "leaky":
        return json.dumps(
            {
                "reply": "It's " + ", ".join(facts.values()),
                "message_kind": "other",
                "facts_told": [],
            }
        )
    if model == "quitter":
        return json.dumps({"reply": "Thanks, goodbye!", "message_kind": "other", "facts_told": []})
    if model == "garbage":
        return "Sure thing, happy to help!"
    if proposal:
        kind = "other" if model == "stubborn" else "proposal"
        return json.dumps({"reply": "Yes, please do that.", "message_kind": kind})
    key, value = next(iter(facts.items()), ("", ""))
    return json.dumps(
        {"reply": f"Sure: {value}.", "message_kind": "question", "facts_told": [key] if key else []}
    )


def build_app(seen: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> JSONResponse | PlainTextResponse:
        body = await request.json()
        seen.append(body)
        model = body["model"]
        if model == "broken":
            return PlainTextResponse("boom", status_code=500)
        if model == "slow":
            await asyncio.sleep(3)
        messages = body["messages"]
        content = _answer(model, messages[0]["content"], messages[-1]["content"])
        return JSONResponse(
            {
                "id": "chatcmpl-user",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
            }
        )

    return app


@contextmanager
def running_user_model() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(base URL ending in /v1, the request bodies seen) of a user model on a free port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    seen: list[dict[str, Any]] = []
    config = uvicorn.Config(build_app(seen), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the user model server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.should_exit = True
        server.force_exit = True
        thread.join(timeout=10)
        sock.close()
