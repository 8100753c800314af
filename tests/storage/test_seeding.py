"""apply_seed: upserts by primary key, in the seed's order, in batches, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.registry import load_environment
from app.storage.seeding import SeedError, apply_seed
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Store


@pytest.fixture()
def retail(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = load_environment("retail")
    image = Store(tmp_path / "data", env).template_image()
    path = tmp_path / "session.sqlite"
    sqlite_db.write_image(path, image, wal=True)
    conn = sqlite_db.open_file(path)
    yield env, conn
    conn.close()


def _seed(env, conn, rows):  # type: ignore[no-untyped-def]
    bind = sqlite_db.bind_connection(conn)
    try:
        with Session(bind=bind) as db, db.begin():
            return apply_seed(db, env.metadata, {"rows": rows})
    finally:
        bind.close()


def _customer(cid: int, **extra: object) -> dict[str, object]:
    row = {
        "id": cid,
        "email": f"c{cid}@seed.example",
        "first_name": "Seed",
        "last_name": f"C{cid}",
        "membership": "regular",
        "created_at": "2025-01-01T00:00:00",
    }
    return {**row, **extra}


def test_rows_are_inserted_and_existing_keys_updated_on_the_given_columns(retail) -> None:  # type: ignore[no-untyped-def]
    env, conn = retail
    existing = conn.execute("SELECT id, email, first_name FROM customers LIMIT 1").fetchone()
    written = _seed(
        env,
        conn,
        {
            "customers": [
                _customer(900_001),
                {"id": existing[0], "last_name": "Renamed"},  # an update of one column
                _customer(900_002, phone="+1-555-0100"),  # another column set: a new batch
                {"id": str(existing[0]), "membership": "gold"},  # "7" is the integer key 7
                {"id": 900_001, "first_name": "Again"},  # a key this seed inserted: an update
            ]
        },
    )
    assert written == 5
    row = conn.execute(
        "SELECT email, first_name, last_name, membership FROM customers WHERE id = ?",
        (existing[0],),
    ).fetchone()
    assert row == (existing[1], existing[2], "Renamed", "gold")
    assert conn.execute("SELECT first_name FROM customers WHERE id = 900001").fetchone() == (
        "Again",
    )
    assert conn.execute("SELECT phone FROM customers WHERE id = 900002").fetchone() == (
        "+1-555-0100",
    )


def test_a_large_seed_lands_whole_with_its_children(retail) -> None:  # type: ignore[no-untyped-def]
    env, conn = retail
    customers = [_customer(800_000 + i) for i in range(3_000)]
    addresses = [
        {
            "id": 800_000 + i,
            "customer_id": 800_000 + i,
            "is_default": True,
            "line1": f"{i} Main",
            "city": "Springfield",
            "state": "IL",
            "zip": "62701",
            "country": "USA",
        }
        for i in range(3_000)
    ]
    # Children listed first: tables are applied in foreign-key order whatever the file says.
    assert _seed(env, conn, {"addresses": addresses, "customers": customers}) == 6_000
    count = conn.execute(
        "SELECT count(*) FROM addresses a JOIN customers c ON c.id = a.customer_id "
        "WHERE c.id >= 800000"
    ).fetchone()
    assert count == (3_000,)


def test_a_bad_seed_is_refused_and_changes_nothing(retail) -> None:  # type: ignore[no-untyped-def]
    env, conn = retail
    before = conn.execute("SELECT count(*) FROM customers").fetchone()
    with pytest.raises(SeedError, match="unknown column"):
        _seed(env, conn, {"customers": [_customer(700_001), {"id": 700_002, "nope": 1}]})
    with pytest.raises(SeedError, match="unknown table"):
        _seed(env, conn, {"customerz": []})
    with pytest.raises(Exception, match="UNIQUE"):  # the second row reuses the first's email
        _seed(
            env,
            conn,
            {"customers": [_customer(700_003), _customer(700_004, email="c700003@seed.example")]},
        )
    assert conn.execute("SELECT count(*) FROM customers").fetchone() == before
