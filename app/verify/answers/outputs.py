"""Reading the agent's final answer out of an OpenAI Responses object and checking it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.verify.answers import text as answers


def final_assistant_text(response: Any) -> str:
    """Text of the last assistant `message` item in `response.output` ('' when there is none)."""
    if not isinstance(response, Mapping):
        return ""
    output = response.get("output")
    if not isinstance(output, list):
        return ""
    for item in reversed(output):
        if not isinstance(item, Mapping) or item.get("type", "message") != "message":
            continue
        if item.get("role", "assistant") != "assistant":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") in ("output_text", "text")
            )
    return ""


def missing_outputs(expected: Sequence[str], answer: str, declared: Any = None) -> list[str]:
    """Expected outputs the answer does not state as a whole token of their kind, by value
    (the text path's one tokenizer: app/verify/answers/text.py)."""
    return answers.missing_outputs(expected, answer, declared)
