"""Tool-call names in `response.output`, as the environment knows them.

An MCP client names a server's tools `mcp__<server>__<tool>` (Claude Code, Codex, NeMo Gym's
MCP harnesses); scoring reads plain tool names, so verify maps them back first. Only a tail that
is one of the environment's tools is taken, so a server name holding `__` still maps right and
an unrelated name is left alone. The echoed response keeps the names the model emitted.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

_MCP_PREFIX = "mcp__"


def plain_tool_name(name: str, tool_names: Collection[str]) -> str:
    """`mcp__<server>__<tool>` -> `<tool>` when `<tool>` is a known tool; else `name`."""
    if not name.startswith(_MCP_PREFIX) or name in tool_names:
        return name
    rest = name[len(_MCP_PREFIX) :]
    at = rest.find("__")
    while at != -1:
        if rest[at + 2 :] in tool_names:
            return rest[at + 2 :]
        at = rest.find("__", at + 1)
    return name


def with_plain_tool_names(response: Any, tool_names: Collection[str]) -> Any:
    """A copy of `response` whose `function_call` items carry plain names (or it, unchanged)."""
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        return response
    output = []
    changed = False
    for item in response["output"]:
        is_call = isinstance(item, Mapping) and item.get("type") == "function_call"
        if is_call and isinstance(item.get("name"), str):
            plain = plain_tool_name(item["name"], tool_names)
            if plain != item["name"]:
                item, changed = {**item, "name": plain}, True
        output.append(item)
    return {**response, "output": output} if changed else response
