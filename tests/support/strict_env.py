"""A test environment whose only write refuses every call but the first good one.

`book` books one payment to a known account, once per session: a second booking (another
amount, reason...) or an unknown account is a tool error and changes nothing. An adversary that
repeats the gold write with nudged arguments is refused every time, the best an environment
can do (tests/verify/test_adversarial_sql.py).
"""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field
from sqlalchemy import ForeignKey, String, func, insert, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from app.sdk.compare_spec import CompareSpec, TableSpec
from app.sdk.environment import Environment, ToolArgs, ToolContext, ToolError, make_metadata, tool


class Base(DeclarativeBase):
    metadata = make_metadata()


class Account(Base):
    __tablename__ = "accounts"
    code: Mapped[str] = mapped_column(String(8), primary_key=True)
    balance: Mapped[int]


class Payment(Base):
    __tablename__ = "payments"
    id: Mapped[int] = mapped_column(primary_key=True)
    account: Mapped[str] = mapped_column(ForeignKey("accounts.code"))
    amount: Mapped[int]
    reason: Mapped[str] = mapped_column(String(60))


class BookArgs(ToolArgs):
    account: str = Field(description="Account code, e.g. 'A1'.")
    amount: int = Field(description="Whole units to book.")
    reason: str = Field(description="Why the payment is booked.")


@tool
def book(db: Session, args: BookArgs, ctx: ToolContext) -> dict[str, Any]:
    """Book one payment to an account; a session books at most one."""
    if db.scalar(select(func.count()).select_from(Payment)):
        raise ToolError("A payment was already booked in this session.", code="already_booked")
    account = db.get(Account, args.account)
    if account is None:
        raise ToolError(f"No account {args.account!r}.", code="not_found")
    db.add(Payment(account=account.code, amount=args.amount, reason=args.reason))
    account.balance += args.amount
    return {"account": account.code, "balance": account.balance}


def build_base(db: Session, rng: random.Random) -> None:
    rows = [{"code": f"A{i}", "balance": rng.randint(0, 100)} for i in range(1, 6)]
    db.execute(insert(Account), rows)


ENVIRONMENT = Environment(
    name="strict",
    description="Test ledger: one payment per session, every other booking refused.",
    metadata=Base.metadata,
    tools=(book,),
    build_base=build_base,
    compare=CompareSpec(
        tables={
            "accounts": TableSpec(key=("code",)),
            "payments": TableSpec(references={"account": "accounts"}),
        }
    ),
    policy="You book payments.",
    tasks_path=Path(__file__).with_name("strict_tasks.jsonl"),  # none: the tests pass TASKS
    default_now=datetime(2026, 1, 1, 12, 0),
)

TASKS: list[dict[str, Any]] = [
    {
        "task_id": f"strict-{i}",
        "responses_create_params": {"input": f"Book {10 * i} to A{i} for rent."},
        "ground_truth": [
            {"name": "book", "arguments": {"account": f"A{i}", "amount": 10 * i, "reason": "rent"}}
        ],
    }
    for i in range(1, 4)
]
