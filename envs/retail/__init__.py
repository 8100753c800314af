"""The retail environment: an online shop's customer-support desk (tau-bench retail, on tables)."""

from datetime import datetime
from pathlib import Path

from app.sdk.environment import Environment
from envs.retail.compare import COMPARE
from envs.retail.data import build_base
from envs.retail.models import Base
from envs.retail.policy import ANSWER_INSTRUCTIONS, DECLINE_REASONS, POLICY
from envs.retail.tools import TOOLS

TASKS_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "retail" / "tasks.jsonl"

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
    default_now=datetime(2026, 3, 14, 10, 0),
    decline_reasons=DECLINE_REASONS,
    answer_instructions=ANSWER_INSTRUCTIONS,
)

__all__ = ["ENVIRONMENT"]
