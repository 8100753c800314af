"""One rollout, as NeMo Gym's `simple_agent` plays it: seed, model turns and tool calls until the
model stops calling tools (or `max_steps` calls), verify with the whole trace, close.

The session's cookie lives in a client of the rollout's own (over the run's shared connection
pool), so concurrent rollouts never see each other's sessions. A tool's answer is passed to the
model as the body text, whatever the status (NeMo Gym does the same). A model failure masks the
rollout (`mask_sample`, `failure_kind: "model_error"`): it says nothing about the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from app.evaluation.model import Conversation, ModelError, parsed_arguments
from app.integrations.rollout import Trace, prompt_messages

MODEL_ERROR = "model_error"
NOT_JSON = "Error: the arguments of this call are not a JSON object; nothing was done."


class _Shared(httpx.AsyncBaseTransport):
    """The run's transport, lent to one rollout's client: closing that client keeps it open."""

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        self.transport = transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.transport.handle_async_request(request)

    async def aclose(self) -> None:
        """Left open: the run closes it once every rollout is done."""


class EnvironmentRefused(RuntimeError):
    """The environment server refused the seed or the verify: the run stops, saying why."""


async def play(
    transport: httpx.AsyncBaseTransport,
    base_url: str,
    row: Mapping[str, Any],
    conversation: Conversation,
    *,
    max_steps: int,
) -> dict[str, Any]:
    """Play `row` once; the verify response (a NeMo Gym rollout row), or a masked row."""
    async with httpx.AsyncClient(
        transport=_Shared(transport), base_url=base_url, timeout=300
    ) as http:
        seeded = await http.post("/seed_session", json=dict(row))
        if seeded.status_code != 200:
            raise EnvironmentRefused(f"seed of {row.get('task_id')}: {seeded.text[:300]}")
        trace = Trace()
        conversation.start(prompt_messages(row))
        final, steps = "", 0
        try:
            while steps < max_steps:
                turn = await conversation.turn()
                final = turn.text
                if not turn.calls:
                    break
                for call in turn.calls:
                    steps += 1
                    arguments = parsed_arguments(call)
                    if arguments is None:
                        output = NOT_JSON
                        trace.items.append(_raw_call(call.call_id, call.name, call.arguments))
                        trace.items.append(_output(call.call_id, output))
                    else:
                        output = (await http.post(f"/{call.name}", json=arguments)).text
                        trace.items.append(_raw_call(call.call_id, call.name, call.arguments))
                        trace.items.append(_output(call.call_id, output))
                    conversation.tool_result(call, output)
        except ModelError as exc:
            await http.post("/close_session", json={})
            return _masked(row, trace, str(exc))
        verified = await http.post("/verify", json={**row, "response": trace.response(final)})
        await http.post("/close_session", json={})
        if verified.status_code != 200:
            raise EnvironmentRefused(f"verify of {row.get('task_id')}: {verified.text[:300]}")
        result: dict[str, Any] = verified.json()
        result["eval_steps"] = steps
        return result


def _raw_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def _output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _masked(row: Mapping[str, Any], trace: Trace, reason: str) -> dict[str, Any]:
    return {
        **row,
        "response": trace.response(""),
        "reward": 0.0,
        "mask_sample": True,
        "failure_kind": MODEL_ERROR,
        "failure_reason": f"the model endpoint failed: {reason}",
    }
