"""`pristine_cache_size` and `pristine_cache_mb` bound the unwritten dumps a worker keeps for
verify to patch; a task whose dump was dropped is read whole again and still scored right
(app/verify/state/patching.py)."""

from __future__ import annotations

from pathlib import Path

from app.core.lru import LRU
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.settings import Settings
from app.verify.state import patching
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
        defaults = Settings(data_dir=tmp_path, secret_key=SECRET)
        patching.keep_at_most(defaults.pristine_cache_size, defaults.pristine_cache_mb * 2**20)


async def test_the_cache_keeps_at_most_its_bytes_and_scores_stay_right(tmp_path: Path, monkeypatch):
    # A cache bounded by bytes as the worker's is: a working set of many tasks evicts by what
    # the dumps hold, not by how many there are.
    monkeypatch.setattr(
        patching, "_pristine", LRU(256, max_bytes=1, size_of=patching._pristine_bytes)
    )
    manager = SessionManager(
        Settings(data_dir=tmp_path, secret_key=SECRET, pristine_cache_mb=1),
        load_environment("retail"),
    )
    # The template's dump (~1.5 MB, estimated) and a few snapshots' (~0.1 MB each: weighed
    # without the template tables they share).
    patching.keep_at_most(256, 2 * 2**20)
    tasks = [t for t in env_tasks("retail") if t["ground_truth"]][:12]
    try:
        first = [await _rollout(manager, t) for t in tasks]
        assert 1 <= len(patching._pristine) < len(tasks)
        assert patching._pristine.bytes <= 2 * 2**20 or len(patching._pristine) == 1
        again = [await _rollout(manager, t) for t in tasks]
        assert first == again == [1.0] * len(tasks)
    finally:
        await manager.aclose()
