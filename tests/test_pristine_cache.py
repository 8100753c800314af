"""`pristine_cache_size` bounds the unwritten dumps a worker keeps for verify to patch; a task whose
dump was dropped is read whole again and still scored right (app/verify/patching.py)."""

from __future__ import annotations

from pathlib import Path

from app.core.lru import LRU
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.settings import Settings
from app.verify import patching
from bench.rollout import env_tasks, verify_body

SECRET = "x" * 8 + "abcdefghijklmnop" * 2


async def _rollout(manager: SessionManager, task: dict) -> float:
    tools = {t.name: t for t in manager.env.tools}
    session = (await manager.seed(parse_seed_body(task))).session_id
    for call in task["ground_truth"]:
        await manager.call_tool(session, tools[call["name"]], call["arguments"])
    return float((await manager.verify(session, verify_body(task)))["reward"])


async def test_the_cache_keeps_at_most_its_size_and_scores_stay_right(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(patching, "_pristine", LRU(256))  # this test's cache only
    manager = SessionManager(
        Settings(data_dir=tmp_path, secret_key=SECRET, pristine_cache_size=3),
        load_environment("retail"),
    )
    tasks = [t for t in env_tasks("retail") if t["ground_truth"]][:6]
    try:
        first = [await _rollout(manager, t) for t in tasks]
        assert len(patching._pristine) <= 3
        again = [await _rollout(manager, t) for t in tasks]  # evicted ones are read whole
        assert len(patching._pristine) <= 3
        assert first == again == [1.0] * len(tasks)
    finally:
        await manager.aclose()
        patching.keep_at_most(Settings(data_dir=tmp_path, secret_key=SECRET).pristine_cache_size)
