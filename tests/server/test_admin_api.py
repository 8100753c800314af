"""The read-only `/admin` API on session databases made by real retail rollouts."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.authoring.test_sessions_cli import build_rollouts
from tests.conftest import TEST_SECRET

TOKEN = "admin-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("admin") / "data"
    return data_dir, build_rollouts(data_dir)


@asynccontextmanager
async def admin_client(
    data_dir: Path, token: str | None = TOKEN
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET, admin_token=token)
    app = create_app(settings, load_environment("retail"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


def fingerprint(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


async def test_admin_api_is_off_without_a_token(made):
    data_dir, _ids = made
    async with admin_client(data_dir, token=None) as client:
        answer = await client.get("/admin/sessions", headers=AUTH)
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "not_found"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
    ],
)
async def test_wrong_or_missing_token_is_401(made, headers):
    data_dir, ids = made
    async with admin_client(data_dir) as client:
        for path in ("/admin/sessions", f"/admin/sessions/{ids['gold']}/download"):
            answer = await client.get(path, headers=headers)
            assert answer.status_code == 401, path
            assert answer.json()["error"]["type"] == "unauthorized"


def test_short_admin_token_is_refused():
    with pytest.raises(ValueError, match="16"):
        Settings(admin_token="short")


async def test_list_show_rows_and_paging(made):
    data_dir, ids = made
    async with admin_client(data_dir) as client:
        listed = (await client.get("/admin/sessions", headers=AUTH)).json()["sessions"]
        assert {s["id"] for s in listed} == set(ids.values())
        failed = await client.get("/admin/sessions", params={"reward": "<1"}, headers=AUTH)
        assert [s["id"] for s in failed.json()["sessions"]] == [ids["noop"]]
        page = await client.get("/admin/sessions", params={"limit": 1, "offset": 1}, headers=AUTH)
        assert len(page.json()["sessions"]) == 1
        shown = (await client.get(f"/admin/sessions/{ids['gold']}", headers=AUTH)).json()
        assert shown["session"]["reward"] == 1.0 and shown["verify"]["reward"] == 1.0
        assert shown["tables"]["orders"] > 0
        rows = await client.get(
            f"/admin/sessions/{ids['gold']}/tables/orders",
            params={"where": ["order_number=#W90200010", "customer_id=102000"]},
            headers=AUTH,
        )
        body = rows.json()
        assert body["total"] == 1
        assert body["rows"][0][body["columns"].index("status")] == "cancelled"
        first = await client.get(
            f"/admin/sessions/{ids['gold']}/tables/products",
            params={"limit": 2, "offset": 0},
            headers=AUTH,
        )
        second = await client.get(
            f"/admin/sessions/{ids['gold']}/tables/products",
            params={"limit": 2, "offset": 2},
            headers=AUTH,
        )
        assert len(first.json()["rows"]) == 2 and first.json()["rows"] != second.json()["rows"]
        # A value is bound as a parameter: SQL in it matches nothing and runs nothing.
        injected = await client.get(
            f"/admin/sessions/{ids['gold']}/tables/orders",
            params={"where": "status=pending' OR '1'='1"},
            headers=AUTH,
        )
        assert injected.status_code == 200 and injected.json()["total"] == 0


@pytest.mark.parametrize(
    "path, status",
    [
        ("/admin/sessions/{zero}", 404),
        ("/admin/sessions/..%2F..%2Fcontrol", 404),
        ("/admin/sessions/abc.def", 404),
        ("/admin/sessions/{gold}/tables/sqlite_master", 400),
        ("/admin/sessions/{gold}/tables/orders?where=status%20OR%201%3D1%20--=x", 400),
        ("/admin/sessions/{gold}/tables/orders?where=id=notanumber", 400),
        ("/admin/sessions/{gold}/tables/orders?limit=0", 422),
        ("/admin/sessions/{gold}/diff?against=elsewhere", 422),
        ("/admin/sessions?status=weird", 422),
        ("/admin/sessions?since=tomorrow", 400),
    ],
)
async def test_bad_requests_are_4xx(made, path, status):
    data_dir, ids = made
    async with admin_client(data_dir) as client:
        answer = await client.get(path.format(zero="0" * 32, **ids), headers=AUTH)
    assert answer.status_code == status, answer.text
    assert "Traceback" not in answer.text


async def test_diff_against_seed_and_gold(made):
    data_dir, ids = made
    async with admin_client(data_dir) as client:
        seed = (await client.get(f"/admin/sessions/{ids['gold']}/diff", headers=AUTH)).json()
        change = seed["tables"]["orders"]["changed_rows"][0]
        assert change["changes"]["status"] == ["pending", "cancelled"]
        gold = await client.get(
            f"/admin/sessions/{ids['noop']}/diff", params={"against": "gold"}, headers=AUTH
        )
        assert gold.json()["tables"]["orders"]["changed"] == 1


async def test_download_is_an_openable_copy(made, tmp_path):
    data_dir, ids = made
    async with admin_client(data_dir) as client:
        answer = await client.get(f"/admin/sessions/{ids['open']}/download", headers=AUTH)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/vnd.sqlite3"
    assert ids["open"] in answer.headers["content-disposition"]
    target = tmp_path / "copy.sqlite"
    target.write_bytes(answer.content)
    conn = sqlite3.connect(target)
    try:
        assert conn.execute("SELECT status FROM orders WHERE id = 102002").fetchone() == (
            "cancelled",
        )
    finally:
        conn.close()


async def test_admin_reads_never_write_session_files(made):
    data_dir, ids = made
    before = fingerprint(data_dir / "sessions")
    async with admin_client(data_dir) as client:
        for sid in ids.values():
            for suffix in ("", "/tables/orders", "/diff", "/diff?against=gold", "/download"):
                answer = await client.get(f"/admin/sessions/{sid}{suffix}", headers=AUTH)
                assert answer.status_code == 200, (suffix, answer.text)
    assert fingerprint(data_dir / "sessions") == before  # same files, same bytes, no -wal/-shm


async def test_missing_or_corrupt_files_and_snapshots_are_4xx(made, tmp_path):
    data_dir, ids = made
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    for file in (copy / "sessions" / "retail").glob(f"{ids['gold']}.sqlite*"):
        file.unlink()  # its file, or the pack it became at close
    # A plain file beside a pack is read first.
    (copy / "sessions" / "retail" / f"{ids['noop']}.sqlite").write_bytes(b"\0garbage" * 512)
    shutil.rmtree(copy / "snapshots", ignore_errors=True)  # an earlier release's snapshot files
    async with admin_client(copy) as client:
        gone = await client.get(f"/admin/sessions/{ids['gold']}/tables/orders", headers=AUTH)
        assert gone.status_code == 404 and "no database file" in gone.json()["error"]["message"]
        corrupt = await client.get(f"/admin/sessions/{ids['noop']}/download", headers=AUTH)
        assert corrupt.status_code == 409
        # A snapshot is rebuilt in memory from the template and the stored task (no file).
        no_seed = await client.get(f"/admin/sessions/{ids['open']}/diff", headers=AUTH)
        assert no_seed.status_code == 200 and no_seed.json()["against"] == "seed"
        shutil.rmtree(copy / "templates")
        no_template = await client.get(f"/admin/sessions/{ids['open']}/diff", headers=AUTH)
        assert no_template.status_code == 404
        assert "not on disk" in no_template.json()["error"]["message"]
    assert not (copy / "snapshots").exists()  # the admin API wrote nothing
    assert not (copy / "templates").exists()
