"""The ledger environment: a bank's customer desk over a double-entry ledger."""

from importlib.resources import files
from pathlib import Path

from app.sdk.environment import Environment
from envs.ledger.compare import COMPARE
from envs.ledger.data import AS_OF, build_base
from envs.ledger.invariants import INVARIANTS
from envs.ledger.models import Base
from envs.ledger.policy import ANSWER_INSTRUCTIONS, DECLINE_REASONS, POLICY
from envs.ledger.tools import TOOLS

# Shipped inside the package (pyproject's package-data), found wherever it is installed.
HERE = Path(str(files(__name__)))
TASKS_PATH = HERE / "tasks.jsonl"

ENVIRONMENT = Environment(
    name="ledger",
    description="A bank's customer desk over a double-entry ledger: identify customers, read "
    "accounts and transactions, transfer, deposit, withdraw, charge fees, reverse postings, "
    "freeze, unfreeze and close accounts, release holds, save beneficiaries.",
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
    invariants=INVARIANTS,
)

__all__ = ["ENVIRONMENT"]
