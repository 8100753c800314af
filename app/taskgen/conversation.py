"""Conversational tasks in the generator: the rule a task with a user adds to the policy, the
seed its gold runs on (with the user's script), and the check that the gold asks before it acts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.core.conversation import Turn, UserScript, reply_to, script_seed
from app.sdk.answer import DECLINE_REQUEST
from app.sdk.environment import Environment
from app.sdk.user import MESSAGE_USER


class GoldConversationFailed(AssertionError):
    """The gold of a conversational task acts before the user's yes, or leaves a change unasked."""


# Appended to the policy of a task with a user to talk to (`Draft.user`).
CONVERSATION_RULE = (
    "The user is on the line: message_user sends them a message and returns their reply. Ask "
    "them for what the request leaves out. Before every change to the data, describe the exact "
    "change (naming the record ids) and ask them to confirm; make it only after their explicit "
    "yes."
)


def system_prompt(env: Environment, row: dict[str, Any]) -> str:
    """The system message a task row offers: the policy, with the conversation rule when the
    row has a user to talk to."""
    return f"{env.policy}\n\n{CONVERSATION_RULE}" if row.get("user") is not None else env.policy


def run_seed(task: dict[str, Any]) -> dict[str, Any]:
    """The seed a task's gold runs on: its `seed`, with its user's script when it has one (as
    a served session of the task is seeded: app/core/tasks.py)."""
    user = task.get("user")
    if user is None:
        seed: dict[str, Any] = task["seed"]
        return seed
    return script_seed(task["seed"], UserScript.model_validate(user))


def check_gold_conversation(
    env: Environment,
    task: dict[str, Any],
    user: UserScript,
    writes: Callable[[dict[str, Any]], bool] | None = None,
) -> None:
    """The gold plays the conversation right: the scripted user confirms each change before the
    gold's write that makes it, and every change the user wants is confirmed by the end (unless
    the gold declines: the data forbids a change the user wants, so it is never proposed).
    `writes` says whether a call changes data (default: its tool is not read-only; sql's one
    tool also runs queries, which may come before the yes)."""
    label = f"{task['task_id']} ({task['family']})"
    history: list[Turn] = []
    allowed: set[str] = set()
    for i, gold_call in enumerate(task["ground_truth"]):
        name = gold_call["name"]
        if name == MESSAGE_USER:
            history.append(reply_to(user, history, gold_call["arguments"]["text"]))
            allowed.update(history[-1].confirms)
            continue
        tool = env.tool_named(name)
        writes_data = tool is not None and not tool.read_only and not tool.framework
        if writes_data and writes is not None:
            writes_data = writes(gold_call)
        if writes_data and user.requires_confirmation and name not in allowed:
            raise GoldConversationFailed(
                f"{label}: gold call {i} ({name}) comes before the user's yes"
            )
    stage = history[-1].stage if history else 0
    declines = any(c["name"] == DECLINE_REQUEST for c in task["ground_truth"])
    if stage < len(user.changes) and not declines:
        raise GoldConversationFailed(
            f"{label}: the gold leaves change {stage} of the user's unconfirmed"
        )
