"""A test environment whose writes take the indirect paths: foreign-key CASCADE and SET NULL,
UPSERT (ON CONFLICT DO UPDATE), REPLACE (SQLite) and rows written by a trigger (SQLite).

Verify must see every row those paths write, on both backends
(tests/storage/test_hidden_changes.py).
"""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

from pydantic import Field
from sqlalchemy import DDL, ForeignKey, String, delete, event, insert, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from app.sdk.compare_spec import CompareSpec, TableSpec
from app.sdk.environment import Environment, ToolArgs, ToolContext, make_metadata, tool


class Base(DeclarativeBase):
    metadata = make_metadata()


class Parent(Base):
    __tablename__ = "parents"
    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(16), unique=True)
    name: Mapped[str] = mapped_column(String(40))


class Child(Base):
    __tablename__ = "children"
    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(16), unique=True)
    parent_id: Mapped[int] = mapped_column(ForeignKey("parents.id", ondelete="CASCADE"))


class Link(Base):
    __tablename__ = "links"
    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(16), unique=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("parents.id", ondelete="SET NULL"))


class Audit(Base):
    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(primary_key=True)
    what: Mapped[str] = mapped_column(String(60))


# On SQLite a trigger writes the audit row: a row no tool statement names.
event.listen(
    Parent.__table__,
    "after_create",
    DDL(
        "CREATE TRIGGER parents_audit AFTER UPDATE OF name ON parents BEGIN "
        "INSERT INTO audit(what) VALUES ('renamed ' || NEW.code); END"
    ).execute_if(dialect="sqlite"),
)


class CodeArgs(ToolArgs):
    code: str = Field(description="Parent code, e.g. 'P-01'.")


class UpsertArgs(ToolArgs):
    code: str = Field(description="Parent code.")
    name: str = Field(description="Its new name.")


@tool
def delete_parent(db: Session, args: CodeArgs, ctx: ToolContext) -> dict:
    """Delete a parent: its children go with it (CASCADE), its links are unset (SET NULL)."""
    done = db.execute(delete(Parent).where(Parent.code == args.code))
    return {"deleted": done.rowcount}


@tool
def upsert_parent(db: Session, args: UpsertArgs, ctx: ToolContext) -> dict:
    """Insert a parent, or rename the existing one with that code (ON CONFLICT DO UPDATE)."""
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(Parent).values(code=args.code, name=args.name)
    db.execute(stmt.on_conflict_do_update(index_elements=["code"], set_={"name": args.name}))
    return {"code": args.code}


@tool
def replace_parent(db: Session, args: UpsertArgs, ctx: ToolContext) -> dict:
    """SQLite only: INSERT OR REPLACE a parent by code (deletes the old row and its children)."""
    db.execute(
        text("INSERT OR REPLACE INTO parents (code, name) VALUES (:code, :name)"),
        {"code": args.code, "name": args.name},
    )
    return {"code": args.code}


def build_base(db: Session, rng: random.Random) -> None:
    db.execute(insert(Parent), [{"id": i, "code": f"P-{i:02d}", "name": f"p{i}"} for i in (1, 2)])
    db.execute(
        insert(Child),
        [{"id": i, "code": f"C-{i:02d}", "parent_id": 1 + i % 2} for i in range(1, 7)],
    )
    db.execute(
        insert(Link),
        [{"id": i, "code": f"L-{i:02d}", "parent_id": 1 + i % 2} for i in range(1, 5)],
    )


ENVIRONMENT = Environment(
    name="cascade",
    description="Test env: parents with cascading children, nullable links and an audit log.",
    metadata=Base.metadata,
    tools=(delete_parent, upsert_parent, replace_parent),
    build_base=build_base,
    compare=CompareSpec(
        tables={
            "parents": TableSpec(key=("code",)),
            "children": TableSpec(key=("code",), references={"parent_id": "parents"}),
            "links": TableSpec(key=("code",), references={"parent_id": "parents"}),
            "audit": TableSpec(),
        }
    ),
    policy="Test environment.",
    tasks_path=Path(__file__).with_name("cascade_tasks.jsonl"),
    default_now=datetime(2026, 1, 1, 12, 0),
)
