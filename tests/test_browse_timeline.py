"""The browse view's timeline page: a rollout step by step (call, output, rows, step reward)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from app.cli.browse import browse_app, build_datasette
from tests.test_sessions_cli import build_rollouts


def test_timeline_page_shows_each_step(tmp_path):
    data_dir = tmp_path / "data"
    ids = build_rollouts(data_dir)
    asyncio.run(_check(data_dir, ids))


async def _check(data_dir: Path, ids: dict[str, str]) -> None:
    ds = build_datasette(data_dir)
    await ds.invoke_startup()
    app = browse_app(ds, [], data_dir)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        page = await client.get(f"/-/timeline/{ids['gold']}")
        assert page.status_code == 200, page.text
        text = page.text
        # retail-020's gold: look up, read the order, cancel it (the write earns the reward).
        assert text.count("class='step'") == 3
        assert "cancel_pending_order" in text and "#W9020002" in text
        assert "pending" in text and "cancelled" in text  # the order's row, before -> after
        assert "+1</td>" in text  # the cancel's step reward
        missing = await client.get("/-/timeline/" + "0" * 32)
        assert missing.status_code == 404
        # Datasette still answers everything else.
        assert (await client.get("/-/versions.json")).status_code == 200
