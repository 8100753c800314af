"""Task rows against the environment's current prompt and tools: `stategym tasks fill`
(app/cli/tasks.py) writes them in, `stategym tasks check` (and the contract) fails a row whose
copy went stale.

A row carries the policy and every tool schema (`responses_create_params`): what an agent is
offered. After a tool's arguments or the policy change, an old row would still pass every
reward check while offering the old tools; `stale_problems` names that, and `fill` is the fix.
"""

from __future__ import annotations

from typing import Any

from app.sdk.environment import Environment
from app.taskgen.conversation import system_prompt
from app.taskgen.kit import InvalidRow, request_params, validated

SYSTEM_ROLES = ("system", "developer")
# What a hand-written row must carry for `fill` (the expected_* fields as the task needs them).
REQUIRED = ("task_id", "seed", "ground_truth")


def stale_problems(env: Environment, row: dict[str, Any], tools: list[dict[str, Any]]) -> list[str]:
    """Where `row`'s offered prompt and tools differ from `env`'s (`tools`: its schemas); a row
    with no `responses_create_params` offers nothing and is not stale."""
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        return []
    fix = f"run `stategym tasks fill --env {env.name} IN OUT` to write the current ones"
    problems = []
    offered = params.get("tools")
    if offered is not None and _by_name(offered) != _by_name(tools):
        problems.append(
            f"offers tool schemas that differ from the environment's ({_tool_diff(offered, tools)})"
            f": {fix}"
        )
    messages = params.get("input")
    system = [
        m.get("content")
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES
    ]
    if messages is not None and system != [system_prompt(env, row)]:
        problems.append(f"its system prompt is not the environment's policy: {fix}")
    return problems


def _by_name(tools: Any) -> dict[str, Any] | None:
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        return None
    return {str(t.get("name")): t for t in tools}


def _tool_diff(offered: Any, current: list[dict[str, Any]]) -> str:
    old, new = _by_name(offered), _by_name(current)
    if old is None or new is None:
        return "not a list of tool schemas"
    parts = [f"{n} changed" for n in new if n in old and old[n] != new[n]]
    parts += [f"{n} missing" for n in new if n not in old]
    parts += [f"{n} unknown" for n in old if n not in new]
    return ", ".join(parts)


def fill_row(env: Environment, row: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """`row` with the environment's policy and tools filled in: its `prompt` (the user's
    request) becomes `responses_create_params`; a row that has one keeps its messages, with
    the current policy as its system message and the current tools. Other keys stay in place."""
    missing = [k for k in REQUIRED if k not in row]
    params = row.get("responses_create_params")
    if "prompt" in row:
        if not isinstance(row["prompt"], str) or not row["prompt"].strip():
            raise ValueError("prompt must be the user's request, a non-empty string")
        new = request_params(env, row["prompt"], tools, conversation=row.get("user") is not None)
    elif isinstance(params, dict) and isinstance(params.get("input"), list):
        kept = [
            m
            for m in params["input"]
            if not (isinstance(m, dict) and m.get("role") in SYSTEM_ROLES)
        ]
        new = {
            **params,
            "input": [{"role": "system", "content": system_prompt(env, row)}, *kept],
            "tools": tools,
        }
    else:
        missing.insert(1, "prompt")
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    out: dict[str, Any] = {"task_id": row["task_id"], "env": env.name}
    for key, value in row.items():
        if key in ("prompt", "responses_create_params"):
            out.setdefault("responses_create_params", new)
        elif key not in out:
            out[key] = value
    try:
        return validated(out)
    except InvalidRow as exc:
        raise ValueError(str(exc)) from None
