"""`AnyRow`: a Core result row of any width, for helpers that take or return one.

SQLAlchemy 2.1 types a Row by its columns (`Row[int, str, ...]`), so `AnyRow` means a row of
one column and a select of five columns does not fit it. `AnyRow` is the any-width spelling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from sqlalchemy.engine import Row

if TYPE_CHECKING:
    AnyRow: TypeAlias = Row[*tuple[Any, ...]]
else:  # the subscript above is for the type checker only (SQLAlchemy 2.0 cannot take it)
    AnyRow = Row

__all__ = ["AnyRow"]
