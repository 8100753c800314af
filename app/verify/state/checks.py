"""Declarative expected-state checks written in a task row, compiled to SQLAlchemy Core queries.

A task's `expected_state` is a list of checks, each naming one table and of exactly one kind:
`expect` (the rows matching `where` hold these values; `"match": "one"`: exactly one row),
`count` (a number or operators) or `unchanged`. A condition is a literal (null is IS NULL) or
operators that must all hold (eq, ne, gt, gte, lt, lte, in, not_in, is_null, contains); in
`where` a foreign-key column may take {"ref": {...}}, reaching rows the agent created through
their parent's natural key. Money compares within the comparison spec's tolerance, text case-
and whitespace-insensitively. Table, column and operator names are checked against the
environment's metadata: nothing from a task file becomes raw SQL (docs/verification.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Date,
    DateTime,
    Table,
    and_,
    func,
    or_,
    select,
)

from app.core.checks import fail, parse_checks
from app.sdk.compare_spec import CompareSpec
from app.storage.seeding import parse_now
from app.verify.state.diff import diff_table
from app.verify.state.dump import DbState
from app.verify.state.raw_values import raw_column, reader

_SHOWN_ROWS = 5


# --- compile against the environment's metadata -------------------------------------------------
@dataclass(frozen=True)
class CompiledCheck:
    index: int
    raw: Mapping[str, Any]
    table: Table
    where: ColumnElement[bool] | None


def _column(index: int, table: Table, name: str) -> Column[Any]:
    if name not in table.c:
        raise fail(
            index,
            f"table {table.name!r} has no column {name!r}; columns are {list(table.c.keys())}",
        )
    return table.c[name]


def _coerce(column: Column[Any], value: Any) -> Any:
    """ISO strings become datetimes/dates for date columns, as in the task seed."""
    if isinstance(value, str) and isinstance(column.type, DateTime):
        return parse_now(value, datetime.min)
    if isinstance(value, str) and isinstance(column.type, Date):
        return date.fromisoformat(value)
    return value


def _squeezed(col: Column[Any]) -> ColumnElement[Any]:
    """SQL twin of the text normalisation: tabs/newlines to spaces, runs of spaces collapsed
    (up to 16 in a row), trimmed, lower-cased."""
    expr: ColumnElement[Any] = func.replace(func.replace(col, "\t", " "), "\n", " ")
    for _ in range(4):
        expr = func.replace(expr, "  ", " ")
    return func.lower(func.trim(expr))


class _Compiler:
    def __init__(self, tables: Mapping[str, Table], compare: CompareSpec, index: int):
        self.tables, self.compare, self.index = tables, compare, index

    def table(self, name: str) -> Table:
        table = self.tables.get(name)
        if table is None:
            raise fail(self.index, f"unknown table {name!r}; tables are {sorted(self.tables)}")
        return table

    def where(self, table: Table, conditions: Mapping[str, Any]) -> ColumnElement[bool] | None:
        clauses = [self.condition(table, col, cond) for col, cond in conditions.items()]
        return and_(*clauses) if clauses else None

    def condition(self, table: Table, name: str, cond: Any) -> ColumnElement[bool]:
        col = _column(self.index, table, name)
        if isinstance(cond, Mapping) and "ref" in cond:
            return self._ref(table, col, cond["ref"])
        ops = cond if isinstance(cond, Mapping) else {"eq": cond}
        spec = self.compare.for_table(table.name)
        text, money = name in spec.text, name in spec.money
        target: ColumnElement[Any] = _squeezed(col) if text else col
        clauses = []
        try:
            for op, operand in ops.items():
                clauses.append(self._op(col, target, op, operand, text=text, money=money))
        except ValueError as exc:
            raise fail(self.index, f"{table.name}.{name}: {exc}") from None
        return and_(*clauses)

    def _op(
        self,
        col: Column[Any],
        target: ColumnElement[Any],
        op: str,
        operand: Any,
        *,
        text: bool,
        money: bool,
    ) -> ColumnElement[bool]:
        def norm(v: Any) -> Any:
            v = _coerce(col, v)
            return " ".join(v.split()).casefold() if text and isinstance(v, str) else v

        if op == "is_null" or (op in ("eq", "ne") and operand is None):
            is_null = operand if op == "is_null" else op == "eq"
            return col.is_(None) if is_null else col.is_not(None)
        if op in ("in", "not_in"):
            values = [norm(v) for v in operand]
            # NULL is "not in" any list, as in the Python evaluation of expectations.
            return target.in_(values) if op == "in" else or_(target.not_in(values), col.is_(None))
        if op == "contains":
            return func.instr(func.lower(col), operand.casefold()) > 0
        value = norm(operand)
        tol = self.compare.money_tolerance
        if money and op == "eq" and isinstance(value, int | float):
            return col.between(value - tol, value + tol)
        if money and op == "ne" and isinstance(value, int | float):
            return or_(~col.between(value - tol, value + tol), col.is_(None))
        return {
            "eq": lambda: target == value,
            "ne": lambda: or_(target != value, col.is_(None)),
            "gt": lambda: target > value,
            "gte": lambda: target >= value,
            "lt": lambda: target < value,
            "lte": lambda: target <= value,
        }[op]()

    def _ref(
        self, table: Table, col: Column[Any], conditions: Mapping[str, Any]
    ) -> ColumnElement[bool]:
        fks = list(col.foreign_keys)
        if len(fks) != 1:
            raise fail(self.index, f"{table.name}.{col.name} is no foreign key; 'ref' needs one")
        target_col = fks[0].column
        inner = self.where(target_col.table, conditions)
        query = select(target_col)
        return col.in_(query.where(inner) if inner is not None else query)


def compile_checks(
    tables: Mapping[str, Table], compare: CompareSpec, checks: Sequence[Mapping[str, Any]]
) -> list[CompiledCheck]:
    """Resolve names against the metadata; an unknown table/column/operator is InvalidTask."""
    compiled = []
    for i, check in enumerate(parse_checks(list(checks))):
        c = _Compiler(tables, compare, i)
        table = c.table(check["table"])
        if check.get("unchanged") and not compare.for_table(table.name).compared:
            raise fail(
                i,
                f"table {table.name!r} is left out of the comparison spec, so "
                "'unchanged' cannot be judged; use count/expect checks instead",
            )
        for col in check.get("expect", {}):
            _column(i, table, col)
            c.condition(table, col, check["expect"][col])  # validates operands early
        compiled.append(CompiledCheck(i, check, table, c.where(table, check.get("where", {}))))
    return compiled


# --- evaluate on a final state ------------------------------------------------------------------
@dataclass(frozen=True)
class CheckResult:
    index: int
    passed: bool
    expected: Mapping[str, Any]
    actual: Any

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.index,
            "passed": self.passed,
            "expected": dict(self.expected),
            "actual": self.actual,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return float(value) if isinstance(value, Decimal) else value


def _holds(value: Any, cond: Any, *, text: bool, tol: float | None) -> bool:
    """Python twin of `_Compiler._op`, used on fetched rows so failures can show actual values."""
    ops = cond if isinstance(cond, Mapping) else {"eq": cond}

    def norm(v: Any) -> Any:
        v = _plain(v)
        return " ".join(v.split()).casefold() if text and isinstance(v, str) else v

    actual = norm(value)
    for op, operand in ops.items():
        if op == "is_null":
            ok = (actual is None) == operand
        elif op in ("in", "not_in"):
            ok = any(_equal(actual, norm(v), tol) for v in operand) == (op == "in")
        elif op == "contains":
            ok = actual is not None and operand.casefold() in str(actual).casefold()
        elif op in ("eq", "ne"):
            ok = _equal(actual, norm(operand), tol) == (op == "eq")
        else:
            expected = norm(operand)
            try:
                ok = (
                    actual is not None
                    and {
                        "gt": actual > expected,
                        "gte": actual >= expected,
                        "lt": actual < expected,
                        "lte": actual <= expected,
                    }[op]
                )
            except TypeError:
                ok = False
        if not ok:
            return False
    return True


def _equal(a: Any, b: Any, tol: float | None) -> bool:
    numeric = isinstance(a, int | float) and isinstance(b, int | float)
    if tol is not None and numeric and not isinstance(a, bool):
        return abs(a - b) <= tol + 1e-9
    return a == b


def _run_expect(conn: Connection, check: CompiledCheck, compare: CompareSpec) -> CheckResult:
    table, raw = check.table, check.raw
    expect: Mapping[str, Any] = raw["expect"]
    spec = compare.for_table(table.name)
    cols = [table.c[c] for c in expect]
    # Read raw and convert per value: an agent may have written anything (raw_values.py).
    query = select(*(raw_column(c, conn.dialect) for c in cols))
    reads = [reader(c, conn.dialect) for c in cols]
    if check.where is not None:
        query = query.where(check.where)
    rows = [
        {c: read(v) for c, read, v in zip(expect, reads, r, strict=True)}
        for r in conn.execute(query)
    ]
    expect_norm = {c: _normalise_dates(table, c, cond) for c, cond in expect.items()}

    def row_ok(row: Mapping[str, Any]) -> bool:
        return all(
            _holds(
                row[c],
                cond,
                text=c in spec.text,
                tol=compare.money_tolerance if c in spec.money else None,
            )
            for c, cond in expect_norm.items()
        )

    good = [row_ok(r) for r in rows]
    match = raw.get("match", "all")
    if match == "one":
        passed = len(rows) == 1 and good[0]
    elif match == "any":
        passed = any(good)
    else:
        passed = bool(rows) and all(good)
    failing = [r for r, ok in zip(rows, good, strict=True) if not ok] or rows
    actual = {
        "rows": len(rows),
        "values": [{k: _plain(v) for k, v in r.items()} for r in failing[:_SHOWN_ROWS]],
    }
    return CheckResult(check.index, passed, raw, actual)


def _normalise_dates(table: Table, column: str, cond: Any) -> Any:
    def one(v: Any) -> Any:
        return _plain(_coerce(table.c[column], v))

    if isinstance(cond, Mapping):
        return {
            op: [one(v) for v in val]
            if isinstance(val, list)
            else (val if op in ("is_null", "contains") else one(val))
            for op, val in cond.items()
        }
    return one(cond)


def run_checks(
    conn: Connection,
    compiled: Sequence[CompiledCheck],
    compare: CompareSpec,
    seed_state: DbState,
    final_state: DbState,
) -> list[CheckResult]:
    """Evaluate every check on the final state (`conn`); `unchanged` compares with the seed."""
    results = []
    for check in compiled:
        raw, table = check.raw, check.table
        if "unchanged" in raw:
            # Unchanged as stored: a write the spec's text or money rules would hide counts.
            diff = diff_table(seed_state[table.name], final_state[table.name], set(), 0.0)
            actual = diff.summary(_SHOWN_ROWS) if diff.count else "unchanged"
            results.append(CheckResult(check.index, not diff.count, raw, actual))
        elif "count" in raw:
            query = select(func.count()).select_from(table)
            if check.where is not None:
                query = query.where(check.where)
            n = conn.execute(query).scalar_one()
            passed = _holds(n, raw["count"], text=False, tol=None)
            results.append(CheckResult(check.index, passed, raw, {"rows": n}))
        else:
            results.append(_run_expect(conn, check, compare))
    return results


def checked_tables(checks: Sequence[Mapping[str, Any]]) -> set[str]:
    """Tables any check talks about (changes elsewhere count as collateral in checks-only tasks)."""
    return {c["table"] for c in checks}
