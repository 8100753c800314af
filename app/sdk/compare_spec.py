"""How two states of an environment's database are compared: declared next to its models.

Rows are matched across states by a natural key (or by their whole content), never by an
autoincrement id; volatile columns are left out; values are normalised before comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.core.conversation import USER_TABLE


@dataclass(frozen=True)
class TableSpec:
    """Comparison rules of one table.

    key: natural-key columns matching a row across two states. Empty: rows match by content.
    ignore: volatile columns (surrogate ids, timestamps, generated codes) left out entirely.
    text: columns compared case- and whitespace-insensitively.
    money: numeric columns compared within the spec's money tolerance.
    references: column -> table; the surrogate id in the column is replaced by the referenced
        row's natural key, so a reference to a row the agent created matches the gold one.
    frozen: the table must stay untouched (any change is collateral damage).
    compared: False leaves the table out of the comparison (e.g. a pure log of lookups).
    log: an append-only record of the writes other tables hold (an audit trail): a record is
        evidence of how the state was reached, not an outcome. Its rows are no change unit
        (no partial credit, no collateral); a gold record missing from the final state is a
        difference, a final record the gold lacks (a retry's repeat, a corrected mistake's)
        is not: it is shown in `verification.extra_log_records`. Only for tables whose rows
        always accompany a change of another table (docs/verification.md).
    """

    key: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    money: tuple[str, ...] = ()
    references: Mapping[str, str] = field(default_factory=dict)
    frozen: bool = False
    compared: bool = True
    log: bool = False


@dataclass(frozen=True)
class CompareSpec:
    """Per-table rules; tables not named get `TableSpec()` (all columns but an integer `id`)."""

    tables: Mapping[str, TableSpec] = field(default_factory=dict)
    money_tolerance: float = 0.005
    # Columns ignored in every table (typically the surrogate primary key).
    ignore_everywhere: tuple[str, ...] = ("id",)

    def for_table(self, name: str) -> TableSpec:
        # The framework's tables are scored on their own (the answer:
        # app/verify/answers/submitted.py; the conversation: app/verify/answers/confirmation.py),
        # never as a state change.
        if name in FRAMEWORK_TABLES:
            return _ANSWER_TABLE
        # Called dozens of times a verify: one shared (immutable) spec for unnamed tables.
        return self.tables.get(name, _UNNAMED_TABLE)


# The framework's answer table (app/sdk/answer.py), named here so this module stays a leaf.
ANSWER_TABLE = "stategym_answer"
# The simulated user's script (seeded from the task's `user` block) and the conversation with it
# (app/sdk/user.py).
CONVERSATION_TABLE = "stategym_conversation"
FRAMEWORK_TABLES = frozenset({ANSWER_TABLE, USER_TABLE, CONVERSATION_TABLE})
_UNNAMED_TABLE = TableSpec(references=MappingProxyType({}))
_ANSWER_TABLE = TableSpec(references=MappingProxyType({}), compared=False)
