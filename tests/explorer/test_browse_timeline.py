"""The old timeline address (`/-/timeline/<id>`) leads to the explorer's rollout page, which
shows each step's call, output, rows and step reward."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from app.cli.browse import browse_app, explorer_for
from app.settings import Settings
from tests.authoring.test_sessions_cli import build_rollouts


def test_timeline_address_leads_to_the_rollout_page(tmp_path):
    data_dir = tmp_path / "data"
    ids = build_rollouts(data_dir)
    asyncio.run(_check(data_dir, ids))


async def _check(data_dir: Path, ids: dict[str, str]) -> None:
    settings = Settings(data_dir=data_dir)
    with explorer_for(settings) as (x, ds):
        await ds.invoke_startup()
        transport = httpx.ASGITransport(app=browse_app(x, ds, settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            moved = await client.get(f"/-/timeline/{ids['gold']}")
            assert moved.status_code == 308
            page = await client.get(moved.headers["location"])
            assert page.status_code == 200, page.text
            text = page.text
            # retail-020's gold: look up, read the order, cancel it (the write earns the reward).
            assert text.count('<li class="step') == 3
            assert "cancel_pending_order" in text and "#W90200010" in text
            assert "pending" in text and "cancelled" in text  # the order's row, before -> after
            assert '<strong class="reward">+1</strong>' in text  # the cancel's step reward
            missing = await client.get("/rollouts/" + "0" * 32)
            assert missing.status_code == 404
            # Datasette still answers under its prefix.
            assert (await client.get("/-/datasette/-/versions.json")).status_code == 200
