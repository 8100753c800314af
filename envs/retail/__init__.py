"""The retail environment: an online shop's customer-support desk (tau-bench retail, on tables)."""

from datetime import datetime
from importlib.resources import files
from pathlib import Path

from app.sdk.environment import Environment
from envs.retail.compare import COMPARE
from envs.retail.data import build_base
from envs.retail.models import Base
from envs.retail.policy import ANSWER_INSTRUCTIONS, DECLINE_REASONS, POLICY
from envs.retail.tools import TOOLS

# Shipped inside the package (pyproject's package-data), found wherever it is installed.
HERE = Path(str(files(__name__)))
TASKS_PATH = HERE / "tasks.jsonl"

ENVIRONMENT = Environment(
    name="retail",
    description="An online shop's support desk: authenticate customers, look up orders and "
    "products, cancel or modify pending orders, return or exchange delivered items.",
    metadata=Base.metadata,
    tools=TOOLS,
    build_base=build_base,
    compare=COMPARE,
    policy=POLICY,
    tasks_path=TASKS_PATH,
    migrations_path=HERE / "migrations",
    default_now=datetime(2026, 3, 14, 10, 0),
    decline_reasons=DECLINE_REASONS,
    answer_instructions=ANSWER_INSTRUCTIONS,
)

__all__ = ["ENVIRONMENT"]
