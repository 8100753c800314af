"""Conversation-aware verify: every change made only after the user confirmed it.

The conversation is state (app/sdk/user.py): each `message_user` call wrote one row of the
conversation table, with the tools the user's reply allowed. The step log orders those rows
against the session's writes: the k-th step that wrote the conversation table is turn k. A step
that changed the environment's tables through a tool no earlier reply allowed is an unconfirmed
write; when the task's user requires confirmation (the policy does), the reward is 0. A turn the
simulator failed to answer masks the sample instead of scoring it (`failure_kind`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from app.core.conversation import UserScript
from app.sdk.compare_spec import CONVERSATION_TABLE, FRAMEWORK_TABLES
from app.storage.steplog import StepRow

FAILURE_KIND = "user_simulator"


@dataclass(frozen=True)
class Conversation:
    """What verify found in the conversation: evidence, and whether it costs the reward."""

    evidence: dict[str, Any]
    unconfirmed: list[dict[str, Any]] = field(default_factory=list)
    # The user's simulator failed on a turn: the sample is masked, not scored.
    failure: str | None = None
    requires_confirmation: bool = False

    @property
    def voids(self) -> bool:
        return self.requires_confirmation and bool(self.unconfirmed)


def _turns(conn: Connection, tables: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    table = tables.get(CONVERSATION_TABLE)
    if table is None:
        return []
    columns = (table.c.confirms, table.c.act, table.c.simulator, table.c.failure)
    return [tuple(r) for r in conn.execute(select(*columns).order_by(table.c.turn))]


def check_conversation(
    script: UserScript | None,
    conn: Connection,
    tables: Mapping[str, Any],
    steps: Sequence[StepRow],
    counts: Mapping[int, Mapping[str, int]],
    logged: bool,
    changed_data: bool,
) -> Conversation | None:
    """The conversation's verdict; None for a task without a user (nothing to check).

    `changed_data`: whether the final state differs from the seeded one. Without a step log
    (an unlogged replay: `tasks check`'s probes) the order of writes and replies is unknown;
    then data changed while the user confirmed nothing is the one unconfirmed write seen."""
    if script is None:
        return None
    turns = _turns(conn, tables)
    evidence: dict[str, Any] = {
        "turns": len(turns),
        "simulator": sorted({t[2] for t in turns}) or None,
        "changes_confirmed": sum(1 for t in turns if t[1] == "confirm"),
        "changes_wanted": len(script.changes),
        "requires_confirmation": script.requires_confirmation,
    }
    failures = [t[3] for t in turns if t[3]]
    if failures:
        evidence["simulator_failures"] = failures[:5]
    failure = failures[0] if failures else None
    if not logged or not steps:
        confirmed = any(json.loads(t[0]) for t in turns)
        unseen: list[dict[str, Any]] = (
            [{"step": None, "tool": None}] if changed_data and not confirmed else []
        )
        evidence["confirmation_checked"] = "unordered"
        evidence["unconfirmed_writes"] = unseen
        return Conversation(evidence, unseen, failure, script.requires_confirmation)
    tool_of = {s.idx: s.tool for s in steps}
    allowed: set[str] = set()
    turn_steps = sorted(step for step, per in counts.items() if CONVERSATION_TABLE in per)
    confirms_at = {step: turns[k][0] for k, step in enumerate(turn_steps) if k < len(turns)}
    unconfirmed: list[dict[str, Any]] = []
    for step in sorted(counts):
        if step in confirms_at:
            allowed.update(json.loads(confirms_at[step]))
        if not set(counts[step]) - FRAMEWORK_TABLES:
            continue  # changed only the framework's tables (a message, an answer)
        tool = tool_of.get(step)
        if tool not in allowed:  # None: a change no logged call made
            unconfirmed.append({"step": step, "tool": tool})
    evidence["confirmation_checked"] = True
    evidence["unconfirmed_writes"] = unconfirmed[:20]
    return Conversation(evidence, unconfirmed, failure, script.requires_confirmation)
