"""A test environment with a migration history that adds, recreates and drops tables.

Its models are the head of the `depot` branch in tests/support/migrations/depot/ (registered,
with that branch, only for the tests that ask for the `depot` fixture, tests/conftest.py):

- d0a1c0ffee01: `items`, `bins` (label up to 40 characters), `notes`;
- d0a2c0ffee02: adds `moves` (a new table), recreates `bins` (a copy-and-move batch widening
  its label to 60 characters), drops `notes`;
- d0a3c0ffee03: upper-cases every SKU (a data migration: no table changes shape; the seed's
  SKUs already are, so only a task seeding a lower-case one sees it).

`bins` has a text primary key (its step-log trigger records no integer key); the others have
integer keys.
"""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

from pydantic import Field
from sqlalchemy import ForeignKey, String, insert, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from app.sdk.compare_spec import CompareSpec, TableSpec
from app.sdk.environment import Environment, ToolArgs, ToolContext, ToolError, make_metadata, tool

MIGRATIONS = Path(__file__).with_name("migrations") / "depot"


class Base(DeclarativeBase):
    metadata = make_metadata()


class Item(Base):
    __tablename__ = "items"
    id: Mapped[int] = mapped_column(primary_key=True)
    sku: Mapped[str] = mapped_column(String(32), unique=True)
    quantity: Mapped[int]


class Bin(Base):
    __tablename__ = "bins"
    code: Mapped[str] = mapped_column(String(8), primary_key=True)
    label: Mapped[str] = mapped_column(String(60))


class Move(Base):
    __tablename__ = "moves"
    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"))
    delta: Mapped[int]
    reason: Mapped[str] = mapped_column(String(50))


class MoveStockArgs(ToolArgs):
    sku: str = Field(description="Item SKU, e.g. 'SKU-0001'.")
    delta: int = Field(description="Units to add (positive) or remove (negative).")
    reason: str = Field(description="Why the stock moves.")


class LabelBinArgs(ToolArgs):
    code: str = Field(description="Bin code, e.g. 'A1'.")
    label: str = Field(max_length=60, description="The bin's new label.")


@tool
def move_stock(db: Session, args: MoveStockArgs, ctx: ToolContext) -> dict:
    """Record a stock move and apply it to the item's quantity."""
    item = db.scalars(select(Item).where(Item.sku == args.sku)).first()
    if item is None:
        raise ToolError(f"No item with SKU {args.sku!r}.", code="not_found")
    db.add(Move(item_id=item.id, delta=args.delta, reason=args.reason))
    item.quantity += args.delta
    return {"sku": item.sku, "quantity": item.quantity}


@tool
def label_bin(db: Session, args: LabelBinArgs, ctx: ToolContext) -> dict:
    """Change a bin's label."""
    found = db.get(Bin, args.code)
    if found is None:
        raise ToolError(f"No bin {args.code!r}.", code="not_found")
    found.label = args.label
    return {"code": found.code, "label": found.label}


def build_base(db: Session, rng: random.Random) -> None:
    db.execute(
        insert(Item),
        [{"id": i, "sku": f"SKU-{i:04d}", "quantity": rng.randint(5, 50)} for i in range(1, 21)],
    )
    db.execute(insert(Bin), [{"code": f"A{i}", "label": f"Aisle A, bin {i}"} for i in range(1, 6)])


ENVIRONMENT = Environment(
    name="depot",
    description="Test depot: items, bins and stock moves, with a migration history.",
    metadata=Base.metadata,
    tools=(move_stock, label_bin),
    build_base=build_base,
    compare=CompareSpec(
        tables={
            "items": TableSpec(key=("sku",)),
            "bins": TableSpec(key=("code",), text=("label",)),
            "moves": TableSpec(references={"item_id": "items"}),
        }
    ),
    policy="You manage a depot.",
    tasks_path=Path(__file__).with_name("depot_tasks.jsonl"),  # none: tests pass their tasks
    default_now=datetime(2026, 1, 1, 12, 0),
)
