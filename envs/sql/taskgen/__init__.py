"""The sql task generator: story families, the plan of how many of each, and the builder.

`TASKGEN` is what `stategym tasks generate --env sql` draws from (docs/generating_tasks.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.sdk.taskgen import TaskGenerator, build_row
from envs.sql import ENVIRONMENT
from envs.sql.taskgen import hard, multi, reads, refusals, talk, writes
from envs.sql.taskgen.details import omissions
from envs.sql.taskgen.kit import PHRASING, Ctx, Draft, SqlDraft, Story, name_refused, names_pool

Family = Callable[[Ctx], Draft]
# (family, how many variants k = 0..n-1), in file order.
PLAN: list[tuple[Family, int]] = [
    (reads.answer_headcount, 3), (reads.answer_manager, 2), (reads.answer_top_hours, 2),
    (reads.answer_unpaid, 1), (reads.answer_top_salary, 2), (refusals.refuse_delete_employee, 1),
    (refusals.refuse_paid_invoice, 2), (refusals.refuse_big_raise, 2),
    (refusals.refuse_salary_rewrite, 1),
    (writes.offboard, 3), (writes.give_raise, 3), (writes.fix_emails, 2), (writes.approve_week, 2),
    (writes.reject_overbooked, 2), (writes.mark_paid, 2), (writes.void_invoice, 2),
    (writes.invoice_project, 2), (writes.archive_rejected, 2), (writes.reassign_reports, 2),
    (writes.transfer, 2), (writes.onboard, 2), (writes.cost_of_living, 1),
    (multi.month_end, 1), (multi.team_lead_leaves, 1), (multi.paid_and_refused, 1),
    (multi.raise_and_refuse, 1), (multi.close_project, 1),
    # Appended so earlier task ids stay stable (verifier cases name them).
    (reads.answer_reports, 1), (refusals.refuse_delete_invoice, 1),
    (refusals.refuse_approve_rejected, 1),
    (hard.hard_quarter_close, 1), (hard.hard_payroll_review, 1),
    # Conversations with the colleague (talk.py): facts over turns, confirm or correct, a change
    # of mind.
    (talk.talk_record_payment, 2), (talk.talk_raise_namesake, 2), (talk.talk_void_mind, 2),
    (hard.hard_customer_month, 1),
]  # fmt: skip


def build_task(
    index: int, fn: Family, k: int, rng: random.Random, names: list[tuple[str, str]]
) -> dict[str, Any]:
    """One self-checked task: story `index` (its id block), variant k, names popped from `names`.
    Every gold call must succeed (run_sql answers a refused statement with an error); a task
    that only reads ends with an answer or a decline (its gold's last call, and the row's
    `expected_answer` / `expected_decline`)."""
    story = Story(index, rng, names)
    draft = fn(Ctx(story, k))
    assert draft.writes or draft.answer or draft.answer_from or draft.decline, draft.family
    seed = story.seed()
    draft = replace(draft, omissions=omissions(draft.prompt, draft.gold, seed))
    refused = draft.refused if isinstance(draft, SqlDraft) else ()
    return build_row(
        ENVIRONMENT,
        index,
        draft,
        seed,
        writes=_writes,
        after=lambda task, _outputs: name_refused(task, refused),
    )


# The shared driver (stategym tasks generate) draws from these; see docs/generating_tasks.md.
def _writes(call: dict[str, Any]) -> bool:
    """run_sql runs every statement: a call writes unless it is a query (the others read)."""
    if call["name"] != "run_sql":
        return False
    words = str(call["arguments"].get("sql", "")).lstrip().split(None, 1)
    return not words or words[0].upper() not in ("SELECT", "WITH", "EXPLAIN", "PRAGMA")


TASKGEN = TaskGenerator(
    env=ENVIRONMENT,
    plan=PLAN,
    names=names_pool(),
    build=build_task,
    shipped_names=names_pool(),
    writes=_writes,
    phrasing=PHRASING,
)
task_lines = TASKGEN.shipped
