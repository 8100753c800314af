"""With the PostgreSQL server's autovacuum off, a server vacuums the tables its sessions churn
(app/storage/postgres/vacuum.py): one worker at a time, tables over autovacuum's threshold.

The churn is the control table's: two real rollouts' records, then updated in place until their
dead row versions pass the threshold (what thousands of verifies and closes leave)."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import Engine, create_engine, text

from app.registry import load_environment
from app.runtime.lifecycle import serving
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.storage.backend import sync_pg_url
from app.storage.postgres.backend import PgBackend
from app.storage.postgres.vacuum import DEAD_ROWS_THRESHOLD, Vacuumer
from tests.conftest import PG_URL, backend_settings
from tests.support.rollouts import load_tasks

DEAD_ROWS = 4 * DEAD_ROWS_THRESHOLD


def _autovacuum_on(engine: Engine) -> bool:
    with engine.connect() as conn:
        return conn.exec_driver_sql("SHOW autovacuum").scalar() == "on"


def _churn(schema: str, rows: int) -> None:
    """`rows` dead versions of the control records, reported to the statistics at once."""
    engine = create_engine(sync_pg_url(PG_URL))
    try:
        with engine.begin() as conn:
            for _ in range(rows // 2):
                conn.exec_driver_sql(f'UPDATE "{schema}".sessions SET reward = reward')
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
    finally:
        engine.dispose()  # the backend's exit flushes its statistics too


def _table_stats(engine: Engine, schema: str) -> tuple[int, int]:
    """(times vacuumed, dead rows) of the control schema's sessions table."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            text(
                "SELECT vacuum_count, n_dead_tup FROM pg_stat_all_tables "
                "WHERE schemaname = :s AND relname = 'sessions'"
            ),
            {"s": schema},
        ).one()
        return int(row[0]), int(row[1])


async def _two_rollouts(mgr: SessionManager) -> None:
    for task in load_tasks(mgr.env.tasks_path)[:2]:
        seeded = await mgr.seed(parse_seed_body(task))
        await mgr.close(seeded.session_id)


@pytest.fixture
def churned(tmp_path, pg_prefix):
    engine = create_engine(sync_pg_url(PG_URL))
    if _autovacuum_on(engine):
        engine.dispose()
        pytest.skip("this PostgreSQL server runs autovacuum: StateGym leaves vacuuming to it")
    settings = backend_settings("postgres", tmp_path, pg_prefix, maintenance_interval_seconds=1)
    mgr = SessionManager(settings, load_environment("retail"))
    yield mgr, engine, f"{pg_prefix}_control"
    engine.dispose()


async def test_a_server_vacuums_churned_tables_while_it_serves(churned):
    mgr, engine, control = churned
    async with serving(mgr, None, 60):
        await _two_rollouts(mgr)
        _churn(control, DEAD_ROWS)
        assert _table_stats(engine, control)[1] >= DEAD_ROWS
        deadline = time.monotonic() + 30
        while _table_stats(engine, control)[0] == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    vacuumed, dead = _table_stats(engine, control)
    assert vacuumed >= 1 and dead < DEAD_ROWS_THRESHOLD, (vacuumed, dead)


async def test_one_pass_at_a_time_across_workers(churned):
    mgr, engine, control = churned
    await _two_rollouts(mgr)
    _churn(control, DEAD_ROWS)
    backend = mgr.backend
    assert isinstance(backend, PgBackend)
    vacuum = backend.vacuum
    with engine.connect() as holder:  # another worker's pass, in progress
        holder.execute(text("SELECT pg_advisory_lock(:k)"), {"k": vacuum._lock_key})
        assert await asyncio.to_thread(vacuum.run) == []
        holder.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": vacuum._lock_key})
    assert f"{control}.sessions" in await asyncio.to_thread(vacuum.run)
    assert _table_stats(engine, control)[1] < DEAD_ROWS_THRESHOLD
    await mgr.aclose()


def _churn_catalog(schema: str, renames: int) -> None:
    """`renames` dead versions in `pg_namespace`: a schema renamed back and forth, as every
    seed and close renames a pooled schema."""
    engine = create_engine(sync_pg_url(PG_URL))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}_a"')
            for i in range(renames):
                old, new = ("a", "b") if i % 2 == 0 else ("b", "a")
                conn.exec_driver_sql(f'ALTER SCHEMA "{schema}_{old}" RENAME TO "{schema}_{new}"')
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}_a"')
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
    finally:
        engine.dispose()


async def test_the_catalog_is_vacuumed_before_session_tables(churned, pg_prefix):
    """With both churned, a pass that has time for one table takes the catalog's: ordered after
    our tables, `pg_namespace` never got its turn in a soak (64 pooled schemas filled the
    budget) and grew ~2 dead versions a rollout, every lookup walking them."""
    mgr, engine, control = churned
    await _two_rollouts(mgr)
    _churn(control, DEAD_ROWS)
    _churn_catalog(f"{pg_prefix}_renamed", 2 * DEAD_ROWS)
    backend = mgr.backend
    assert isinstance(backend, PgBackend)
    one_table = Vacuumer(engine, backend.vacuum.names, budget_s=0.0)
    try:
        done = await asyncio.to_thread(one_table.run)
    finally:
        one_table.dispose()
    assert len(done) == 1 and done[0].startswith("pg_catalog."), done
    assert f"{control}.sessions" in await asyncio.to_thread(backend.vacuum.run)
    await mgr.aclose()
