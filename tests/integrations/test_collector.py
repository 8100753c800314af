"""A served process sets its garbage collector for a long life once it has started
(app/runtime/collector.py); the test suite's own servers leave the collector as they found it."""

from __future__ import annotations

import gc
from pathlib import Path

from app.registry import load_environment
from app.runtime.collector import SERVER_GC_THRESHOLDS
from app.runtime.lifecycle import serving
from app.runtime.sessions import SessionManager
from app.settings import Settings
from tests.conftest import TEST_SECRET


async def _serve_once(settings: Settings) -> tuple[tuple[int, int, int], int]:
    manager = SessionManager(settings, load_environment("retail"))
    async with serving(manager, None, 60):
        return gc.get_threshold(), gc.get_freeze_count()


async def test_a_server_freezes_what_start_up_built_and_collects_less_often(tmp_path: Path):
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's defaults (the suite collects as a server does)
    try:
        settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, gc_settle=True)
        thresholds, frozen = await _serve_once(settings)
        assert thresholds == SERVER_GC_THRESHOLDS
        assert frozen > 10_000  # the modules, the environment, the engine: start-up's objects
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


async def test_off_it_leaves_the_collector_as_it_was(tmp_path: Path):
    before = gc.get_threshold()
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, gc_settle=False)
    assert await _serve_once(settings) == (before, gc.get_freeze_count())
    assert gc.get_freeze_count() == 0


def test_the_suite_never_settles_its_own_process() -> None:
    assert Settings(secret_key=TEST_SECRET).gc_settle is False  # tests/conftest.py
