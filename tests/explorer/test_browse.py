"""`stategym browse`: Datasette over real session databases, read-only, on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.browse import build_datasette
from app.cli.main import cli
from tests.authoring.test_sessions_cli import build_rollouts
from tests.conftest import REPO, TEST_SECRET, free_port, stop_server


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("browse") / "data"
    return data_dir, build_rollouts(data_dir)


def start_browse(data_dir: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """Run `stategym browse` on a free port; returns (process, base URL) once it answers."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "app",
        "browse",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        *extra,
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"browse exited early ({proc.returncode}):\n{output}")
        try:
            if httpx.get(url + "/-/static/explorer.css", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError("stategym browse did not answer within 60 s")


def files_of(folder: Path) -> dict[str, str]:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


async def test_datasette_serves_each_session_by_id_read_only(made, tmp_path):
    data_dir, ids = made
    sessions_dir = data_dir / "sessions" / "retail"
    before = files_of(sessions_dir)
    ds = build_datasette(data_dir, scratch=tmp_path)
    await ds.invoke_startup()
    names = {d["name"] for d in (await ds.client.get("/-/databases.json")).json()}
    assert names == {*ids.values(), "control"}
    for name, status in (("gold", "cancelled"), ("noop", "pending"), ("open", "cancelled")):
        rows = await ds.client.get(f"/{ids[name]}/orders.json?id=102002&_shape=array")
        assert rows.json()[0]["status"] == status, name
    control = await ds.client.get(f"/control/sessions.json?id={ids['gold']}&_shape=array")
    assert control.json()[0]["reward"] == 1.0
    # Writes are refused: Datasette runs only SELECT on read-only connections.
    refused = await ds.client.get(f"/{ids['gold']}.json?sql=delete+from+orders")
    assert refused.status_code == 400
    assert files_of(sessions_dir) == before  # no byte changed, no -wal/-shm appeared


async def test_rows_still_in_a_live_sessions_wal_are_shown(made, tmp_path):
    data_dir, ids = made
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    path = copy / "sessions" / "retail" / f"{ids['open']}.sqlite"
    # A live writer: its committed change sits in the -wal file while the connection is open.
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("UPDATE orders SET status = 'processed' WHERE id = 102002")
        writer.commit()
        assert path.with_name(path.name + "-wal").stat().st_size > 0
        ds = build_datasette(copy, sessions=[ids["open"]], scratch=tmp_path)
        await ds.invoke_startup()
        rows = await ds.client.get(f"/{ids['open']}/orders.json?id=102002&_shape=array")
        assert rows.json()[0]["status"] == "processed"
    finally:
        writer.close()


def test_browse_rejects_bad_session_ids(made, tmp_path):
    data_dir, ids = made
    for bad, message in (("../control", "not a session id"), ("0" * 32, "unknown")):
        result = CliRunner().invoke(cli, ["browse", "--data-dir", str(data_dir), "--session", bad])
        assert result.exit_code == 1 and message in result.output
    empty = CliRunner().invoke(cli, ["browse", "--data-dir", str(tmp_path / "none")])
    assert empty.exit_code == 1 and "no sessions" in empty.output


def test_browse_command_serves_on_localhost(made):
    data_dir, ids = made
    proc, url = start_browse(data_dir, "--session", ids["gold"])
    try:
        # Datasette's raw SQL view, mounted under /-/datasette/ next to the run explorer.
        sql = f"{url}/-/datasette"
        rows = httpx.get(f"{sql}/{ids['gold']}/orders.json?id=102002&_shape=array", timeout=10)
        assert rows.json()[0]["status"] == "cancelled"
        listed = httpx.get(f"{sql}/-/databases.json", timeout=10).json()
        assert {d["name"] for d in listed} == {ids["gold"], "control"}
    finally:
        stop_server(proc)


async def test_without_the_datasette_extra_the_explorer_serves_alone(made, monkeypatch):
    """Datasette is an extra (pyproject.toml): an install without it browses runs, no SQL view."""
    from app.cli.browse import browse_app, explorer_for
    from app.settings import Settings

    data_dir, ids = made
    monkeypatch.setitem(sys.modules, "datasette", None)  # what an install without it finds
    settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET)
    with explorer_for(settings, [ids["gold"]]) as (x, ds):
        assert ds is None and not x.datasette
        app = browse_app(x, ds, settings)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            page = await c.get("/")
            assert page.status_code == 200 and ids["gold"][:12] in page.text
            assert "/-/datasette" not in page.text
            assert (await c.get(f"/-/datasette/{ids['gold']}")).status_code == 404
