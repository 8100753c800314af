"""What every episode adapter shares, client side or server side: the terminal tools, `finish`,
the prompt of a task row, and the trace verify reads. Imports nothing beyond the standard library
and app/jsonio.py, so client-side adapters (TRL) stay light."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping
from typing import Any

FINISH_TOOL = "finish"
# The framework's answer tools (app/sdk): terminal where an environment has them.
ANSWER_TOOLS = ("submit_answer", "decline_request")
_FINISH_DESCRIPTION = (
    "End the conversation: call this once you are done. `message` is your final reply to the "
    "user (state the answer there when the user asked a question). The episode is then scored "
    "on the final state of the database."
)


def terminal_tools(tool_names: Collection[str]) -> frozenset[str]:
    """The tools whose successful call ends an episode: `finish` always, and the answer tools the
    environment actually has (so this holds before and after they are added to an env)."""
    return frozenset({FINISH_TOOL, *(name for name in ANSWER_TOOLS if name in tool_names)})


def finish_schema() -> dict[str, Any]:
    """`finish` as an OpenAI function tool, in the shape of `Environment.tool_schemas()`."""
    return {
        "type": "function",
        "name": FINISH_TOOL,
        "description": _FINISH_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "description": "Your final reply to the user.",
                }
            },
            "required": [],
            "additionalProperties": False,
        },
        "strict": False,
    }


def prompt_messages(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """The row's `responses_create_params.input` as chat messages `[{role, content}]`."""
    raw = (row.get("responses_create_params") or {}).get("input") or []
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    messages = []
    for item in raw:
        if isinstance(item, Mapping) and isinstance(item.get("content"), str):
            messages.append({"role": str(item.get("role", "user")), "content": item["content"]})
    return messages


class Trace:
    """The episode's calls as a Responses API `response`, which verify reads."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, arguments: Mapping[str, Any], output: str) -> None:
        """One call and the text its tool answered (what the model saw)."""
        call_id = f"call_{len(self.items) // 2}"
        self.items.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(arguments),
            }
        )
        self.items.append({"type": "function_call_output", "call_id": call_id, "output": output})

    def response(self, message: str) -> dict[str, Any]:
        output = list(self.items)
        if message:
            content = [{"type": "output_text", "text": message}]
            output.append({"type": "message", "role": "assistant", "content": content})
        return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "output": output}
