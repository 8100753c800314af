"""A scripted "model" for wiring checks: an OpenAI Responses endpoint that plays each task's gold.

    python scripts/gold_policy_server.py --port 8900 [--tasks envs/retail/tasks.jsonl ...]

Point NeMo Gym's `openai_model` at it (`policy_base_url: http://127.0.0.1:8900/v1`) to run the
whole launcher + collector flow without a model: for a conversation whose user text is a known
task's, it answers the task's next gold function call (one per turn, counting the
`function_call_output` items already in the input), then the gold answer. Every rollout should
then earn 1.0, which tells a wiring fault from a policy's mistake. Unknown conversations get a
plain "I cannot help with that." so the agent stops.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

REPO = Path(__file__).resolve().parents[1]
_ids = itertools.count(1)


def _user_text(messages: Any) -> str:
    """The user turns of a Responses `input` (a string, or message items), joined."""
    if isinstance(messages, str):
        return messages.strip()
    texts = []
    for item in messages or []:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(str(content or "").strip())
    return "\n".join(texts)


def load_index(paths: list[Path]) -> dict[str, dict[str, Any]]:
    index = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                index[_user_text(row["responses_create_params"]["input"])] = row
    return index


def _function_call(call: dict[str, Any]) -> dict[str, Any]:
    n = next(_ids)
    arguments = call.get("arguments", {})
    return {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": f"call_{n}",
        "name": call["name"],
        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        "status": "completed",
    }


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def next_output(index: dict[str, dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("input")
    row = index.get(_user_text(messages))
    if row is None:
        return _message("I cannot help with that.")
    done = sum(
        1
        for item in (messages if isinstance(messages, list) else [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    )
    gold = row.get("ground_truth") or []
    if done < len(gold):
        return _function_call(gold[done])
    return _message("Done. " + " ".join(row.get("expected_outputs") or []))


def create_app(index: dict[str, dict[str, Any]]) -> FastAPI:
    app = FastAPI(title="StateGym gold policy")

    @app.post("/v1/responses")
    async def responses(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"resp_{next(_ids)}",
            "object": "response",
            "created_at": 0,
            "model": body.get("model") or "gold-policy",
            "output": [next_output(index, body)],
            "parallel_tool_calls": False,
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "status": "completed",
        }

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "gold-policy", "object": "model"}]}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument(
        "--tasks", type=Path, nargs="*", help="task files (default: envs/*/tasks.jsonl)"
    )
    args = parser.parse_args()
    paths = args.tasks or sorted(REPO.glob("envs/*/tasks.jsonl"))
    uvicorn.run(create_app(load_index(paths)), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
