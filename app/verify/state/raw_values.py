"""Reading values an agent wrote, whatever they are, without letting them raise.

SQLite stores any value in any column: `UPDATE employees SET hire_date='not-a-date'` succeeds,
and SQLAlchemy's Date result processor then raises on every read, which made every verify of
that session (and the admin diff) a 500. The verify dump reads such columns raw and converts
each value itself; a value its column's type cannot read becomes an `UnreadableValue`, a tagged
string that compares unequal to every readable value, so it is a mismatch with evidence (reward
0), never an exception. Non-finite floats and bytes are tagged too: JSON cannot carry them.
PostgreSQL enforces its column types, so its values are read as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, ColumnElement, type_coerce
from sqlalchemy.engine import Dialect
from sqlalchemy.types import NullType

from app.storage.dump_sql import dump_sql

_SHOWN_CHARS = 80  # of the raw value's repr in the tag
_PLAIN = frozenset({str, int, type(None), bool})


class UnreadableValue(str):
    """A stored value its column's type could not read, e.g. '<unreadable DATE: 'not-a-date'>'.

    A `str`, so it sorts, hashes and serialises to JSON like any text value."""

    @classmethod
    def of(cls, kind: str, raw: Any) -> UnreadableValue:
        shown = repr(raw)
        if len(shown) > _SHOWN_CHARS:
            shown = shown[:_SHOWN_CHARS] + "..."
        return cls(f"<unreadable {kind}: {shown}>")


def plain_scalar(value: Any) -> Any:
    """Bytes and non-finite floats as tagged text (JSON evidence cannot hold them)."""
    if type(value) in _PLAIN:  # most values: no isinstance chain
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return UnreadableValue.of("REAL", value)
    if isinstance(value, bytes | bytearray | memoryview):
        return UnreadableValue.of("BLOB", bytes(value))
    return value


def _processor(column: ColumnElement[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    return dump_sql(dialect).value_processor(column, dialect)


def raw_column(column: ColumnElement[Any], dialect: Dialect) -> ColumnElement[Any]:
    """`column` as selected for `reader`: raw when its type would convert (and may raise)."""
    if _processor(column, dialect) is None:
        return column
    name = column.key if isinstance(column, Column) else None
    coerced = type_coerce(column, NullType())
    return coerced.label(name) if name else coerced


def reader(column: ColumnElement[Any], dialect: Dialect) -> Callable[[Any], Any]:
    """Converts a value selected by `raw_column` as the column's type would, or tags it."""
    process = _processor(column, dialect)
    if process is None:
        return plain_scalar
    kind = str(column.type)

    def read(value: Any) -> Any:
        if value is None:
            return None
        try:
            return plain_scalar(process(value))
        except (ValueError, TypeError, ArithmeticError):  # bad text, bytes, overflow
            return UnreadableValue.of(kind, value)

    return read
