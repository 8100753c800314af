"""The task generation kit an environment's `taskgen/` builds on (the engine is app/taskgen/).

A family draws a story, builds its seed with a `SeedBuilder` (id blocks, table order, updates of
base rows), names its people from a pool (`PEOPLE`, `name_pool`, `name_grid`) and returns a
`Draft` (prompt, gold `call`s, answers, the details a draw may leave out: `Omission`); the kit
turns it into a validated task row (`build_row`). An environment declares one `TaskGenerator`,
with where its seeds hold people (`PersonColumns`) and how its requests may be reworded
(`Phrasing`). docs/generating_tasks.md shows how to add a family.
"""

from app.core.conversation import UserChange, UserFact, UserScript
from app.sdk.people import PEOPLE, Name, PersonColumns, name_grid, name_pool
from app.sdk.phrasing import Phrasing, Wordings, opening, sentence_starting, sentence_with
from app.sdk.seed_builder import BLOCK, STORY_ID_CEIL, STORY_ID_FLOOR, SeedBuilder, own_world
from app.taskgen.details import Omission
from app.taskgen.kit import Draft, TaskGenerator, build_row, call
from app.taskgen.splits import Split

# A story's new rows take ids from STORY_ID_FLOOR up (BLOCK per story); the base data stays
# below it, so stories never collide with it (or, drawn apart, with each other).
__all__ = [
    "UserChange",
    "UserFact",
    "UserScript",
    "BLOCK",
    "PEOPLE",
    "STORY_ID_CEIL",
    "STORY_ID_FLOOR",
    "Draft",
    "Name",
    "Omission",
    "PersonColumns",
    "Phrasing",
    "SeedBuilder",
    "Split",
    "TaskGenerator",
    "Wordings",
    "build_row",
    "call",
    "name_grid",
    "name_pool",
    "opening",
    "own_world",
    "sentence_starting",
    "sentence_with",
]
