"""The base dataset: realistic in size, consistent with the schema's rules, drawn from its rng."""

from __future__ import annotations

import random

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.sdk.compare_spec import FRAMEWORK_TABLES
from app.storage.sqlite import db as sqlite_db
from envs.sql import ENVIRONMENT
from envs.sql.replay import open_task_db


def _build(seed: int) -> bytes:
    conn = sqlite_db.open_memory()
    engine = sqlite_db.bind_engine(conn)
    ENVIRONMENT.metadata.create_all(engine)
    with Session(bind=engine) as db, db.begin():
        ENVIRONMENT.build_base(db, random.Random(seed))
    image = sqlite_db.image_of(conn)
    engine.dispose()
    conn.close()
    return image


def test_the_rng_drives_the_data() -> None:
    # That one seed builds the same data twice is the contract's check (envs check).
    assert _build(ENVIRONMENT.base_seed) != _build(ENVIRONMENT.base_seed + 1)


def test_base_data_size_ids_and_consistency() -> None:
    db = open_task_db()
    try:
        with db.engine.connect() as c:
            q = lambda sql: c.execute(text(sql)).all()  # noqa: E731
            counts = {
                t: q(f"SELECT count(*), max(id) FROM {t}")[0]
                for t in ENVIRONMENT.metadata.tables
                if t not in FRAMEWORK_TABLES
            }
            total = sum(n for n, _ in counts.values())
            assert 3_000 <= total <= 6_000, counts
            for table, (n, top) in counts.items():
                assert top is None or top == n < 100_000, table  # explicit ids 1..N
            assert counts["employees"][0] == 240 and counts["departments"][0] == 8
            # Every status is represented, so tasks and questions have material.
            for table, column, values in (
                ("employees", "status", {"active", "on_leave", "terminated"}),
                ("timesheets", "status", {"submitted", "approved", "rejected", "invoiced"}),
                ("invoices", "status", {"draft", "sent", "paid"}),
            ):
                assert {r[0] for r in q(f"SELECT DISTINCT {column} FROM {table}")} >= values
            # Invoices add up to their timesheets' hours x the project's rate.
            bad = q("""SELECT i.number FROM invoices i JOIN projects p ON p.id = i.project_id
                       WHERE abs(i.amount - p.hourly_rate * (SELECT sum(hours) FROM timesheets t
                       WHERE t.invoice_id = i.id)) > 0.005""")
            assert bad == []
            assert q("PRAGMA foreign_key_check") == []
            # Each department has exactly one head (no manager), ids 1..8.
            heads = q("SELECT id FROM employees WHERE manager_id IS NULL ORDER BY id")
            assert [h[0] for h in heads] == list(range(1, 9))
    finally:
        db.close()
