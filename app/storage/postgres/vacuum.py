"""Vacuuming what StateGym churns, on a PostgreSQL server whose autovacuum is off.

Every rollout leaves dead row versions: the control tables' updates and prunes, a recycled
schema's undo and seed-row revert, each schema rename in `pg_namespace`. Autovacuum clears them;
with it off (this project's own CI server runs so) they pile up for ever (bench/history/postgres.md,
"PostgreSQL soak, 20,000 rollouts"). Then each pass vacuums the tables of the catalog
(`pg_catalog`), then of this deployment's schemas, over autovacuum's own threshold, most
dead first, within a time budget (at least one table a pass), one worker at a time. The catalog
goes first: its dead versions slow every name lookup of every session (`pg_namespace` gains two
per rollout, a rename at seed and at close), a session table's only its own schema; ordered
after ours, it never got its turn once 64 pooled schemas' tables filled the budget
(bench/history/postgres.md, "PostgreSQL soak of the vacuuming server").
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from app.storage.postgres.db import SchemaNames, advisory_key, quoted

log = logging.getLogger("stategym.postgres")

# PostgreSQL's own defaults for autovacuum_vacuum_threshold and _scale_factor.
DEAD_ROWS_THRESHOLD = 50
DEAD_ROWS_SCALE = 0.2
PASS_BUDGET_S = 5.0  # a pass starts no further VACUUM once it has taken this long
PASS_TABLES = 256  # at most this many tables a pass
VACUUM_TIMEOUT_MS = 60_000  # one table's VACUUM at most

_OVER_THRESHOLD = text(
    "SELECT relid FROM pg_stat_all_tables "
    "WHERE (schemaname LIKE :ours ESCAPE '\\' OR schemaname = 'pg_catalog') "
    "AND n_dead_tup > :threshold + :scale * n_live_tup "
    "ORDER BY schemaname <> 'pg_catalog', n_dead_tup DESC LIMIT :tables"
)
# A pooled schema is renamed at every seed and close: a table's name is read again, by its
# oid, right before its VACUUM (by the names of the list, a soak's pass missed most of them).
_NAME_NOW = text(
    "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid = :relid"
)


class Vacuumer:
    """`run()` vacuums this deployment's churned tables when the server's autovacuum is off
    (it does nothing when it is on). Its own connections (autocommit: VACUUM refuses a
    transaction), one at a time per pass."""

    def __init__(self, engine: Engine, names: SchemaNames, *, budget_s: float = PASS_BUDGET_S):
        self.engine = create_engine(engine.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self.names = names
        self.budget_s = budget_s
        self._autovacuum: bool | None = None  # read once: a server setting
        self._lock_key = advisory_key(f"{names.prefix}:vacuum")

    def autovacuum_on(self, conn: Connection) -> bool:
        if self._autovacuum is None:
            self._autovacuum = conn.exec_driver_sql("SHOW autovacuum").scalar() == "on"
            if not self._autovacuum:
                log.warning(
                    "the PostgreSQL server runs with autovacuum off: StateGym vacuums the tables "
                    "its sessions churn itself (docs/postgres.md); turn autovacuum on if you can"
                )
        return self._autovacuum

    def run(self) -> list[str]:
        """One pass; the tables it vacuumed (`schema.table`). Never raises for a table that
        went meanwhile or that this role may not vacuum (a warning from PostgreSQL)."""
        with self.engine.connect() as conn:
            if self.autovacuum_on(conn):
                return []
            # Workers and replicas share the tables: one pass at a time, the others skip.
            locked = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self._lock_key})
            if not locked.scalar():
                return []
            try:
                return self._vacuum(conn)
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._lock_key})

    def _vacuum(self, conn: Connection) -> list[str]:
        ours = self.names.prefix.replace("_", "\\_") + "\\_%"
        params = {
            "ours": ours,
            "threshold": DEAD_ROWS_THRESHOLD,
            "scale": DEAD_ROWS_SCALE,
            "tables": PASS_TABLES,
        }
        due = conn.execute(_OVER_THRESHOLD, params).all()
        conn.exec_driver_sql(f"SET statement_timeout = {VACUUM_TIMEOUT_MS}")
        started, done = time.monotonic(), list[str]()
        for (relid,) in due:
            if done and time.monotonic() - started > self.budget_s:
                break
            now = conn.execute(_NAME_NOW, {"relid": relid}).first()
            if now is None:  # dropped since (a schema the pool let go)
                continue
            schema, table = now
            name = f"{quoted(schema)}.{quoted(table)}"
            try:
                conn.exec_driver_sql(f"VACUUM (ANALYZE) {name}")
            except DBAPIError as exc:  # dropped or renamed meanwhile, or a timeout
                log.debug("VACUUM %s skipped: %s", name, exc.orig)
                continue
            done.append(f"{schema}.{table}")
        if done:
            log.info("vacuumed %d table(s) (autovacuum is off)", len(done))
        return done

    def dispose(self) -> None:
        self.engine.dispose()
