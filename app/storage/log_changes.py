"""Change tracking on SQLite read from the step log: what a session wrote since its snapshot.

Invariant: the log names every row that may differ from the snapshot; where it cannot be
trusted, None (the caller reads every table whole). Details:
docs/storage.md#change-tracking-from-the-step-log-sqlite.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from app.storage.meta import LOG_TRACKING, Changes, write_meta
from app.storage.steplog import STEP_COLS_TABLE, STEP_LOG_VERSION, STEP_PREFIX, STEP_ROWS_TABLE

KEYS, GUARDED = "change_keys", "change_guarded"
MIGRATED = "migrated"
_EVENTS = ("insert", "update", "delete")
# One literal of a quote() list and what ends it: a string, a blob, or anything else (a
# number, NULL, Inf) up to the next comma; commas occur only inside strings.
_LITERAL = re.compile(r"('(?:[^']|'')*'|X'[0-9A-Fa-f]*'|[^,']*)(,|$)")


def mark_log_tracked(
    conn: sqlite3.Connection, keys: Mapping[str, Iterable[str]], guarded: Collection[str]
) -> None:
    """Record that `conn`'s changes are read from its step log, with what the reader needs:
    per table the columns references resolve by, and the foreign-key-guarded tables."""
    write_meta(
        conn,
        {
            "change_tracking": LOG_TRACKING,
            KEYS: json.dumps({t: list(c) for t, c in keys.items()}, separators=(",", ":")),
            GUARDED: json.dumps(sorted(guarded), separators=(",", ":")),
        },
    )


def literals(values: str) -> list[str] | None:
    """A quote() list (`'a,b',1,NULL,X'00'`) split into its literals; None when it is not one."""
    out: list[str] = []
    pos = 0
    while values and pos <= len(values):
        found = _LITERAL.match(values, pos)
        if found is None:
            return None
        out.append(found.group(1))
        if not found.group(2):  # the end
            return out if found.end() == len(values) else None
        pos = found.end()
    return out


def _trigger_names(table: str) -> tuple[str, ...]:
    return tuple(f"{STEP_PREFIX}{table}_{e}" for e in _EVENTS)


def changes_from_log(
    conn: sqlite3.Connection, meta: Mapping[str, str], tables: Iterable[str]
) -> Changes | None:
    """`tracked_changes` for a database marked by `mark_log_tracked`; `meta` is its meta."""
    if meta.get("step_log") != STEP_LOG_VERSION or MIGRATED in meta or "snapshot" not in meta:
        return None
    run = conn.execute
    columns = {
        t: c.split(",") if c else [] for t, c in run(f"SELECT tbl, cols FROM {STEP_COLS_TABLE}")
    }
    wanted = list(tables)
    logged = [t for t in wanted if t in columns]
    # Only a trigger still named after the table it fires on logs that table (its body holds
    # the name as a literal, which a rename does not rewrite).
    # Names compared here rather than in SQL (a concatenation per row): the step log's prefix
    # holds no GLOB wildcard, so the GLOB only narrows what comes back.
    intact = Counter(
        table
        for name, table in run(
            f"SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' "
            f"AND name GLOB '{STEP_PREFIX}*'"
        )
        if name in _trigger_names(table)
    )
    if any(intact[t] != len(_EVENTS) for t in logged):
        return None
    keys: dict[str, list[str]] = json.loads(meta.get(KEYS, "{}"))
    if any(t not in keys for t in wanted):  # not a table of the snapshot (a renamed one)
        return None
    guarded = set(json.loads(meta.get(GUARDED, "[]")))
    changed = {t for t in wanted if t not in columns}  # no rowid, not logged: read whole
    rows: dict[str, set[int]] = {}
    for table, op, old_rid, new_rid in run(
        f"SELECT DISTINCT tbl, op, old_rid, new_rid FROM {STEP_ROWS_TABLE}"
    ).fetchall():
        changed.add(table)
        if op in ("i", "d") and table not in guarded:
            changed.add(f"{table}#key")
        rows.setdefault(table, set()).update(r for r in (old_rid, new_rid) if r is not None)
    rekeyable = [t for t, cols in keys.items() if cols and t in rows and f"{t}#key" not in changed]
    if rekeyable:
        marks = ",".join("?" * len(rekeyable))
        for table, old, new in run(
            f"SELECT tbl, old_vals, new_vals FROM {STEP_ROWS_TABLE} "
            f"WHERE op = 'u' AND tbl IN ({marks})",
            rekeyable,
        ).fetchall():
            if f"{table}#key" in changed:
                continue
            cols = columns[table]
            before, after = literals(old or "") or [], literals(new or "") or []
            if len(before) != len(cols) or len(after) != len(cols):
                changed.add(f"{table}#key")  # unreadable: assume the worst
            elif any(
                before[cols.index(c)] != after[cols.index(c)] for c in keys[table] if c in cols
            ):
                changed.add(f"{table}#key")
    frozen = {t: frozenset(ids) for t, ids in rows.items()}
    return Changes(f"{meta.get('template')}:{meta['snapshot']}", frozenset(changed), frozen)
