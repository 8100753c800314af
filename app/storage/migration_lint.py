"""Revisions that would fail on a database with rows: a required column nothing fills.

A migration runs on retained sessions and templates, which have rows. A column added
`nullable=False` with no `server_default` cannot be added to a table with rows (SQLite refuses
it, a batch copy violates it), and a column made `NOT NULL` by `alter_column` in an upgrade that
writes no backfill (`op.execute(...)` / an `UPDATE`) fails on the first NULL. Autogenerate
writes the first kind for every new required column. `unfilled_columns(path)` reads a
revision script (its `upgrade()`, by `ast`, never imported) and names each such column;
`stategym migrate revision` warns about them and `stategym migrate check` fails on them. A
line carrying `# stategym: no-backfill-needed` is trusted (e.g. a column every row already
fills). The initial revision of a branch creates its tables empty and is never read here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

OPT_OUT = "stategym: no-backfill-needed"


@dataclass(frozen=True)
class Unfilled:
    """One required column a revision adds or tightens with nothing to fill it."""

    file: str
    line: int
    column: str
    how: str  # "add_column" | "alter_column"

    def __str__(self) -> str:
        if self.how == "add_column":
            fix = (
                "add it nullable, backfill it (op.execute UPDATE), then alter it to NOT NULL, "
                "or give it a server_default"
            )
            what = "adds required column"
        else:
            fix = "backfill it (op.execute UPDATE) before making it NOT NULL"
            what = "makes column NOT NULL"
        return f"{self.file}:{self.line} {what} {self.column!r} with no default or backfill: {fix}"


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _attr(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _name(node: ast.expr | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "?"


def _backfills(body: ast.FunctionDef) -> bool:
    """Whether the upgrade writes data: an `execute(...)` call or an UPDATE statement text."""
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and _attr(node) in ("execute", "bulk_insert"):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "update " in node.value.lower():
                return True
    return False


def unfilled_columns(path: Path) -> list[Unfilled]:
    """The required columns `path`'s `upgrade()` adds or tightens with nothing to fill them."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    upgrade = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "upgrade"), None
    )
    if upgrade is None:
        return []
    backfilled = _backfills(upgrade)
    found: list[Unfilled] = []
    for node in ast.walk(upgrade):
        if not isinstance(node, ast.Call):
            continue
        span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        if any(OPT_OUT in line for line in span):
            continue
        how = _attr(node)
        if how == "add_column":
            column = next((a for a in node.args if isinstance(a, ast.Call)), None)
            if (
                column is not None
                and _is_false(_keyword(column, "nullable"))
                and _keyword(column, "server_default") is None
                and not _is_true(_keyword(column, "primary_key"))
            ):
                name = _name(column.args[0] if column.args else None)
                found.append(Unfilled(path.name, node.lineno, name, how))
        elif how == "alter_column" and _is_false(_keyword(node, "nullable")):
            if not backfilled and _keyword(node, "server_default") is None:
                # op.alter_column(table, column) / batch_op.alter_column(column)
                name = _name(node.args[-1] if node.args else None)
                found.append(Unfilled(path.name, node.lineno, name, how))
    return found


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True
