"""Inspection on PostgreSQL: `stategym sessions` and `/admin` read session schemas through the
backend's read-only view (app/storage/base.py), as they read SQLite files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from app.registry import load_environment
from app.server.api import create_app
from app.storage.backend import sync_pg_url
from tests.authoring.test_sessions_cli import build_rollouts, sg
from tests.conftest import (
    PG_URL,
    backend_settings,
    drop_pg_schemas,
    new_pg_prefix,
    pg_unavailable_reason,
)
from tests.server.test_admin_api import AUTH, TOKEN

PENDING = "#W90200010"  # the order retail-020 cancels


# "schemas": closed sessions keep their schemas (no schema pool); "archives": with a pool, the
# closed ones are archived (app/storage/postgres/archive.py) and every read rebuilds them.
@pytest.fixture(scope="module", params=["schemas", "archives"])
def made(request, tmp_path_factory) -> Iterator[tuple[Path, str, dict[str, str]]]:
    reason = pg_unavailable_reason()
    if reason:
        pytest.skip(reason)
    prefix = new_pg_prefix()
    data_dir = tmp_path_factory.mktemp("pginspect") / "data"
    pool = 1 if request.param == "archives" else 0
    settings = backend_settings("postgres", data_dir, prefix, pg_schema_pool=pool)
    try:
        ids = build_rollouts(data_dir, settings)
        if request.param == "archives":
            archived = _archived(prefix)
            assert {ids["gold"], ids["noop"]} <= archived and ids["open"] not in archived
        yield data_dir, prefix, ids
    finally:
        drop_pg_schemas(prefix)


def _archived(prefix: str) -> set[str]:
    engine = create_engine(sync_pg_url(PG_URL))
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text(f'SELECT session_id FROM "{prefix}_archive".archived_sessions')
            )
            return {row[0] for row in found}
    finally:
        engine.dispose()


def pg_json(made: tuple[Path, str, dict[str, str]], *args: str) -> Any:
    import json

    data_dir, prefix, _ids = made
    result = sg(
        *args,
        "--data-dir",
        str(data_dir),
        "--json",
        env={"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": prefix},
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_sessions_cli_lists_shows_diffs_and_verifies_on_postgres(made):
    _data_dir, _prefix, ids = made
    listed = pg_json(made, "sessions", "list")
    assert {r["id"] for r in listed} == set(ids.values())
    assert all(r["file_present"] for r in listed)
    shown = pg_json(made, "sessions", "show", ids["gold"])
    assert shown["tables"]["orders"] > 0 and shown["meta"]["status"] == "closed"
    rows = pg_json(
        made, "sessions", "show", ids["gold"], "orders", "--where", f"order_number={PENDING}"
    )
    assert rows["rows"][0][rows["columns"].index("status")] == "cancelled"
    diff = pg_json(made, "sessions", "diff", ids["gold"])
    assert diff["tables"]["orders"]["changed_rows"][0]["changes"]["status"] == [
        "pending",
        "cancelled",
    ]
    assert pg_json(made, "sessions", "diff", ids["gold"], "--against", "gold")["tables"] == {}
    gold = pg_json(made, "sessions", "verify", ids["gold"])
    assert gold["reward"] == 1.0 and gold["matches_stored"] is True
    noop = pg_json(made, "sessions", "verify", ids["noop"])
    assert noop["reward"] == 0.0 and noop["matches_stored"] is True


def test_inspection_never_writes_a_session_schema(made):
    data_dir, prefix, ids = made
    engine = create_engine(sync_pg_url(PG_URL))
    schema = f"{prefix}_s_{ids['open']}"
    try:
        with engine.connect() as conn:
            before = conn.execute(text(f'SELECT key, value FROM "{schema}"._stategym_meta')).all()
        pg_json(made, "sessions", "diff", ids["open"])
        pg_json(made, "sessions", "verify", ids["open"])
        with engine.connect() as conn:
            after = conn.execute(text(f'SELECT key, value FROM "{schema}"._stategym_meta')).all()
    finally:
        engine.dispose()
    assert sorted(before) == sorted(after)


def test_export_says_it_needs_sqlite_files(made, tmp_path):
    data_dir, prefix, ids = made
    env = {"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": prefix}
    out = sg(
        "sessions",
        "export",
        ids["gold"],
        str(tmp_path / "x.sqlite"),
        "--data-dir",
        str(data_dir),
        env=env,
    )
    assert out.exit_code == 1 and "pg_dump" in out.output
    # `stategym browse` serves PostgreSQL sessions too (tests/explorer/test_explorer.py); only the
    # raw SQL view (Datasette) needs files.


async def test_admin_api_on_postgres(made):
    data_dir, prefix, ids = made
    settings = backend_settings("postgres", data_dir, prefix, admin_token=TOKEN)
    app = create_app(settings, load_environment("retail"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            listed = (await client.get("/admin/sessions", headers=AUTH)).json()
            assert {s["id"] for s in listed["sessions"]} == set(ids.values())
            shown = await client.get(f"/admin/sessions/{ids['gold']}", headers=AUTH)
            assert shown.status_code == 200 and shown.json()["tables"]["orders"] > 0
            rows = await client.get(
                f"/admin/sessions/{ids['noop']}/tables/orders",
                params={"where": f"order_number={PENDING}"},
                headers=AUTH,
            )
            body = rows.json()
            assert body["rows"][0][body["columns"].index("status")] == "pending"
            diff = await client.get(
                f"/admin/sessions/{ids['noop']}/diff", params={"against": "gold"}, headers=AUTH
            )
            assert diff.json()["tables"]["orders"]["changed"] == 1
            download = await client.get(f"/admin/sessions/{ids['gold']}/download", headers=AUTH)
            assert download.status_code == 501 and "pg_dump" in download.json()["error"]["message"]
