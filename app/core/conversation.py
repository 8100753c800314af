"""The simulated user of a conversational task: its script (the task row's `user` block) and the
scripted user, a pure function of (script, conversation so far, the agent's message).

The scripted user is deterministic, so a replayed conversation gets the same replies (reverify
by replay, fork, rewind and step rewards stay exact). Its rules, in order (docs/conversations.md):
a message that asks to confirm and names a pending change's identifiers confirms it (or, once,
meets a change of mind); one that names a look-alike or misses an identifier is corrected; a
message asking for a fact gets it; anything else gets the user's restated need.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

MAX_MESSAGE_CHARS = 4000
# The framework table a task's script is seeded into (app/sdk/user.py creates it).
USER_TABLE = "stategym_user"
# Words by which an agent asks the user to agree to what it just described.
CONFIRM_CUES = (
    "confirm",
    "proceed",
    "go ahead",
    "shall i",
    "should i",
    "do you want",
    "would you like",
    "is that ok",
    "is that okay",
    "is this ok",
    "is this okay",
    "is that right",
    "is that correct",
    "is this correct",
    "yes/no",
    "yes or no",
    "do you agree",
    "sound good",
    "sounds good?",
    "approve",
)
# Words by which a message asks the user for something (besides a question mark).
ASK_CUES = (
    "please",
    "could you",
    "can you",
    "provide",
    "tell me",
    "share",
    "let me know",
    "what",
    "which",
)
Act = Literal["confirm", "correct", "change_of_mind", "fact", "done", "unclear"]


class UserFact(BaseModel):
    """Something the user knows and tells only when asked."""

    model_config = ConfigDict(extra="forbid")
    key: StrictStr = Field(description="a name for the fact, e.g. order_id")
    value: StrictStr = Field(description="the fact itself (what the LLM user may state)")
    asked_by: list[StrictStr] = Field(
        min_length=1, description="phrases (lowercase) a message asking for the fact contains"
    )
    reply: StrictStr = Field(description="the user's words telling it")


class UserChange(BaseModel):
    """One change the user wants, confirmed before it is made."""

    model_config = ConfigDict(extra="forbid")
    tools: list[StrictStr] = Field(
        min_length=1, description="the writing tools this confirmation allows"
    )
    identifiers: list[StrictStr] = Field(
        min_length=1, description="what a proposal must name, all of them (ids as tools show them)"
    )
    wrong: list[StrictStr] = Field(
        default_factory=list, description="look-alikes: a proposal naming one is corrected"
    )
    yes: StrictStr = Field(description="the reply confirming the change")
    correction: StrictStr = Field(description="the reply to a proposal that gets it wrong")
    change_of_mind: StrictStr | None = Field(
        default=None,
        description="if set, the reply to the first right proposal: the user changes their "
        "mind (nothing is confirmed) and the next change of the list is what they want",
    )


class UserScript(BaseModel):
    """A task's `user` block: the user's goal, what they know, and how they reveal it."""

    model_config = ConfigDict(extra="forbid")
    goal: StrictStr = Field(description="what the user wants, in words (the LLM user's brief)")
    facts: list[UserFact] = Field(default_factory=list)
    changes: list[UserChange] = Field(
        default_factory=list, description="the changes the user wants, in order"
    )
    unclear: StrictStr = Field(
        description="the reply to a message the user cannot place (restates the need, no facts)"
    )
    done: StrictStr = Field(
        default="That's everything, thank you.",
        description="the reply once every change is confirmed and nothing is asked",
    )
    requires_confirmation: StrictBool = Field(
        default=True,
        description="the policy requires the user's yes before every change: a write before "
        "it is a violation and the reward is 0",
    )


def script_seed(seed: Mapping[str, Any] | None, script: UserScript) -> dict[str, Any]:
    """`seed` with the script as the one row of USER_TABLE: the user is part of the seeded
    state, so every replay, fork and cached image of the task has it."""
    base = dict(seed or {})
    rows = dict(base.get("rows") or {})
    rows[USER_TABLE] = [{"id": 1, "script": script.model_dump_json()}]
    base["rows"] = rows
    return base


@dataclass(frozen=True)
class Turn:
    """What the user made of one message: its reply and the resulting conversation state."""

    reply: str
    act: Act
    # The tools the user allowed with this reply (a confirmation), else empty.
    confirms: tuple[str, ...]
    # The index of the change the user wants next (len(changes): all were confirmed).
    stage: int


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("#", " ").split())


def names(message: str, identifier: str) -> bool:
    """Whether `message` names `identifier` as a whole token (case and a leading # ignored)."""
    core = _normal(identifier)
    if not core:
        return False
    return re.search(rf"(?<![a-z0-9]){re.escape(core)}(?![a-z0-9])", _normal(message)) is not None


def asks(message: str) -> bool:
    text = _normal(message)
    return "?" in text or any(cue in text for cue in ASK_CUES)


def asks_to_confirm(message: str) -> bool:
    text = _normal(message)
    return any(cue in text for cue in CONFIRM_CUES)


def reply_to(script: UserScript, history: Sequence[Turn], message: str) -> Turn:
    """The scripted user's turn: a pure function of the script, the turns so far and `message`."""
    stage = history[-1].stage if history else 0
    pending = script.changes[stage:]
    if pending and asks_to_confirm(message):
        named_any = any(names(message, i) for c in pending for i in (*c.identifiers, *c.wrong))
        if named_any:
            return _proposal(script, stage, message)
    text = _normal(message)
    asked = [f for f in script.facts if asks(message) and any(p in text for p in f.asked_by)]
    if asked:
        return Turn(" ".join(f.reply for f in asked), "fact", (), stage)
    if not pending:
        return Turn(script.done, "done", (), stage)
    return Turn(script.unclear, "unclear", (), stage)


def _proposal(script: UserScript, stage: int, message: str) -> Turn:
    """A proposal of one or more pending changes: confirmed in order while each is named right."""
    confirms: list[str] = []
    replies: list[str] = []
    while stage < len(script.changes):
        change = script.changes[stage]
        right = all(names(message, i) for i in change.identifiers) and not any(
            names(message, w) for w in change.wrong
        )
        if not right:
            break
        if change.change_of_mind is not None:
            # Nothing confirmed by this reply: the user now wants the next change instead.
            return Turn(
                " ".join([*replies, change.change_of_mind]),
                "change_of_mind",
                tuple(confirms),
                stage + 1,
            )
        confirms.extend(change.tools)
        replies.append(change.yes)
        stage += 1
    if confirms:
        return Turn(" ".join(replies), "confirm", tuple(dict.fromkeys(confirms)), stage)
    return Turn(script.changes[stage].correction, "correct", (), stage)
