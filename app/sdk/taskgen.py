"""The task generation kit an environment's `taskgen/` builds on (the engine is app/taskgen/).

A family draws a story, builds a `Draft` (prompt, seed rows, gold `call`s, answers, the details
a draw may leave out: `Omission`) and the kit turns it into a validated task row (`build_row`);
an environment declares one `TaskGenerator`. docs/generating_tasks.md shows how to add a family.
"""

from app.taskgen.details import Omission
from app.taskgen.kit import Draft, TaskGenerator, build_row, call
from app.taskgen.splits import Split
from app.taskgen.validate import STORY_ID_FLOOR

# A story's new rows take ids from STORY_ID_FLOOR up; the base data stays below it, so stories
# never collide with it (or, drawn apart, with each other).
__all__ = ["STORY_ID_FLOOR", "Draft", "Omission", "Split", "TaskGenerator", "build_row", "call"]
