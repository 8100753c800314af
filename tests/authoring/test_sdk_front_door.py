"""`app.sdk` is an author's one front door: its `__all__` is pinned here (a name added or removed
is a change authors see), every name resolves, and importing it loads none of the engine."""

from __future__ import annotations

import inspect
import subprocess
import sys

import app.sdk
from tests.conftest import REPO

FRONT_DOOR = [
    "ANSWER_TABLE",
    "AnyRow",
    "CompareSpec",
    "DeclarativeBase",
    "Environment",
    "Invariant",
    "Money",
    "SeedBuilder",
    "TableSpec",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolError",
    "UserChange",
    "UserFact",
    "UserScript",
    "cents",
    "decline_code_lines",
    "make_metadata",
    "money",
    "one_of",
    "policy_text",
    "tool",
]
ENGINE = ("app.authoring", "app.runtime", "app.server", "app.storage", "app.taskgen", "app.verify")


def test_the_front_door_exports_exactly_the_declarations() -> None:
    assert app.sdk.__all__ == FRONT_DOOR
    missing = [name for name in FRONT_DOOR if not hasattr(app.sdk, name)]
    assert missing == []
    exported = {name for name in vars(app.sdk) if not name.startswith("_")}
    # Besides __all__, only the submodules the imports bind (app.sdk.tool, app.sdk.models, ...).
    extra = {n for n in exported - set(FRONT_DOOR) if not inspect.ismodule(getattr(app.sdk, n))}
    assert extra == set(), extra


def test_importing_the_sdk_loads_none_of_the_engine() -> None:
    probe = (
        "import sys; from app.sdk import *; "
        f"print(sorted(m for m in sys.modules if m.startswith({ENGINE!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_authoring_facades_and_their_old_paths_are_the_same_objects() -> None:
    from app.authoring import replay, taskgen, testing
    from app.sdk import replay as old_replay
    from app.sdk import taskgen as old_taskgen
    from app.sdk import testing as old_testing

    assert old_replay.open_task_db is replay.open_task_db
    assert old_taskgen.TaskGenerator is taskgen.TaskGenerator
    assert old_testing.ToolCalls is testing.ToolCalls
    assert old_taskgen.__all__ == taskgen.__all__
