"""Two questions about a stored value, answered apart: did it change, and does it match.

Whether the agent changed a row is decided on the values as stored (`dump_state` keeps them
exact: text with its case and spaces, money to the last digit, a number stored as TEXT as that
text). Only whether a changed value matches the expected (gold) one goes through the comparison
spec's normalisation: text case- and whitespace-insensitive, money rounded to cents (and within
the spec's tolerance), a number stored as TEXT as that number. So a write that normalisation
would hide (`'Anna'` -> `'ANNA'`, 19.99 -> 19.991, 100 -> `'1_00'`) is a change, shown in
`agent_changes` and counted as collateral where the gold does not make it, while a gold-equal
write spelled another way still matches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.sdk.compare_spec import TableSpec
from app.verify.state.raw_values import UnreadableValue, plain_scalar


class StoredText(str):
    """A number stored as TEXT where its column's type reads it as a number (SQLite keeps any
    value in any column): the text as stored, so it differs from the number, and the number it
    reads as (`number`), which is what it matches."""

    number: Any

    @classmethod
    def of(cls, text: str, number: Any) -> StoredText:
        out = cls(text)
        out.number = number
        return out


def text_form(value: Any) -> Any:
    """Text compared case- and whitespace-insensitively."""
    if value is None or isinstance(value, UnreadableValue):
        return value
    return " ".join(str(value).split()).casefold()


def money_form(value: Any) -> Any:
    """Money rounded to cents; text that is no number, tagged (it matches nothing)."""
    if value is None or isinstance(value, UnreadableValue):
        return value
    try:
        money = round(float(value), 2)
    except (ValueError, TypeError, OverflowError):  # text or bytes an agent wrote
        return UnreadableValue.of("money", value)
    return plain_scalar(money)


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Matcher:
    """Per column of a table, the exact value -> its form for matching."""

    columns: tuple[str, ...]
    forms: tuple[Callable[[Any], Any], ...]
    money: frozenset[str]

    @classmethod
    def of(cls, columns: Sequence[str], spec: TableSpec) -> Matcher:
        forms = []
        for column in columns:
            if column in spec.references:
                forms.append(_numbers(_same))
            elif column in spec.text:
                forms.append(_numbers(text_form))
            elif column in spec.money:
                forms.append(_numbers(money_form))
            else:
                forms.append(_numbers(_same))
        return cls(tuple(columns), tuple(forms), frozenset(spec.money))

    def value(self, column: str, value: Any) -> Any:
        return self.forms[self.columns.index(column)](value)

    def row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(f(v) for f, v in zip(self.forms, row, strict=True))


def _numbers(form: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`form`, applied to the number a StoredText reads as."""

    def apply(value: Any) -> Any:
        return form(value.number if isinstance(value, StoredText) else value)

    return apply
