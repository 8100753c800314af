"""What every environment's models.py imports: its base's parts, money columns, and CHECK
constraints over a closed set of values (one implementation, so every schema names its
constraints and stores money alike; Alembic batch migrations on SQLite need named constraints).

The base stays a two-line declaration in the environment, `class Base(DeclarativeBase):
metadata = make_metadata()`: a class a function returns is no static type (mypy refuses to
subclass it), and one shared base would put every environment's tables in one MetaData.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Numeric
from sqlalchemy.orm import DeclarativeBase

from app.sdk.tool import make_metadata

# Money: NUMERIC(12, 2), read back as float (tools round to cents before writing: money.cents).
Money = Numeric(12, 2, asdecimal=False)


def one_of(column: str, values: Iterable[str]) -> str:
    """The SQL of a CHECK that `column` holds one of `values`: `status IN ('a', 'b')`."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


__all__ = ["DeclarativeBase", "Money", "make_metadata", "one_of"]
