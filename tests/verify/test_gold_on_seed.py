"""A task's gold state is built in the background at its first seed; verify then uses it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.runtime.sessions import SessionManager
from app.server.models import parse_seed_body
from app.settings import Settings
from bench.rollout import verify_body
from tests.storage.test_change_tracking import load_fixture_tasks


async def _seed_and_verify(tmp_path: Path, gold_on_seed: bool) -> tuple[bool, dict]:
    settings = Settings(data_dir=tmp_path / "data", env="retail", gold_on_seed=gold_on_seed)
    manager = SessionManager(settings, _env())
    try:
        row = load_fixture_tasks("retail")[0]
        request = parse_seed_body(row)
        seeded = await manager.seed(request)
        # Wait for the background build to land (bounded: a build takes milliseconds).
        for _ in range(600):
            if manager.gold.cached(request.task) or not gold_on_seed:
                break
            await asyncio.sleep(0.05)
        built_ahead = manager.gold.cached(request.task)
        env = _env()
        for call in request.task.ground_truth:
            tool = env.tool_named(call.name)
            assert tool is not None
            await manager.call_tool(seeded.session_id, tool, call.arguments)
        body = verify_body(json.loads(json.dumps(row)))
        result = await manager.verify(seeded.session_id, body)
        return built_ahead, result
    finally:
        await manager.aclose()


def _env():  # noqa: ANN202
    from app.registry import load_environment

    return load_environment("retail")


async def test_gold_is_built_at_seed_and_verify_scores_alike(tmp_path: Path) -> None:
    ahead, with_ahead = await _seed_and_verify(tmp_path / "a", True)
    later, without = await _seed_and_verify(tmp_path / "b", False)
    assert ahead and not later
    assert with_ahead["reward"] == 1.0
    keep = ("reward", "verification")
    assert {k: with_ahead.get(k) for k in keep} == {k: without.get(k) for k in keep}


async def _wait_for(condition: Callable[[], bool]) -> bool:
    for _ in range(600):  # bounded: the work takes milliseconds
        if condition():
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize("gold_on_seed", [True, False])
async def test_a_seed_makes_the_spare_the_next_never_seen_tasks_snapshot_starts_from(
    tmp_path: Path, gold_on_seed: bool
) -> None:
    """After a seed answers, the seed base's spare clone is made in the background (with or
    without the gold built ahead); the next never-seen task's snapshot takes it, a new one is
    made after that seed, and the rollout scores as without it."""
    settings = Settings(data_dir=tmp_path / "data", env="retail", gold_on_seed=gold_on_seed)
    manager = SessionManager(settings, _env())
    store = manager.backend.snapshots
    try:
        rows = load_fixture_tasks("retail")
        distinct = {parse_seed_body(r).task.snapshot_key: r for r in rows}
        first, second = list(distinct.values())[:2]
        assert not store.has_spare
        await manager.seed(parse_seed_body(first))
        assert await _wait_for(lambda: store.has_spare)
        request = parse_seed_body(second)
        seeded = await manager.seed(request)
        # Taken by the second task's build (made again only once the answer is on its way) ...
        assert not store.has_spare
        assert await _wait_for(lambda: store.has_spare)  # ... and made again
        env = _env()
        for call in request.task.ground_truth:
            tool = env.tool_named(call.name)
            assert tool is not None
            await manager.call_tool(seeded.session_id, tool, call.arguments)
        result = await manager.verify(seeded.session_id, verify_body(dict(second)))
        assert result["reward"] == 1.0
    finally:
        await manager.aclose()
    assert not store.has_spare  # closed with the backend
