"""The workplace task generator: the plan of story families and the self-checking builder.

`TASKGEN` is what `stategym tasks generate --env workplace` draws from (docs/generating_tasks.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.sdk.taskgen import TaskGenerator, build_row
from envs.workplace import ENVIRONMENT
from envs.workplace.taskgen import acceptances, hard, multi, simple, talk
from envs.workplace.taskgen.details import omissions
from envs.workplace.taskgen.kit import NAMES, PHRASING, Draft, Story

Family = Callable[[Story, int], Draft]
# (family, variants k = 0..n-1), in file order.
PLAN: list[tuple[Family, int]] = [
    (simple.lookup_deal, 2), (simple.advance_deal, 3), (simple.task_status, 2),
    (simple.refuse_skip_stage, 1), (simple.refuse_reopen, 1), (simple.refuse_inactive, 1),
    (simple.file_email, 2), (simple.set_amount, 2), (simple.reassign_task, 2),
    (simple.refuse_external, 1), (simple.refuse_not_owner, 1), (simple.conflict, 2),
    (simple.decline, 1), (simple.reschedule, 2), (simple.reply, 3), (simple.win_deal, 2),
    (simple.schedule, 5), (simple.forward_to_contact, 2), (simple.cancel_and_notify, 1),
    (multi.triage, 2), (multi.handover, 2), (multi.customer_call, 4), (multi.kickoff, 3),
    # Appended (not grouped above) so earlier task ids stay stable for verifier cases.
    (simple.lookup_pipeline, 1), (simple.lookup_free_time, 1),
    (simple.refuse_won_without_amount, 1), (simple.lookup_open_deals, 1),
    (simple.refuse_not_organizer, 1), (simple.refuse_closed_deal, 1),
    # The hard tier (difficulty 5): several intents that interact (hard.py).
    (hard.account_handover, 2), (hard.quote_close, 2),
    # Conversations with the user (talk.py): facts over turns, confirm or correct, change of mind.
    (talk.talk_deal_amount, 2), (talk.talk_task_pick, 2), (talk.talk_reassign_mind, 2),
    (hard.pipeline_review, 2),
    # The hard tier's many decisions: acceptances judged on facts of three tools (acceptances.py).
    (acceptances.acceptance_sweep, 2),
]  # fmt: skip


def build_task(
    index: int,
    fn: Family,
    k: int,
    rng: random.Random | None = None,
    names: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """One self-checked task (a refused request is really refused by the tools, with their
    code, and the gold declines it with the rule's reason code; a lookup submits its answer);
    without `rng`/`names` the story draws them from its index."""
    story = Story(index, rng, names)
    story.shipped_outcome = not fn.__name__.startswith(("refuse", "conflict"))
    draft = fn(story, k)
    seed = story.seed()
    draft = replace(draft, omissions=omissions(draft.prompt, draft.gold, seed))
    assert draft.writes or draft.answer or draft.decline, f"{draft.family}: no answer"
    return build_row(ENVIRONMENT, index, draft, seed, after=_check_slots)


def _check_slots(task: dict[str, Any], results: list[Any]) -> None:
    """A free slot the gold looked up is the one it then books (the story's busy times fit)."""
    slot = None
    for gold_call, result in zip(task["ground_truth"], results, strict=True):
        if gold_call["name"] == "find_free_slot":
            slot = result["start"]
        elif gold_call["name"] in ("create_event", "reschedule_event") and slot is not None:
            assert result["start"] == slot, (task["task_id"], result["start"], slot)


# The shared driver (stategym tasks generate) draws from these; the shipped set is every PLAN
# variant once, story i drawn from the whole name pool (docs/generating_tasks.md).
TASKGEN = TaskGenerator(
    env=ENVIRONMENT,
    plan=PLAN,
    names=NAMES,
    build=build_task,
    shipped_names=NAMES,
    phrasing=PHRASING,
)
task_lines = TASKGEN.shipped
