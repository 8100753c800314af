"""A task's seed on PostgreSQL: the rows its snapshot holds over the environment's base template.

A session schema is a clone of the base template (pooled: app/storage/postgres/pool.py) with
these rows written over it in the seeding transaction, triggers silent (seeding is no step):
the rows the seed wrote in the SQLite snapshot (`seed_changes` in its meta, read by rowid), each
value as the text COPY sends (psycopg's text dumpers), read by the column type's input function
through `json_populate_recordset`, so the schema holds what a clone of a per-task template
copied whole from the image held (tests/storage/test_pg_seed_rows.py). The rows stay in the schema's
`_stategym_seed`: recycling writes the base's rows back over them (`revert_script`), an
archive keeps them to rebuild the session.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql as pgsql
from psycopg.adapt import PyFormat, Transformer
from sqlalchemy import MetaData, Table, select, text

from app.storage.meta import read_meta, seed_changes
from app.storage.postgres.db import META_TABLE, SEED_TABLE, checked_schema, quoted, serial_columns
from app.storage.sqlite import db as sqlite_db

# The meta keys a session keeps of its snapshot's (the rest is SQLite's change tracking).
KEPT_META = ("env", "template", "snapshot", "now")
_QUIET = "SELECT set_config('stategym.quiet', '{}', true)"  # the step triggers, as an undo


@dataclass(frozen=True)
class SeedRows:
    """What a session of one snapshot holds beyond the base template."""

    meta: dict[str, str]  # the session's `_stategym_meta`
    rows: dict[str, str]  # table -> JSON array of its rows (column -> text), parents first
    whole: frozenset[str]  # tables whose written rows the snapshot does not name: all of them

    @property
    def size(self) -> int:
        return sum(len(r) for r in self.rows.values()) + 256


def seed_rows_of(image: bytes, metadata: MetaData, env_name: str, step_log: str) -> SeedRows:
    """The seed rows of the SQLite snapshot `image` (a few ms: one query per table written)."""
    source = sqlite_db.memory_from_image(image)
    engine = sqlite_db.bind_engine(source, begin="BEGIN")
    try:
        meta = read_meta(source)
        written = seed_changes(meta)
        if written is not None:
            tables = {t for t in written.tables if "#" not in t}
            named = dict(written.rows or {})
        else:  # a snapshot of a release before seed_changes: every table, whole
            tables, named = set(metadata.tables), {}
        transformer = Transformer()  # no connection: the default adapters, as COPY uses
        rows: dict[str, str] = {}
        whole: set[str] = set()
        with engine.connect() as lite:
            for table in metadata.sorted_tables:
                if table.name not in tables:
                    continue
                query = select(table)
                if table.name in named:
                    ids = json.dumps(sorted(named[table.name]))
                    query = query.where(text("rowid IN (SELECT value FROM json_each(:ids))"))
                    query = query.params(ids=ids)
                else:
                    whole.add(table.name)
                query = query.order_by(text("rowid"))
                rows[table.name] = _rows_json(table, lite.execute(query).all(), transformer)
    finally:
        engine.dispose()
        source.close()
    kept = {k: meta[k] for k in KEPT_META if k in meta}
    kept.setdefault("env", env_name)
    kept["step_log"] = step_log
    return SeedRows(kept, rows, frozenset(whole))


def _rows_json(table: Table, rows: Sequence[Any], transformer: Any) -> str:
    """The rows as a JSON array of objects, every value the text COPY would send for it."""
    names = [c.name for c in table.columns]
    formats = [PyFormat.TEXT] * len(names)
    out = []
    for row in rows:
        dumped = transformer.dump_sequence(tuple(row), formats)
        values = [None if v is None else bytes(v).decode() for v in dumped]
        out.append(dict(zip(names, values, strict=True)))
    return json.dumps(out, separators=(",", ":"))


def silent(statements: list[str]) -> str:
    """`statements` as one script, the step triggers silent and foreign keys checked at its end."""
    script = [_QUIET.format("on"), "SET CONSTRAINTS ALL DEFERRED", *statements]
    return ";\n".join([*script, "SET CONSTRAINTS ALL IMMEDIATE", _QUIET.format("off")])


def rows_script(raw: Any, schema: str, metadata: MetaData, rows: dict[str, str]) -> list[str]:
    """Statements writing `rows` (table -> JSON array) over `schema`'s: an upsert by primary key
    per table, parents first; a table without one gets its rows inserted. For `silent`."""
    s = quoted(checked_schema(schema))
    out = []
    for table in metadata.sorted_tables:
        if table.name not in rows:
            continue
        t = f"{s}.{quoted(table.name)}"
        cols = ", ".join(quoted(c.name) for c in table.columns)
        literal = pgsql.Literal(rows[table.name]).as_string(raw)
        insert = (
            f"INSERT INTO {t} ({cols}) SELECT {cols} FROM "
            f"json_populate_recordset(NULL::{t}, {literal}::json)"
        )
        pk = [quoted(c.name) for c in table.primary_key.columns]
        if pk:
            others = [quoted(c.name) for c in table.columns if not c.primary_key]
            action = (
                "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in others)
                if others
                else "DO NOTHING"
            )
            insert += f" ON CONFLICT ({', '.join(pk)}) {action}"
        out.append(insert)
    return out


def seed_script(raw: Any, schema: str, metadata: MetaData, seed: SeedRows) -> str:
    """One script making base-template clone `schema` the snapshot's: its rows (tables written
    whole without a primary key emptied first), meta, `_stategym_seed`, and each sequence of a
    table written continued after its largest id, as a clone of a template continues it."""
    s = quoted(checked_schema(schema))
    script = []
    for name in sorted(seed.whole):
        if not metadata.tables[name].primary_key.columns:
            script.append(f"DELETE FROM {s}.{quoted(name)}")
    script += rows_script(raw, schema, metadata, seed.rows)
    literal = pgsql.Literal(json.dumps(seed.meta, separators=(",", ":"))).as_string(raw)
    script += [
        f"DELETE FROM {s}.{META_TABLE}",
        f"INSERT INTO {s}.{META_TABLE} (key, value) SELECT key, value FROM "
        f"json_each_text({literal}::json)",
    ]
    if seed.rows:
        kept = "{" + ",".join(f"{json.dumps(t)}:{r}" for t, r in seed.rows.items()) + "}"
        script.append(
            f"INSERT INTO {s}.{SEED_TABLE} (tbl, rows) SELECT key, value FROM "
            f"json_each({pgsql.Literal(kept).as_string(raw)}::json)"
        )
    for table, column in serial_columns(metadata):
        if table.name in seed.rows:
            t, c = f"{s}.{quoted(table.name)}", quoted(column)
            script.append(
                f"SELECT setval(pg_get_serial_sequence('{t}', '{column}'), top) FROM "
                f"(SELECT max({c}) AS top FROM {t}) m WHERE top <> 0"
            )
    return silent(script)


def revert_script(schema: str, base: str, metadata: MetaData, tables: list[str]) -> str:
    """One script writing base template `base`'s rows back over the seed rows of `schema` (at
    step 0: as seeded), `tables` those `_stategym_seed` names: a row the base has is updated
    back, any other deleted (children first); then `_stategym_seed` is emptied. Every table
    named must have a primary key (recycling refuses models with one that has none)."""
    s, b = quoted(checked_schema(schema)), quoted(checked_schema(base))
    updates: list[str] = []
    deletes: list[str] = []
    for table in metadata.sorted_tables:
        if table.name not in tables:
            continue
        name = table.name.replace("'", "''")
        t, src = f"{s}.{quoted(table.name)}", f"{b}.{quoted(table.name)}"
        pk = ", ".join(quoted(c.name) for c in table.primary_key.columns)
        x_pk = ", ".join(f"x.{quoted(c.name)}" for c in table.primary_key.columns)
        y_pk = ", ".join(f"y.{quoted(c.name)}" for c in table.primary_key.columns)
        cols = ", ".join(quoted(c.name) for c in table.columns)
        keys = (
            f"SELECT {pk} FROM json_populate_recordset(NULL::{t}, "
            f"(SELECT rows FROM {s}.{SEED_TABLE} WHERE tbl = '{name}'))"
        )
        # One key column (every shipped table): `= ANY (ARRAY(...))`, found by the key's index.
        single = len(table.primary_key.columns) == 1
        seeded = f"{x_pk} = ANY (ARRAY({keys}))" if single else f"({x_pk}) IN ({keys})"
        in_base = f"EXISTS (SELECT 1 FROM {src} y WHERE ({y_pk}) = ({x_pk}))"
        updates.append(
            f"UPDATE {t} x SET ({cols}) = (SELECT {cols} FROM {src} y WHERE ({y_pk}) = ({x_pk})) "
            f"WHERE {seeded} AND {in_base}"
        )
        deletes.insert(0, f"DELETE FROM {t} x WHERE {seeded} AND NOT {in_base}")
    return silent([*updates, *deletes, f"DELETE FROM {s}.{SEED_TABLE}"])
