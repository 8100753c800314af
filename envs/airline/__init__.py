"""The airline environment: a reservation desk (tau-bench airline, on real tables)."""

from importlib.resources import files
from pathlib import Path

from app.sdk.environment import Environment
from envs.airline.compare import COMPARE
from envs.airline.data import AS_OF, build_base
from envs.airline.models import Base
from envs.airline.policy import ANSWER_INSTRUCTIONS, DECLINE_REASONS, POLICY
from envs.airline.tools import TOOLS

# Shipped inside the package (pyproject's package-data), found wherever it is installed.
HERE = Path(str(files(__name__)))
TASKS_PATH = HERE / "tasks.jsonl"

ENVIRONMENT = Environment(
    name="airline",
    description="An airline's reservation desk: find members and flights, book, change, cancel "
    "reservations, add bags, assign seats and issue compensation certificates.",
    metadata=Base.metadata,
    tools=TOOLS,
    build_base=build_base,
    compare=COMPARE,
    policy=POLICY,
    tasks_path=TASKS_PATH,
    migrations_path=HERE / "migrations",
    default_now=AS_OF,
    decline_reasons=DECLINE_REASONS,
    answer_instructions=ANSWER_INSTRUCTIONS,
)

__all__ = ["ENVIRONMENT"]
