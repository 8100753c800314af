"""The framework's `message_user` tool and its tables: the conversation with the simulated user
is state, like the answer.

Every environment gets `message_user(text)` (a reserved name). Its output is the user's reply. The
user's script is seeded from the task's `user` block into the `stategym_user` table; each message
and reply is a row of `stategym_conversation`, written in the call's transaction, so it is
step-logged, forked, rewound, exported and replayed like any other write, and verify reads what
the user confirmed from it (app/verify/answers/confirmation.py). The reply comes from the session's
`UserSimulator`: the scripted user (app/core/conversation.py) unless an LLM user is configured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from pydantic import Field, StrictStr
from sqlalchemy import Column, Integer, MetaData, Table, Text, func, insert, select
from sqlalchemy.orm import Session

from app.core.conversation import MAX_MESSAGE_CHARS, Turn, UserScript, reply_to
from app.sdk.compare_spec import CONVERSATION_TABLE, USER_TABLE
from app.sdk.tool import Tool, ToolArgs, ToolContext, ToolError

MESSAGE_USER = "message_user"
# A conversation's budget: past it the user stops answering (the session's disk and the
# simulator's cost are bounded).
MAX_TURNS = 60
NO_USER_REPLY = (
    "Everything I need is in my request; please go ahead with exactly what I asked, or tell me "
    "why you cannot."
)
DESCRIPTION = (
    "Send a message to the user and get their reply. Use it to ask for information the request "
    "leaves out, and, when the policy asks for it, to get the user's explicit confirmation (yes) "
    "before every change: describe the exact change, naming the record ids, and ask them to "
    "confirm. Do not use it to give the final answer (use submit_answer or decline_request)."
)


@dataclass(frozen=True)
class Exchange:
    """One message of the agent and what the user made of it."""

    message: str
    turn: Turn


class SimulatorFailed(Exception):
    """The user simulator gave no usable reply (timeout, refusal, malformed): the sample is
    masked, not scored (app/verify/answers/confirmation.py)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class UserSimulator(Protocol):
    """Plays the user of a conversational task."""

    # Recorded with every turn ("scripted", "llm:<model>").
    name: str

    def reply(self, script: UserScript, history: Sequence[Exchange], message: str) -> Turn: ...


class ScriptedUser:
    """The deterministic user: the same conversation always gets the same replies."""

    name = "scripted"

    def reply(self, script: UserScript, history: Sequence[Exchange], message: str) -> Turn:
        return reply_to(script, [e.turn for e in history], message)


SCRIPTED = ScriptedUser()


def user_tables(metadata: MetaData) -> tuple[Table, Table]:
    """The script and conversation tables in `metadata` (added once, like the answer table)."""
    script = metadata.tables.get(USER_TABLE)
    if script is None:
        script = Table(
            USER_TABLE,
            metadata,
            Column("id", Integer, primary_key=True, autoincrement=False),
            Column("script", Text, nullable=False),
        )
    conversation = metadata.tables.get(CONVERSATION_TABLE)
    if conversation is None:
        conversation = Table(
            CONVERSATION_TABLE,
            metadata,
            Column("turn", Integer, primary_key=True, autoincrement=False),
            Column("message", Text, nullable=False),
            Column("reply", Text, nullable=False),
            Column("act", Text, nullable=False),
            Column("confirms", Text, nullable=False),
            Column("stage", Integer, nullable=False),
            Column("simulator", Text, nullable=False),
            Column("failure", Text, nullable=True),
            Column("sent_at", Text, nullable=True),
        )
    return script, conversation


def read_script(db: Any, table: Table) -> UserScript | None:
    row = db.execute(select(table.c.script)).first()
    return None if row is None else _parsed(row[0])


@lru_cache(maxsize=256)
def _parsed(text: str) -> UserScript:
    """A script parsed once per process (a session sends it up to MAX_TURNS times)."""
    return UserScript.model_validate_json(text)


def read_exchanges(db: Any, table: Table) -> list[Exchange]:
    """The conversation so far, in order (a failed turn included: it has no stage change)."""
    rows = db.execute(
        select(
            table.c.message, table.c.reply, table.c.act, table.c.confirms, table.c.stage
        ).order_by(table.c.turn)
    ).all()
    return [Exchange(m, Turn(r, a, tuple(json.loads(c)), s)) for m, r, a, c, s in rows]


def message_user_tool(metadata: MetaData) -> Tool:
    script_table, conversation = user_tables(metadata)

    class MessageUserArgs(ToolArgs):
        text: StrictStr = Field(
            min_length=1,
            max_length=MAX_MESSAGE_CHARS,
            description="Your message to the user.",
        )

    def message_user(db: Session, args: Any, ctx: ToolContext) -> dict[str, Any]:
        count = db.execute(select(func.count()).select_from(conversation)).scalar_one()
        if count >= MAX_TURNS:
            raise ToolError(
                f"the conversation reached its limit of {MAX_TURNS} messages",
                hint="Finish the task with what you know.",
                code="conversation_limit",
            )
        script = read_script(db, script_table)
        simulator: UserSimulator = ctx.user or SCRIPTED
        failure = None
        if script is None:
            stage = 0
            turn = Turn(NO_USER_REPLY, "unclear", (), stage)
        else:
            history = read_exchanges(db, conversation)
            try:
                turn = simulator.reply(script, history, args.text)
            except SimulatorFailed as exc:
                failure = exc.kind
                stage = history[-1].turn.stage if history else 0
                turn = Turn("(the user did not answer)", "unclear", (), stage)
        db.execute(
            insert(conversation).values(
                turn=count + 1,
                message=args.text,
                reply=turn.reply,
                act=turn.act,
                confirms=json.dumps(list(turn.confirms)),
                stage=turn.stage,
                simulator=simulator.name if script is not None else "none",
                failure=failure,
                sent_at=ctx.now.isoformat(),
            )
        )
        return {"reply": turn.reply}

    return Tool(
        name=MESSAGE_USER,
        description=DESCRIPTION,
        args_model=MessageUserArgs,
        fn=message_user,
        framework=True,
    )
