"""A tool call's SQL work is interrupted after the configured time and rolled back."""

from __future__ import annotations

import time

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, tool
from app.storage.runner import run_tool
from app.storage.sqlite import db as sqlite_db
from tests.support.warehouse_env import ENVIRONMENT, Move


class NoArgs(ToolArgs):
    pass


@tool
def runaway_report(db: Session, args: NoArgs, ctx: ToolContext) -> int:
    """Write a row, then run a query that never ends (a recursive CTE without a bound)."""
    db.execute(insert(Move).values(item_id=1, delta=1, reason="before", at=ctx.now))
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    return db.execute(text(endless)).scalar_one()


def test_runaway_sql_is_interrupted_and_rolled_back():
    conn = sqlite_db.open_memory()
    engine = sqlite_db.bind_engine(conn)
    ENVIRONMENT.metadata.create_all(engine)
    with Session(bind=engine) as db, db.begin():
        db.execute(
            insert(ENVIRONMENT.metadata.tables["items"]).values(
                id=1, sku="S-1", name="x", quantity=1, price=1.0
            )
        )
    ctx = ToolContext(now=ENVIRONMENT.default_now, session_id="t")
    started = time.monotonic()
    outcome = run_tool(engine, runaway_report, {}, ctx, time_limit_ms=200)
    elapsed = time.monotonic() - started
    assert outcome["error"]["code"] == "time_limit"
    assert "200 ms" in outcome["error"]["message"]
    assert elapsed < 10  # interrupted, not run to the end (a generous bound, not a benchmark)
    with Session(bind=engine) as db:
        assert db.execute(select(func.count()).select_from(Move)).scalar_one() == 0
    # The handler is removed after the call: a later long-ish query is not interrupted.
    assert conn.execute(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) "
        "SELECT max(x) FROM c"
    ).fetchone() == (200000,)


@tool
def waiting_report(db: Session, args: NoArgs, ctx: ToolContext) -> int:
    """A query that waits 300 ms (a sleeping function: like a thread kept off the GIL or a core
    on a loaded machine), then works a little."""
    waited = "WITH RECURSIVE c(x) AS (SELECT pause(300) UNION ALL SELECT x + 1 FROM c LIMIT 50000)"
    return db.execute(text(waited + " SELECT count(*) FROM c")).scalar_one()


def test_the_limit_counts_work_not_waiting():
    """The limit is on the calling thread's CPU time: a call kept waiting past it (a loaded
    machine) is not cut, so the same call, a gold replay's included, answers the same."""
    conn = sqlite_db.open_memory()

    def pause(ms: int) -> int:
        time.sleep(ms / 1000)
        return 0

    conn.create_function("pause", 1, pause)
    engine = sqlite_db.bind_engine(conn)
    ENVIRONMENT.metadata.create_all(engine)
    ctx = ToolContext(now=ENVIRONMENT.default_now, session_id="t")
    started = time.monotonic()
    outcome = run_tool(engine, waiting_report, {}, ctx, time_limit_ms=100)
    assert time.monotonic() - started > 0.1
    assert outcome.get("output") == 50000, outcome
