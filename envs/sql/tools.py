"""The console's tools: list the tables, describe one, run one SQL statement."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from sqlalchemy import UniqueConstraint, func, select
from sqlalchemy.orm import Session

from app.sdk.environment import Tool, ToolArgs, ToolContext, ToolError, tool
from envs.sql.models import TRIGGERS, Base
from envs.sql.sandbox import MAX_BYTES, MAX_ROWS, STEP_BUDGET, TIME_LIMIT_S, precheck, run_statement

TABLE_NOTES = {
    "departments": "company departments with their annual budget",
    "employees": "staff; status active / on_leave / terminated; manager_id points to employees",
    "salaries": "salary history (annual, USD), append-only; latest effective_date = current",
    "customers": "client companies",
    "projects": "customer projects (customer_id set) and internal ones (customer_id NULL)",
    "timesheets": "weekly hours per employee and project; submitted -> approved/rejected -> "
    "invoiced",
    "invoices": "customer invoices; draft -> sent -> paid, or void",
    "timesheet_archive": "timesheets moved out of the live table, with the archiving date",
}


class NoArgs(ToolArgs):
    pass


@tool(read_only=True)
def list_tables(db: Session, args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the company database's tables with their row counts and what each holds."""
    tables = []
    for name, table in Base.metadata.tables.items():
        if name not in TABLE_NOTES:  # the framework's tables (answer, user, conversation)
            continue
        count = db.scalar(select(func.count()).select_from(table))
        tables.append({"table": name, "rows": count, "holds": TABLE_NOTES[name]})
    return {"tables": tables}


class DescribeTableArgs(ToolArgs):
    table: str = Field(description="Table name as listed by list_tables, e.g. 'employees'.")


@tool(read_only=True)
def describe_table(db: Session, args: DescribeTableArgs, ctx: ToolContext) -> dict[str, Any]:
    """Describe one table: columns (type, nullable, key), foreign keys, CHECK rules and the
    business rules (triggers) that guard it."""
    # The company's tables only: the framework's (answer, user, conversation) are no business data.
    table = (
        Base.metadata.tables.get(args.table.lower()) if args.table.lower() in TABLE_NOTES else None
    )
    if table is None:
        raise ToolError(
            f"There is no table {args.table!r}.",
            hint=f"Tables: {', '.join(TABLE_NOTES)}.",
            code="not_found",
        )
    columns = [
        {
            "name": c.name,
            "type": str(c.type),
            "nullable": bool(c.nullable),
            "primary_key": c.primary_key,
            "references": next(
                (f"{fk.column.table.name}.{fk.column.name}" for fk in c.foreign_keys), None
            ),
        }
        for c in table.columns
    ]
    checks = sorted(str(c.sqltext) for c in table.constraints if hasattr(c, "sqltext"))
    # Sorted: `table.constraints` is a set, whose order changed from one process to the next.
    unique = sorted(
        [col.name for col in c.columns]
        for c in table.constraints
        if isinstance(c, UniqueConstraint)
        if type(c).__name__ == "UniqueConstraint"
    ) + [[c.name] for c in table.columns if c.unique]
    rules = [
        msg for when, msg in TRIGGERS.values() if when.split(" ON ")[1].split()[0] == table.name
    ]
    return {
        "table": table.name,
        "holds": TABLE_NOTES[table.name],
        "columns": columns,
        "unique": unique,
        "checks": checks,
        "rules": rules,
    }


class RunSqlArgs(ToolArgs):
    sql: str = Field(
        description="Exactly one SQLite statement (SELECT, INSERT, UPDATE, DELETE, WITH ..., or a "
        "read-only PRAGMA such as table_info). No trailing second statement."
    )


@tool
def run_sql(db: Session, args: RunSqlArgs, ctx: ToolContext) -> dict[str, Any]:
    """Run one SQL statement (SQLite dialect) on the company database and return its result.

    Queries return {columns, rows, row_count}; at most 200 rows / 64 KiB are shown (then
    `truncated` is true: narrow the query). Writes return rows_affected and are committed when the
    call succeeds. Rules: one statement per call; data only (no CREATE/DROP/ALTER); no ATTACH,
    VACUUM, transaction control or setting PRAGMAs; random() is refused; the clock is frozen
    at the session's today ('now', CURRENT_DATE); values are at most 64 KiB; a statement is
    stopped after about 1 second. The database's own rules (CHECK constraints, foreign keys,
    triggers such as the append-only salary history) refuse bad writes; a refused or failing
    statement changes nothing.
    """
    precheck(args.sql)
    return run_statement(db, args.sql, ctx.now)


assert (MAX_ROWS, MAX_BYTES, TIME_LIMIT_S, STEP_BUDGET) == (200, 65536, 1.0, 50_000), "docstring"

TOOLS: tuple[Tool, ...] = (list_tables, describe_table, run_sql)
