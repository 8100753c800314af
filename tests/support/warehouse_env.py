"""A small but real environment for framework tests: a warehouse with stock moves.

Kept apart from the shipped environments so framework tests do not break when retail's data or
rules evolve.
"""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

from pydantic import Field
from sqlalchemy import CheckConstraint, ForeignKey, Numeric, String, insert, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from app.sdk.compare_spec import CompareSpec, TableSpec
from app.sdk.environment import Environment, ToolArgs, ToolContext, ToolError, make_metadata, tool


class Base(DeclarativeBase):
    metadata = make_metadata()


class Item(Base):
    __tablename__ = "items"
    __table_args__ = (CheckConstraint("quantity >= 0", name="quantity_not_negative"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    sku: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(100))
    quantity: Mapped[int]
    price: Mapped[float] = mapped_column(Numeric(12, 2, asdecimal=False))


class Move(Base):
    __tablename__ = "moves"
    id: Mapped[int] = mapped_column(primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"))
    delta: Mapped[int]
    reason: Mapped[str] = mapped_column(String(50))
    at: Mapped[datetime]


class GetItemArgs(ToolArgs):
    sku: str = Field(description="Item SKU, e.g. 'SKU-0001'.")


class MoveStockArgs(ToolArgs):
    sku: str = Field(description="Item SKU.")
    delta: int = Field(description="Units to add (positive) or remove (negative).")
    reason: str = Field(description="Why the stock moves.")


class SetPriceArgs(ToolArgs):
    sku: str = Field(description="Item SKU.")
    price: float = Field(gt=0, description="New unit price.")


def _item(db: Session, sku: str) -> Item:
    item = db.scalars(select(Item).where(Item.sku == sku)).first()
    if item is None:
        raise ToolError(
            f"No item with SKU {sku!r}.", hint="SKUs look like 'SKU-0001'.", code="not_found"
        )
    return item


@tool(read_only=True)
def get_item(db: Session, args: GetItemArgs, ctx: ToolContext) -> dict:
    """Read one item's name, quantity and price."""
    item = _item(db, args.sku)
    return {"sku": item.sku, "name": item.name, "quantity": item.quantity, "price": item.price}


@tool
def move_stock(db: Session, args: MoveStockArgs, ctx: ToolContext) -> dict:
    """Add or remove units of an item; stock can never go below zero."""
    item = _item(db, args.sku)
    db.add(Move(item_id=item.id, delta=args.delta, reason=args.reason, at=ctx.now))
    db.flush()  # the move row is written before the rule check, to prove rollback removes it
    if item.quantity + args.delta < 0:
        raise ToolError(
            f"Only {item.quantity} units of {item.sku} in stock; cannot remove {-args.delta}.",
            hint="Remove at most the quantity in stock.",
        )
    item.quantity += args.delta
    return {"sku": item.sku, "quantity": item.quantity}


@tool
def set_price(db: Session, args: SetPriceArgs, ctx: ToolContext) -> dict:
    """Change an item's unit price."""
    item = _item(db, args.sku)
    item.price = round(args.price, 2)
    return {"sku": item.sku, "price": item.price}


def build_base(db: Session, rng: random.Random) -> None:
    db.execute(
        insert(Item),
        [
            {
                "id": i,
                "sku": f"SKU-{i:04d}",
                "name": f"Part {i}",
                "quantity": rng.randint(0, 50),
                "price": round(rng.uniform(1, 100), 2),
            }
            for i in range(1, 201)
        ],
    )


ENVIRONMENT = Environment(
    name="warehouse",
    description="Test warehouse: items and stock moves.",
    metadata=Base.metadata,
    tools=(get_item, move_stock, set_price),
    build_base=build_base,
    compare=CompareSpec(
        tables={
            "items": TableSpec(key=("sku",), money=("price",), text=("name",)),
            "moves": TableSpec(references={"item_id": "items"}),
        }
    ),
    policy="You manage a warehouse.",
    tasks_path=Path(__file__).with_name("warehouse_tasks.jsonl"),
    default_now=datetime(2026, 1, 1, 12, 0),
)
