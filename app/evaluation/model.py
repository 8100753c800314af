"""The policy model behind an OpenAI-compatible endpoint: one assistant turn at a time.

Two wire formats, the ones vLLM, SGLang and OpenAI serve: Chat Completions with `tools`
(`--api chat`, the default) and the Responses API (`--api responses`). Either way a turn is the
assistant's text and the tool calls it asks for; the conversation is kept in the format the
endpoint speaks, so nothing is lost between turns. Needs the `openai` package (the `eval`
extra); the server never imports it. Requests go through the client's `post` (its retries,
auth, errors and typed answers) with the body as built here: the typed `create` methods walk
every message and tool schema on each turn, which took most of eval's CPU
(bench/eval_overhead.py, docs/eval.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["chat", "responses"]


class ModelError(RuntimeError):
    """The model endpoint failed (after the client's retries): the rollout is masked, not 0."""


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str  # the model's raw JSON text


@dataclass
class Turn:
    text: str
    calls: list[ToolCall] = field(default_factory=list)


def chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Task-row tools (Responses format) as Chat Completions tools."""
    out = []
    for tool in tools:
        function = {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("parameters", {"type": "object", "properties": {}}),
        }
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


class Conversation:
    """One rollout's exchange with the model, in the endpoint's own format."""

    def __init__(
        self, client: Any, model: str, api: Api, tools: list[dict[str, Any]], *, temperature: float
    ) -> None:
        self.client, self.model, self.api = client, model, api
        self.tools = chat_tools(tools) if api == "chat" else [dict(t) for t in tools]
        self.temperature = temperature
        self.items: list[dict[str, Any]] = []

    def start(self, messages: Sequence[Mapping[str, str]]) -> None:
        self.items = [{"role": m["role"], "content": m["content"]} for m in messages]

    async def turn(self) -> Turn:
        """Ask the model for its next turn; the turn is added to the conversation."""
        try:
            if self.api == "chat":
                return await self._chat_turn()
            return await self._responses_turn()
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - any client failure masks the rollout
            raise ModelError(f"{type(exc).__name__}: {str(exc)[:300]}") from exc

    def tool_result(self, call: ToolCall, output: str) -> None:
        """What the tool answered, as the model will read it next turn."""
        if self.api == "chat":
            self.items.append({"role": "tool", "tool_call_id": call.call_id, "content": output})
        else:
            self.items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": output}
            )

    async def _chat_turn(self) -> Turn:
        from openai.types.chat import ChatCompletion

        body = {
            "model": self.model,
            "messages": self.items,
            "tools": self.tools,
            "temperature": self.temperature,
        }
        answer = await self.client.post("/chat/completions", body=body, cast_to=ChatCompletion)
        if not answer.choices:
            raise ModelError("the model answered no choices")
        message = answer.choices[0].message
        calls = [
            ToolCall(c.id, c.function.name, c.function.arguments or "")
            for c in (message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        said: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            said["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        self.items.append(said)
        return Turn(message.content or "", calls)

    async def _responses_turn(self) -> Turn:
        from openai.types.responses import Response

        body = {
            "model": self.model,
            "input": self.items,
            "tools": self.tools,
            "temperature": self.temperature,
        }
        answer = await self.client.post("/responses", body=body, cast_to=Response)
        text, calls = [], []
        for item in answer.output or []:
            kind = getattr(item, "type", None)
            if kind == "function_call":
                calls.append(ToolCall(item.call_id, item.name, item.arguments or ""))
                self.items.append(
                    {
                        "type": "function_call",
                        "call_id": item.call_id,
                        "name": item.name,
                        "arguments": item.arguments or "",
                    }
                )
            elif kind == "message":
                part = "".join(
                    getattr(c, "text", "") or "" for c in (getattr(item, "content", None) or [])
                )
                text.append(part)
                self.items.append({"role": "assistant", "content": part})
        return Turn("".join(text), calls)


def parsed_arguments(call: ToolCall) -> dict[str, Any] | None:
    """The call's arguments as an object, or None when the model wrote no JSON object (the call
    then never reaches the server, as with NeMo Gym's agents)."""
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def make_client(base_url: str, api_key: str | None, timeout: float, retries: int) -> Any:
    """An `openai.AsyncOpenAI` for the endpoint (imported here: the `eval` extra)."""
    try:
        from openai import AsyncOpenAI
    except ImportError:  # pragma: no cover - the CLI says how to install it
        raise ModelError(
            "stategym eval needs the openai package: pip install 'stategym[eval]'"
        ) from None
    return AsyncOpenAI(
        base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=retries
    )
