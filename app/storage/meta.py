"""A key/value table inside every template, snapshot and session database.

It records what the database is (environment, template fingerprint, task snapshot key, the frozen
clock) and, for sessions, whether it is closed, so every worker sees a close at once.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import MetaData

    from app.sdk.compare_spec import CompareSpec

META_TABLE = "_stategym_meta"
_CREATE = f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def write_meta(conn: sqlite3.Connection, values: dict[str, str]) -> None:
    conn.execute(_CREATE)
    conn.executemany(
        f"INSERT OR REPLACE INTO {META_TABLE}(key, value) VALUES (?, ?)", list(values.items())
    )


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    except sqlite3.OperationalError:
        return {}


def reopened_image(image: bytes) -> tuple[bytes, dict[str, str]]:
    """A database image (an export) with its status set back to open, and its meta; raises
    sqlite3.DatabaseError when `image` is not a database."""
    legacy = bytearray(image)
    if len(legacy) > 19:
        legacy[18] = legacy[19] = 1  # a WAL file's image: read it in rollback-journal mode
    image = bytes(legacy)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.deserialize(image)
        meta = read_meta(conn)
        if meta.get("status") == "closed":
            write_meta(conn, {"status": "open"})
            return conn.serialize(), {**meta, "status": "open"}
        return image, meta
    finally:
        conn.close()


def read_status(conn: sqlite3.Connection) -> str:
    row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'status'").fetchone()
    return row[0] if row else "open"


# --- change tracking --------------------------------------------------------------------------
# Snapshots carry triggers that record, per table, that a row was inserted, updated or deleted
# since the snapshot was taken ("orders"), which rows (their rowids), and, separately, that other
# tables' references to it may now resolve differently ("orders#key": identifying columns changed,
# or rows appeared or disappeared in a table some reference to which is not an enforced foreign
# key). Verify patches the snapshot's dump with the rows written, re-reads whole only the tables
# referencing a "#key" table, and reuses the snapshot's dump for the rest. The record is part of
# each tool call's transaction (a rolled-back call leaves no mark) and lives in the file (it
# survives reopening and every worker sees it).
WRITTEN_TABLE = "_stategym_written"  # (tbl, rid): a table (or "#key" mark) and a rowid or NULL
CHANGES_TABLE = "_stategym_changes"  # versions 2-4: the tables and marks, one row each
ROWS_TABLE = "_stategym_rows"  # versions 3-4: the rowids, one row each
TRACK_PREFIX = "_stategym_track_"
# "2": tables only (snapshots built before row tracking); "3": tables and rows; "4": trigger
# bodies that cannot conflict; "5": one record table without keys, each body one plain INSERT
# (see install_change_tracking).
TRACKING_VERSION = "5"
_ROW_VERSIONS = ("3", "4")
# A database whose changes are read from its step log instead (app/storage/log_changes.py).
LOG_TRACKING = "log1"
_TRIGGERS = ("insert", "update", "delete", "keys")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _checked(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name):  # names come from code, but never trust into SQL
        raise ValueError(f"cannot track changes of {name!r}")
    return name


def _record(*entries: str) -> str:
    # No key on the record table, so a body never conflicts whatever conflict clause the firing
    # statement carries (a body's own is overridden by it: an UPSERT made OR IGNORE an ABORT);
    # a repeated entry is a duplicate row, read as one. Plain VALUES, no NOT EXISTS subquery:
    # every clone of a tracked database parses these bodies (half its schema-load time before).
    return f"INSERT INTO {WRITTEN_TABLE}(tbl, rid) VALUES {', '.join(entries)};"


def foreign_key_guarded(metadata: MetaData, compare: CompareSpec) -> set[str]:
    """Tables every compared reference to which is an enforced foreign key (both backends
    enforce them on every write), so rows appearing or disappearing there change no reference's
    value."""
    tables = metadata.tables
    guarded = set(tables)
    for name, spec in compare.tables.items():
        for column, target in spec.references.items():
            pk = list(tables[target].primary_key.columns)
            if len(pk) != 1 or not tables[name].c[column].references(pk[0]):
                guarded.discard(target)
    return guarded


def install_change_tracking(
    conn: sqlite3.Connection,
    keys: Mapping[str, Iterable[str]],
    *,
    guarded: Collection[str] = (),
    without_rowid: Collection[str] = (),
) -> None:
    """Track every table of `keys`: table -> the columns other tables' references resolve by.

    `guarded`: tables every compared reference to which is an enforced foreign key; a row
    inserted there cannot be referenced yet and one deleted cannot stay referenced, so only a
    change of its identifying columns marks "#key". `without_rowid`: tables whose rows have no
    rowid to record; a write there makes verify re-read the whole table.
    """
    conn.execute(f"CREATE TABLE IF NOT EXISTS {WRITTEN_TABLE} (tbl TEXT NOT NULL, rid INTEGER)")
    for name, columns in keys.items():
        table, cols = _checked(name), [f'"{_checked(c)}"' for c in columns]
        key = f"'{table}#key', NULL"
        appear = [] if name in guarded else [f"({key})"]

        def row(which: str, table: str = table, name: str = name) -> str:
            return f"('{table}', NULL)" if name in without_rowid else f"('{table}', {which}.rowid)"

        events = {
            "insert": ("INSERT", _record(row("NEW"), *appear)),
            "update": ("UPDATE", _record(row("OLD"), row("NEW"))),
            "delete": ("DELETE", _record(row("OLD"), *appear)),
            # No key columns: nothing resolves through this table; the trigger never fires.
            "keys": (f"UPDATE OF {', '.join(cols) or 'rowid'}", _record(f"({key})")),
        }
        create_triggers(conn, TRACK_PREFIX, table, events)
    write_meta(conn, {"change_tracking": TRACKING_VERSION})


def create_triggers(
    conn: sqlite3.Connection, prefix: str, table: str, events: Mapping[str, tuple[str, str]]
) -> None:
    """An AFTER trigger on `table` per `events` entry (suffix -> (event, body)), named
    `<prefix><table>_<suffix>`."""
    for suffix, (event, body) in events.items():
        conn.execute(
            f'CREATE TRIGGER IF NOT EXISTS "{prefix}{table}_{suffix}" '
            f'AFTER {event} ON "{table}" BEGIN {body} END'
        )


def drop_change_tracking(conn: sqlite3.Connection) -> None:
    """Remove the tracking triggers and records (a database whose step log takes over)."""
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND substr(name, 1, ?) = ?",
        (len(TRACK_PREFIX), TRACK_PREFIX),
    ).fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    for table in (WRITTEN_TABLE, CHANGES_TABLE, ROWS_TABLE):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"DELETE FROM {META_TABLE} WHERE key = 'change_tracking'")


# The pristine state of a tracked database, readable on the caller's connection: a context
# manager that points `conn` at it for its duration (None inside: it is gone, read everything).
Origin = Callable[[Any], AbstractContextManager[Any]]


@dataclass(frozen=True)
class Changes:
    """What a session database wrote since the snapshot it was cloned from."""

    snapshot: str  # "<template>:<snapshot key>" (SQLite), "pg:<template schema>" (PostgreSQL)
    tables: frozenset[str]  # tables written, and "<table>#key" markers
    # Row identities written per table (SQLite: rowids; PostgreSQL: integer primary keys); a
    # table written but absent here is read whole. None: rows not recorded.
    rows: Mapping[str, frozenset[int]] | None
    # Where the snapshot's own state can be read when its dump is not kept yet (PostgreSQL: the
    # template schema); None: only a pristine clone's dump is kept (SQLite).
    origin: Origin | None = field(default=None, compare=False)
    # The tracking key of a snapshot whose dump equals the origin's (PostgreSQL: the SQLite
    # snapshot its template was copied from, which verify's seed and gold states patch): equal
    # tables are taken from it, so diffs against those states compare patches only.
    twin: str | None = field(default=None, compare=False)
    # What the snapshot itself wrote over a base it was seeded from, read on the caller's
    # connection (PostgreSQL: a session's seed rows over the base template; its `snapshot` names
    # the base's dump and its `origin` where to read it): the origin's dump is then the base's,
    # patched, instead of a whole read. None: not known.
    seeded: Callable[[Any], Changes | None] | None = field(default=None, compare=False)


def read_tracking_meta(conn: sqlite3.Connection) -> dict[str, str] | None:
    """The meta keys change tracking reads (app/storage/tracking.py); None without a meta."""
    try:
        return dict(
            conn.execute(
                f"SELECT key, value FROM {META_TABLE} WHERE key IN ('template', 'snapshot', "
                "'change_tracking', 'step_log', 'migrated', 'change_keys', 'change_guarded')"
            ).fetchall()
        )
    except sqlite3.OperationalError:  # no meta table: not a StateGym database
        return None


def changes_from_triggers(
    conn: sqlite3.Connection, meta: Mapping[str, str], tables: Iterable[str]
) -> Changes | None:
    """`tracked_changes` for a database with the tracking triggers (`install_change_tracking`):
    what they recorded, or None when any of `tables` lost them (a migration recreated or
    renamed it) or the database predates them."""
    tables = list(tables)
    run = conn.execute
    version = meta.get("change_tracking")
    if version not in ("2", *_ROW_VERSIONS, TRACKING_VERSION) or "snapshot" not in meta:
        return None
    # Only a trigger still named after the table it fires on records that table's name (its
    # body holds the name as a literal, which a rename does not rewrite). One statement reads
    # the record tables present and the intact triggers.
    named = " OR ".join(f"name = '{TRACK_PREFIX}' || tbl_name || '_{s}'" for s in _TRIGGERS)
    present: set[str] = set()
    intact: Counter[str] = Counter()
    for kind, name in run(
        "SELECT type, tbl_name FROM sqlite_master WHERE (type = 'table' AND name IN (?, ?, ?)) "
        f"OR (type = 'trigger' AND ({named}))",
        (WRITTEN_TABLE, CHANGES_TABLE, ROWS_TABLE),
    ).fetchall():
        if kind == "table":
            present.add(name)
        else:
            intact[name] += 1
    if (WRITTEN_TABLE if version == TRACKING_VERSION else CHANGES_TABLE) not in present:
        return None
    if any(intact[table] != len(_TRIGGERS) for table in tables):
        return None
    rows: dict[str, set[int]] | None = None
    if version == TRACKING_VERSION:
        written: set[str] = set()
        rows = {}
        for table, rid in run(f"SELECT tbl, rid FROM {WRITTEN_TABLE}").fetchall():
            written.add(table)
            if rid is not None:
                rows.setdefault(table, set()).add(rid)
        changed = frozenset(written)
    else:
        changed = frozenset(row[0] for row in run(f"SELECT name FROM {CHANGES_TABLE}").fetchall())
        if version in _ROW_VERSIONS and ROWS_TABLE in present:
            rows = {}
            if changed:
                for table, rid in run(f"SELECT tbl, rid FROM {ROWS_TABLE}").fetchall():
                    rows.setdefault(table, set()).add(rid)
    frozen = None if rows is None else {t: frozenset(r) for t, r in rows.items()}
    return Changes(f"{meta.get('template')}:{meta['snapshot']}", changed, frozen)


# --- what a snapshot's seed wrote over its template -------------------------------------------
# A snapshot is built with the tracking triggers installed *before* its seed, so the triggers
# record which rows the seed wrote; those are kept in the meta (`seed_changes`) and the records
# cleared for sessions. Verify then dumps a snapshot by patching its template's dump with those
# rows (app/verify/state/patching.py) instead of reading every base row once per task.
SEED_CHANGES = "seed_changes"


def take_changes(conn: sqlite3.Connection) -> tuple[list[str], dict[str, list[int]]]:
    """The tables (and "#key" markers) and rowids written since tracking began (this version's
    records, `install_change_tracking`); then cleared."""
    tables = sorted({row[0] for row in conn.execute(f"SELECT tbl FROM {WRITTEN_TABLE}")})
    rows: dict[str, list[int]] = {}
    for table, rid in conn.execute(
        f"SELECT DISTINCT tbl, rid FROM {WRITTEN_TABLE} WHERE rid IS NOT NULL ORDER BY tbl, rid"
    ):
        rows.setdefault(table, []).append(rid)
    conn.execute(f"DELETE FROM {WRITTEN_TABLE}")
    return tables, rows


def seed_changes(meta: Mapping[str, str]) -> Changes | None:
    """What the seed of the snapshot described by `meta` wrote over its template, or None (a
    snapshot built before this was recorded). `Changes.snapshot` names the template."""
    raw = meta.get(SEED_CHANGES)
    if raw is None or "template" not in meta:
        return None
    recorded = json.loads(raw)
    rows = {table: frozenset(rids) for table, rids in recorded["rows"].items()}
    return Changes(f"{meta['template']}:", frozenset(recorded["tables"]), rows)


def seed_changes_value(tables: list[str], rows: dict[str, list[int]]) -> str:
    return json.dumps({"tables": tables, "rows": rows}, separators=(",", ":"))
