"""Helpers for workplace tests: a seeded in-memory database and tools called like the framework."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.authoring.replay import open_task_db
from app.authoring.testing import ToolCalls
from envs.workplace import ENVIRONMENT
from envs.workplace.taskgen.kit import Story


def open_story(story: Story) -> Session:
    """Base data plus the story's rows, committed, on a fresh in-memory database."""
    db, _ = open_task_db(ENVIRONMENT, story.seed())
    return db


CALLS = ToolCalls(ENVIRONMENT)
run, fails = CALLS.run, CALLS.fails
