"""Fast tools run on the event loop (app/runtime/inline.py), slow ones go back to threads, and a
call never waits for another process's write lock on the loop. Real SQLite files, real retail
tools."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.registry import load_environment
from app.runtime.inline import InlinePolicy
from app.runtime.sessions import SessionManager
from app.sdk.environment import Tool
from app.server.models import parse_seed_body
from app.settings import Settings
from bench import tasks as T

SECRET = "inline-test-secret-0123456789-abcdefghijklmnop"


def test_a_tool_is_promoted_after_a_fast_streak_and_demoted_when_it_turns_slow() -> None:
    policy = InlinePolicy(budget_ms=2.0, promote_after=3)
    assert not policy.allows("t")  # never seen: threads first
    for _ in range(2):
        policy.record("t", 0.0005, inline=False)
    assert not policy.allows("t")
    policy.record("t", 0.0005, inline=False)
    assert policy.allows("t")
    policy.record("t", 0.003, inline=True)  # one outlier (a GC pass): the average holds
    assert policy.allows("t")
    policy.record("t", 0.006, inline=True)  # slow again: the average is over the budget
    assert not policy.allows("t")
    assert policy.stats()["t"]["demotions"] == 1
    for _ in range(2):
        policy.record("t", 0.0005, inline=False)
    assert not policy.allows("t")
    policy.record("t", 0.0005, inline=False)  # proved fast again in threads
    assert policy.allows("t")
    policy.record("t", 0.025, inline=True)  # one call over 10x the budget: back at once
    assert not policy.allows("t")
    disabled = InlinePolicy(budget_ms=0)
    for _ in range(20):
        disabled.record("t", 0.0, inline=False)
    assert not disabled.allows("t")


class Recorder:
    """Wraps a retail tool: which thread ran each call, and optional CPU burn per call."""

    def __init__(self, tool: Tool):
        self.threads: list[int] = []
        self.burn_seconds = 0.0
        self.tool = dataclasses.replace(tool, fn=self._run)
        self._fn = tool.fn

    def _run(self, db: Any, args: Any, ctx: Any) -> Any:
        self.threads.append(threading.get_ident())
        deadline = time.thread_time() + self.burn_seconds
        while time.thread_time() < deadline:  # CPU, as a slow query would use
            pass
        return self._fn(db, args, ctx)


@pytest.fixture()
def retail(tmp_path: Path) -> Iterator[tuple[SessionManager, dict[str, Any]]]:
    settings = Settings(data_dir=tmp_path, secret_key=SECRET, inline_tool_budget_ms=2.0)
    manager = SessionManager(settings, load_environment("retail"))
    yield manager, T.rollout_task()


async def _session(manager: SessionManager, task: dict[str, Any]) -> str:
    return (await manager.seed(parse_seed_body(task))).session_id


async def _promote(manager: SessionManager, session: str, tool: Tool, args: Any) -> int:
    """Call until the tool runs inline (the first calls compile statements and may be slow)."""
    for calls in range(1, 60):
        await manager.call_tool(session, tool, args)
        if manager.inline.allows(tool.name):
            return calls
    raise AssertionError(f"{tool.name} never proved fast: {manager.inline.stats()}")


async def test_fast_calls_move_to_the_loop_and_answer_the_same(retail) -> None:  # type: ignore[no-untyped-def]
    manager, task = retail
    name, args = T.read_call(task)
    recorder = Recorder(load_environment("retail").tool_named(name))
    session = await _session(manager, task)
    loop_thread = threading.get_ident()
    calls = await _promote(manager, session, recorder.tool, args)
    assert calls >= manager.inline.promote_after
    answers = [await manager.call_tool(session, recorder.tool, args) for _ in range(10)]
    assert all(a == answers[0] and "output" in a for a in answers)
    assert all(t != loop_thread for t in recorder.threads[:calls])  # proven in threads first
    assert all(t == loop_thread for t in recorder.threads[calls:])  # then on the loop
    assert len(recorder.threads) == calls + 10
    await manager.aclose()


async def test_a_slow_inline_call_sends_its_tool_back_to_threads(retail) -> None:  # type: ignore[no-untyped-def]
    manager, task = retail
    name, args = T.read_call(task)
    recorder = Recorder(load_environment("retail").tool_named(name))
    session = await _session(manager, task)
    loop_thread = threading.get_ident()
    await _promote(manager, session, recorder.tool, args)
    recorder.burn_seconds = 0.01  # 10 ms of CPU: over the 2 ms budget
    await manager.call_tool(session, recorder.tool, args)
    assert recorder.threads[-1] == loop_thread  # it was inline, once
    assert manager.inline.stats()[name]["demotions"] == 1
    await manager.call_tool(session, recorder.tool, args)
    assert recorder.threads[-1] != loop_thread  # and is back in a thread
    await manager.aclose()


async def test_a_call_waiting_for_another_writer_waits_in_a_thread_not_on_the_loop(retail) -> None:  # type: ignore[no-untyped-def]
    manager, task = retail
    name, args = T.write_call(task)
    recorder = Recorder(load_environment("retail").tool_named(name))
    session = await _session(manager, task)
    loop_thread = threading.get_ident()
    await _promote(manager, session, recorder.tool, T.write_call(task, 1)[1])
    assert manager.inline.allows(name)  # the next call would run inline

    # Another process's connection holds the session's write lock for 0.4 s.
    other = sqlite3.connect(manager.backend.store.session_path(session), check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.4, other.commit).start()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    started = time.monotonic()
    answer = await manager.call_tool(session, recorder.tool, args)
    waited = time.monotonic() - started
    ticking.cancel()
    other.close()

    assert "output" in answer, answer  # it waited for the lock, then ran
    assert waited >= 0.3
    assert recorder.threads[-1] != loop_thread  # the retry ran in a thread...
    assert ticks >= 10  # ...while the loop kept serving (a blocked loop ticks ~0 times)
    rows = sqlite3.connect(manager.backend.store.session_path(session)).execute(
        "SELECT line1 FROM addresses WHERE customer_id = ? AND is_default", (args["customer_id"],)
    )
    assert rows.fetchall() == [(args["line1"],)]  # the refused inline try changed nothing
    await manager.aclose()


def test_the_sql_console_never_runs_on_the_loop(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=SECRET)
    assert SessionManager(settings, load_environment("sql")).inline is None
    assert SessionManager(settings, load_environment("retail")).inline is not None
