"""A session's steps as the explorer shows them: row diffs, call sequences, a table at step k.

Read on the read-only view's `scratch` connection (app/storage/base.py): an earlier state is the
step log undone inside a savepoint that is always rolled back, so nothing here is ever kept, on
either backend.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, or_, select

from app.core.tasks import task_from_data
from app.errors import BadRequest, CannotRewind
from app.runtime.inspection import Inspector, jsonable
from app.runtime.timeline import step_entries, timeline
from app.storage.control import SessionRecord
from app.storage.steplog import UndoUnavailable, step_log
from app.verify.gold import GoldCache
from app.verify.state.raw_values import raw_column, reader


def row_changes(change: dict[str, Any]) -> dict[str, Any]:
    """One logged row change as columns with their before and after values, and whether the
    column changed (an insert or delete changes every column it has)."""
    before, after = change.get("before"), change.get("after")
    names = list((after or before or {}).keys())
    for name in before or {}:
        if name not in names:
            names.append(name)
    columns = []
    for name in names:
        b = None if before is None else before.get(name)
        a = None if after is None else after.get(name)
        changed = before is None or after is None or b != a
        columns.append({"name": name, "before": b, "after": a, "changed": changed})
    updated = [c["name"] for c in columns if c["changed"]] if before and after else []
    return {"table": change["table"], "op": change["op"], "columns": columns, "changed": updated}


def rollout_steps(
    insp: Inspector, record: SessionRecord, gold: GoldCache
) -> tuple[bool, list[dict[str, Any]], str]:
    """(keeps a step log, its steps as the timeline shows them, where the step rewards come
    from). A session verified after its last step shows the step rewards verify paid (stored
    with its result); any other has them computed again (app/runtime/timeline.py), which
    replays each step's state and costs a verify."""
    env = insp.env_of(record)
    stored = (record.verify or {}).get("step_rewards")
    with insp.scratch(record) as conn:
        log = step_log(conn)
        if log is None:
            return False, [], "none"
        steps = log.steps()
        if not (isinstance(stored, list) and steps and len(stored) == len(steps)):
            result = timeline(env, gold, task_from_data(record.task), conn)
            return True, list(result["steps"]), "recomputed"
        counts = log.change_counts()
        changes = log.changes()
    return True, step_entries(steps, stored, counts, changes), "verify"


def task_calls(insp: Inspector, record: SessionRecord) -> list[dict[str, Any]] | None:
    """The session's logged calls (tool, canonical arguments, outcome); None without a log."""
    with insp.scratch(record) as conn:
        log = step_log(conn)
        if log is None:
            return None
        return [
            {"step": s.idx, "tool": s.tool, "args": s.args, "outcome": s.outcome}
            for s in log.steps()
        ]


def table_at_step(
    insp: Inspector,
    record: SessionRecord,
    table_name: str,
    step: int | None,
    offset: int,
    limit: int,
) -> dict[str, Any]:
    """A page of `table_name`'s rows as they were after step `step` (None: now), primary-key
    order, with the rows step `step` wrote marked."""
    table = insp.table_of(record, table_name)
    if not insp.file_present(record):
        raise BadRequest(f"session {record.id}'s database is gone (retention); no rows to show")
    pk = list(table.primary_key.columns)
    with insp.scratch(record) as conn:
        log = step_log(conn)
        count = log.count() if log is not None else 0
        if step is not None and log is None:
            raise CannotRewind(f"session {record.id} keeps no step log: only its state now")
        at = count if step is None else step
        if not 0 <= at <= count:
            raise BadRequest(f"step must be from 0 (the seed) to {count} (the last step)")
        touched: dict[str, str] = {}
        keys: list[Any] = []  # where-clauses of the rows step `at` wrote (still there)
        if log is not None and at > 0:
            for change in log.changes([at]).get(at, []):
                if change.table == table.name:
                    image = change.after if change.after is not None else change.before
                    key = tuple(str(jsonable((image or {}).get(c.name))) for c in pk)
                    touched["|".join(key)] = change.op
                    if change.after is not None:
                        keys.append(and_(*[c == change.after.get(c.name) for c in pk]))
        try:
            if log is not None and at < count:
                with log.scratch():
                    log.undo_to(at)
                    page = _rows(conn, table, pk, offset, limit)
                    written = _rows(conn, table, pk, 0, 100, or_(*keys)) if keys else None
            else:
                page = _rows(conn, table, pk, offset, limit)
                written = _rows(conn, table, pk, 0, 100, or_(*keys)) if keys else None
        except UndoUnavailable as exc:
            raise CannotRewind(f"cannot show step {at} of session {record.id}: {exc}") from None
    pk_index = [page["columns"].index(c.name) for c in pk]
    marks = []
    for row in page["rows"]:
        row_key = "|".join(str(row[i]) for i in pk_index)
        marks.append(touched.get(row_key))
    return {
        "written": written["rows"] if written else [],
        "table": table.name,
        "tables": sorted(insp.env_of(record).metadata.tables),
        "step": at,
        "steps": count,
        "marks": marks,
        "deleted_here": sum(1 for op in touched.values() if op == "delete"),
        **page,
    }


def _rows(
    conn: Any, table: Any, pk: list[Any], offset: int, limit: int, where: Any = None
) -> dict[str, Any]:
    # Raw reads: a value an agent wrote that its column's type cannot read is shown tagged,
    # never raised (app/verify/state/raw_values.py).
    columns = list(table.c)
    reads = [reader(col, conn.dialect) for col in columns]
    query = select(*[raw_column(col, conn.dialect) for col in columns]).order_by(*pk)
    count = select(func.count()).select_from(table)
    if where is not None:
        query, count = query.where(where), count.where(where)
    total = conn.execute(count).scalar_one()
    rows = [
        [jsonable(read(v)) for read, v in zip(reads, row, strict=True)]
        for row in conn.execute(query.limit(limit).offset(offset))
    ]
    return {
        "columns": [c.name for c in columns],
        "rows": rows,
        "total": int(total),
        "offset": offset,
        "limit": limit,
    }
