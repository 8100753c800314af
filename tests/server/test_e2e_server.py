"""End to end: a real `stategym serve` process on an ephemeral port, driven over real HTTP the
way NeMo Gym's agent does (seed without a cookie, forward the cookies it got, tools, verify with
the task row + a response object, close)."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import pytest

from app.registry import load_environment
from app.storage.sqlite import packing
from app.storage.sqlite.db import as_legacy_image
from tests.support.rollouts import gold_answer, load_tasks, run_rollout

RETAIL_TASKS = load_tasks(load_environment("retail").tasks_path)


def _pick(n: int) -> list[dict]:
    by_difficulty: dict[int, dict] = {}
    for task in RETAIL_TASKS:
        by_difficulty.setdefault(len(task["ground_truth"]), task)
    return list(by_difficulty.values())[:n]


async def test_real_server_rollouts(live_server, tmp_path):
    url = live_server("retail", data_dir=tmp_path / "data")
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        served = (await client.get("/tools")).json()["tools"]
        for task in _pick(4):
            assert task["responses_create_params"]["tools"] == served
            gold = await run_rollout(client, task, task["ground_truth"], gold_answer(task))
            assert gold["reward"] == 1.0, gold.get("failure_reason")
            noop = await run_rollout(client, task, [], "")
            assert noop["reward"] == 0.0
    # Session databases outlive the rollouts (packed once closed: app/storage/sqlite/packing.py,
    # by the server's closer thread) and are sound SQLite databases.
    folder = tmp_path / "data" / "sessions" / "retail"
    for _ in range(400):  # 10 s at most
        packs = list(folder.glob("*.sqlite.pack"))
        if len(packs) == 8:
            break
        await asyncio.sleep(0.025)
    assert len(packs) == 8 and not list(folder.glob("*.sqlite"))
    for pack in packs:
        conn = sqlite3.connect(":memory:")
        conn.deserialize(as_legacy_image(packing.pack_image(pack)))
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()


@pytest.mark.slow  # two workers: ~7 s
async def test_two_workers_share_sessions(live_server, tmp_path):
    """With --workers 2 requests of one rollout land on either worker; state is in files."""
    url = live_server("retail", workers=2, data_dir=tmp_path / "data")
    tasks = _pick(3)

    async def one(i: int) -> float:
        task = tasks[i % len(tasks)]
        # A fresh connection per request spreads the calls over both workers.
        async with httpx.AsyncClient(
            base_url=url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0)
        ) as client:
            verdict = await run_rollout(client, task, task["ground_truth"], gold_answer(task))
            return verdict["reward"]

    rewards = await asyncio.gather(*(one(i) for i in range(12)))
    assert rewards == [1.0] * 12
