"""Open sessions (app/runtime/open_sessions.py): a seeded session is opened in the background,
once, never at the expense of a session in use, and a close right after the seed is clean."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.sdk.environment import Tool
from app.server.models import parse_seed_body
from app.settings import Settings
from app.storage.sqlite import packing
from app.storage.sqlite.db import as_legacy_image
from tests.conftest import TEST_SECRET
from tests.support.rollouts import load_tasks

TASK, READ = next(
    (task, call)
    for task in load_tasks(load_environment("retail").tasks_path)
    for call in task["ground_truth"]
    if call["name"].startswith(("get_", "find_"))
)


class CountingBackend:
    """Counts the backend's opens per session; everything else is the real SQLite backend."""

    def __init__(self, manager: SessionManager):
        self.opens: dict[str, int] = {}
        real_open = manager.backend.open

        def counted(session_id: str, *, ahead: bool = False):  # type: ignore[no-untyped-def]
            self.opens[session_id] = self.opens.get(session_id, 0) + 1
            return real_open(session_id, ahead=ahead)

        manager.backend.open = counted  # type: ignore[method-assign]


async def _manager(tmp_path: Path, **extra: object) -> SessionManager:
    settings = Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET, **extra)  # type: ignore[arg-type]
    return SessionManager(settings, load_environment("retail"))


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[SessionManager]:
    mgr = await _manager(tmp_path)
    yield mgr
    await mgr.aclose()


async def _until_open(mgr: SessionManager, session_id: str) -> None:
    for _ in range(500):  # 5 s at most
        if session_id in mgr._open:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"session {session_id} was not opened in the background")


def _read_tool(mgr: SessionManager) -> Tool:
    tool = mgr.env.tool_named(READ["name"])
    assert tool is not None
    return tool


async def _seed(mgr: SessionManager) -> str:
    return (await mgr.seed(parse_seed_body(TASK))).session_id


async def test_a_seeded_session_is_opened_in_the_background_once(manager: SessionManager) -> None:
    counter = CountingBackend(manager)
    session_id = await _seed(manager)
    await _until_open(manager, session_id)
    tool = _read_tool(manager)
    result = await manager.call_tool(session_id, tool, READ["arguments"])
    assert "error" not in result, result
    assert counter.opens == {session_id: 1}  # the call used the prefetched handle


async def test_opened_ahead_the_session_has_its_wal_already(manager: SessionManager) -> None:
    """The first write's WAL creation and sync happen in the prefetch, not in the first call."""
    session_id = await _seed(manager)
    path = manager.backend.store.session_path(session_id)  # type: ignore[attr-defined]
    assert not path.with_name(path.name + "-wal").exists()  # nothing has run yet
    await _until_open(manager, session_id)
    assert path.with_name(path.name + "-wal").exists()
    handle = manager._open.get(session_id)
    assert handle is not None
    steps = handle.conn.execute("SELECT count(*) FROM _stategym_steps").fetchone()  # type: ignore[attr-defined]
    assert steps == (0,)  # no step: the agent has done nothing
    assert handle.conn.execute("PRAGMA user_version").fetchone() == (0,)  # type: ignore[attr-defined]


async def test_opening_ahead_changes_nothing_a_dump_shows(manager: SessionManager) -> None:
    """The WAL is made by a write that changes no row (a dump right after the seed and one after
    the open ahead are the same), so a seeded session is what its snapshot is."""
    session_id = await _seed(manager)
    path = manager.backend.store.session_path(session_id)  # type: ignore[attr-defined]
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        before = list(conn.iterdump())
    await _until_open(manager, session_id)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        after = list(conn.iterdump())
    assert after == before


async def test_a_call_racing_the_prefetch_waits_for_it_instead_of_opening_again(
    manager: SessionManager,
) -> None:
    counter = CountingBackend(manager)
    tool = _read_tool(manager)
    session_id = await _seed(manager)  # its open is in flight: no await has let it run
    results = await asyncio.gather(
        *(manager.call_tool(session_id, tool, READ["arguments"]) for _ in range(5))
    )
    assert all("error" not in r for r in results), results
    assert counter.opens == {session_id: 1}


async def test_a_close_right_after_the_seed_leaves_nothing_open(manager: SessionManager) -> None:
    session_id = await _seed(manager)
    assert await manager.close(session_id) is True  # the prefetch is still in flight here
    assert session_id not in manager._open
    await asyncio.sleep(0.05)  # nothing lands afterwards
    assert session_id not in manager._open
    manager.backend.flush_closes()  # type: ignore[attr-defined]
    path = manager.backend.store.session_path(session_id)  # type: ignore[attr-defined]
    # Kept and closed, it was packed (app/storage/sqlite/packing.py).
    conn = sqlite3.connect(":memory:")
    conn.deserialize(as_legacy_image(packing.pack_image(path.with_name(path.name + ".pack"))))
    status = conn.execute("SELECT value FROM _stategym_meta WHERE key = 'status'").fetchone()
    conn.close()
    assert status == ("closed",)
    tool = _read_tool(manager)
    with pytest.raises(Exception, match="closed"):
        await manager.call_tool(session_id, tool, READ["arguments"])


async def test_prefetch_never_evicts_a_session_in_use(tmp_path: Path) -> None:
    mgr = await _manager(tmp_path, max_open_sessions=2)
    try:
        tool = _read_tool(mgr)
        in_use = await _seed(mgr)
        await mgr.call_tool(in_use, tool, READ["arguments"])
        second = await _seed(mgr)
        await _until_open(mgr, second)
        third = await _seed(mgr)  # the LRU is full: no prefetch
        await asyncio.sleep(0.05)
        assert in_use in mgr._open and second in mgr._open and third not in mgr._open
        result = await mgr.call_tool(third, tool, READ["arguments"])  # opened on demand
        assert "error" not in result, result
    finally:
        await mgr.aclose()


async def test_seeds_nobody_calls_hold_at_most_open_ahead_sessions_connections(
    tmp_path: Path,
) -> None:
    manager = await _manager(tmp_path, open_ahead_sessions=2)
    try:
        seeded = [await _seed(manager) for _ in range(4)]
        await _until_open(manager, seeded[1])
        await asyncio.sleep(0.05)
        assert [s in manager._open for s in seeded] == [True, True, False, False]
        await manager.call_tool(seeded[0], _read_tool(manager), READ["arguments"])  # now called
        fifth = await _seed(manager)
        await _until_open(manager, fifth)  # room for one more uncalled session
        sixth = await _seed(manager)
        await asyncio.sleep(0.05)
        assert sixth not in manager._open
    finally:
        await manager.aclose()


async def test_by_default_a_whole_batch_is_opened_ahead_up_to_the_lru(tmp_path: Path) -> None:
    """More seeds than the old fixed cap (64) are all opened ahead, but never past the LRU."""
    mgr = await _manager(tmp_path, max_open_sessions=70)
    try:
        seeded = [await _seed(mgr) for _ in range(72)]
        for session_id in seeded[:70]:
            await _until_open(mgr, session_id)
        await asyncio.sleep(0.05)
        assert [s in mgr._open for s in seeded[70:]] == [False, False]
    finally:
        await mgr.aclose()


async def test_open_on_seed_off_opens_at_the_first_call(tmp_path: Path) -> None:
    mgr = await _manager(tmp_path, open_on_seed=False)
    try:
        session_id = await _seed(mgr)
        await asyncio.sleep(0.05)
        assert session_id not in mgr._open
        tool = _read_tool(mgr)
        assert "error" not in await mgr.call_tool(session_id, tool, READ["arguments"])
        assert session_id in mgr._open
    finally:
        await mgr.aclose()


async def test_a_failed_open_reaches_every_waiter_and_is_tried_again(
    manager: SessionManager,
) -> None:
    session_id = await _seed(manager)
    await manager._open.settled(session_id)
    handle = manager._open.pop(session_id)
    assert handle is not None
    handle.close()
    path = manager.backend.store.session_path(session_id)  # type: ignore[attr-defined]
    moved = path.with_name(path.name + ".away")
    path.rename(moved)  # the database is gone: every open fails
    tool = _read_tool(manager)
    results = await asyncio.gather(
        *(manager.call_tool(session_id, tool, READ["arguments"]) for _ in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(r, Exception) for r in results), results
    assert session_id not in manager._open
    moved.rename(path)  # back: the next call opens it
    assert "error" not in await manager.call_tool(session_id, tool, READ["arguments"])


async def test_shutdown_waits_for_a_prefetch_in_flight(tmp_path: Path) -> None:
    mgr = await _manager(tmp_path)
    session_id = await _seed(mgr)
    await mgr.aclose()  # the prefetch's handle is closed with the rest
    assert session_id not in mgr._open
    await mgr.aclose()


async def test_an_evicted_session_closes_on_a_thread_of_its_own(tmp_path: Path) -> None:
    """Not on the threads that open sessions: in a burst on a full LRU its close would wait
    behind every queued open, and the worker would hold twice its connections at the peak."""
    mgr = await _manager(tmp_path, max_open_sessions=1, open_on_seed=False)
    try:
        tool = _read_tool(mgr)
        first, second = await _seed(mgr), await _seed(mgr)
        await mgr.call_tool(first, tool, READ["arguments"])
        handle = mgr._open.get(first)
        assert handle is not None
        closed_on: list[str] = []
        real_close = handle.close

        def close() -> None:
            closed_on.append(threading.current_thread().name)
            real_close()

        handle.close = close  # type: ignore[method-assign]
        await mgr.call_tool(second, tool, READ["arguments"])  # evicts the first
        for _ in range(500):
            if closed_on:
                break
            await asyncio.sleep(0.01)
        assert first not in mgr._open and second in mgr._open
        assert len(closed_on) == 1 and closed_on[0].startswith("stategym-close"), closed_on
    finally:
        await mgr.aclose()
