"""/admin and `stategym browse` answer only configured Host names (DNS
rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends that Host)."""

from __future__ import annotations

import httpx
import pytest

from app.cli.browse import browse_app, explorer_for
from app.registry import load_environment
from app.server.api import create_app
from app.server.middleware import allowed_host_names, host_name
from app.settings import Settings
from tests.authoring.test_sessions_cli import build_rollouts
from tests.conftest import TEST_SECRET
from tests.server.test_admin_api import AUTH, TOKEN

GOOD = ["127.0.0.1", "127.0.0.1:8000", "localhost:9", "LOCALHOST", "[::1]:8000", "gym.internal"]
BAD = ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "", "localhost.", "[::2]"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("hosts") / "data"
    return data_dir, build_rollouts(data_dir)


def test_host_names_parse():
    assert host_name("[::1]:8000") == "[::1]" and host_name("Example.org:80") == "example.org"
    assert "10.0.0.5" in allowed_host_names([], "10.0.0.5")
    assert "0.0.0.0" not in allowed_host_names([], "0.0.0.0")


async def _get(app, path: str, host: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.get(path, headers={**AUTH, "host": host})


@pytest.mark.parametrize("host", GOOD + BAD)
async def test_admin_checks_the_host_header(made, host):
    data_dir, _ids = made
    settings = Settings(
        data_dir=data_dir, secret_key=TEST_SECRET, admin_token=TOKEN, allowed_hosts=["gym.internal"]
    )
    app = create_app(settings, load_environment("retail"))
    async with app.router.lifespan_context(app):
        r = await _get(app, "/admin/sessions", host)
        if host in GOOD:
            assert r.status_code == 200, r.text
        else:
            assert r.status_code == 400, r.text
            assert r.json()["error"]["type"] == "bad_host" and "Host header" in r.text
        # The protocol routes are not behind the check (NeMo Gym calls them by any name).
        assert (await _get(app, "/health", host)).status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1:8001", "localhost", "evil.example", "evil:8001"])
async def test_browse_checks_the_host_header(made, host):
    data_dir, _ids = made
    settings = Settings(data_dir=data_dir)
    with explorer_for(settings) as (x, ds):
        await ds.invoke_startup()
        app = browse_app(x, ds, settings)
        for path in ("/", "/-/datasette/-/databases.json"):
            r = await _get(app, path, host)
            assert r.status_code == (400 if "evil" in host else 200), r.text
