"""The sql environment: a SQL console on a small consulting company's operational database."""

from datetime import datetime
from importlib.resources import files
from pathlib import Path

from app.sdk.environment import Environment
from envs.sql.compare import COMPARE
from envs.sql.data import build_base
from envs.sql.models import Base
from envs.sql.policy import ANSWER_INSTRUCTIONS, DECLINE_REASONS, POLICY
from envs.sql.tools import TOOLS

# Shipped inside the package (pyproject's package-data), found wherever it is installed.
HERE = Path(str(files(__name__)))
TASKS_PATH = HERE / "tasks.jsonl"

ENVIRONMENT = Environment(
    name="sql",
    description="A SQL console on Acme Consulting's database (departments, employees, salary "
    "history, customers, projects, timesheets, invoices): answer questions and fix records with "
    "one sandboxed SQL statement per call.",
    metadata=Base.metadata,
    tools=TOOLS,
    build_base=build_base,
    compare=COMPARE,
    policy=POLICY,
    decline_reasons=DECLINE_REASONS,
    answer_instructions=ANSWER_INSTRUCTIONS,
    tasks_path=TASKS_PATH,
    migrations_path=HERE / "migrations",
    default_now=datetime(2026, 3, 16, 9, 0),
    # A query's cost is the agent's to choose (up to the sandbox's 1 s limit): never on the loop.
    inline_tool_calls=False,
    # The sandbox is SQLite's authorizer and progress handler (envs/sql/sandbox.py).
    requires=("sqlite",),
)

__all__ = ["ENVIRONMENT"]
