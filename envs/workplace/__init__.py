"""The workplace environment: an office assistant over email, calendar, CRM and project tasks."""

from importlib.resources import files
from pathlib import Path

from app.sdk.environment import Environment
from envs.workplace.compare import COMPARE
from envs.workplace.data import AS_OF, build_base
from envs.workplace.models import Base
from envs.workplace.policy import ANSWER_INSTRUCTIONS, DECLINE_REASONS, POLICY
from envs.workplace.tools import TOOLS

# Shipped inside the package (pyproject's package-data), found wherever it is installed.
HERE = Path(str(files(__name__)))
TASKS_PATH = HERE / "tasks.jsonl"

ENVIRONMENT = Environment(
    name="workplace",
    description="An office assistant acting for one employee: email, calendar with conflict "
    "checks, a CRM deal pipeline and project tasks, all on real tables.",
    metadata=Base.metadata,
    tools=TOOLS,
    build_base=build_base,
    compare=COMPARE,
    policy=POLICY,
    decline_reasons=DECLINE_REASONS,
    answer_instructions=ANSWER_INSTRUCTIONS,
    tasks_path=TASKS_PATH,
    migrations_path=HERE / "migrations",
    default_now=AS_OF,
)

__all__ = ["ENVIRONMENT"]
