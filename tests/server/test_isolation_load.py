"""Isolation under load: 1,000 sessions on a real `--workers 2` server, driven 64 at
a time with interleaved writes; afterwards every session file holds exactly its own changes.

Session i moves its customer's default address to "<i> Load St", zip i (first pass, shuffled),
then sets line 2 to "Unit <i>" (second pass, shuffled again), so writes of different sessions
interleave on both workers. The files are then read directly with sqlite3.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.tasks import task_from_data
from app.registry import load_environment
from app.storage.sqlite.db import write_image
from app.storage.sqlite.store import Store
from app.storage.tracking import tracked_changes
from tests.support import chaos
from tests.support.rollouts import load_tasks

SESSIONS = 1000
IN_FLIGHT = 64
TASKS = [
    t
    for t in load_tasks(load_environment("retail").tasks_path)
    if any(c["name"] == "update_customer_default_address" for c in t["ground_truth"])
]
# Tables a tool call may legitimately touch; the rest must equal the snapshot row for row.
# The platform tables a write touches too: the step log (docs/steps.md), which is also what
# change tracking reads (app/storage/log_changes.py).
TOUCHED = {"addresses", "audit_log", "_stategym_steps", "_stategym_step_rows"}


def _customer(task: dict[str, Any]) -> int:
    call = next(c for c in task["ground_truth"] if c["name"] == "update_customer_default_address")
    return call["arguments"]["customer_id"]


def _address(i: int, line2: str | None) -> dict[str, Any]:
    return {
        "customer_id": _customer(TASKS[i % len(TASKS)]),
        "line1": f"{i} Load St",
        "line2": line2,
        "city": "Load City",
        "state": "TX",
        "zip": f"{i:05d}",
        "country": "USA",
    }


async def _drive(url: str) -> dict[str, int]:
    """Seed every session, then two shuffled passes of writes; returns session id -> index."""
    # One shared client that keeps no cookies: each request carries its session's cookie only.
    jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    # Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them: reusing
    # one the server is closing at that instant fails a POST that was never processed.
    limits = httpx.Limits(
        max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT, keepalive_expiry=2.0
    )
    gate = asyncio.Semaphore(IN_FLIGHT)
    cookies: dict[int, str] = {}
    ids: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=url, cookies=jar, limits=limits, timeout=60) as client:

        async def seed(i: int) -> None:
            async with gate:
                answer = await client.post("/seed_session", json=TASKS[i % len(TASKS)])
            assert answer.status_code == 200, answer.text
            cookies[i] = answer.headers["set-cookie"].split(";", 1)[0]
            ids[answer.json()["session_id"]] = i

        async def call(i: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                answer = await client.post(f"/{tool}", json=args, headers={"cookie": cookies[i]})
            assert answer.status_code == 200, answer.text
            assert "output" in answer.json(), answer.text
            return answer.json()["output"]

        async def second(i: int) -> None:
            out = await call(i, "update_customer_default_address", _address(i, f"Unit {i}"))
            assert out["default_address"]["line1"] == f"{i} Load St", (i, out)

        order = random.Random(7)
        await asyncio.gather(*(seed(i) for i in range(SESSIONS)))
        first = list(range(SESSIONS))
        order.shuffle(first)
        await asyncio.gather(
            *(call(i, "update_customer_default_address", _address(i, None)) for i in first)
        )
        order.shuffle(first)
        await asyncio.gather(*(second(i) for i in first))
    assert len(ids) == SESSIONS
    return ids


def _rows(conn: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    return conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()  # names from the file


def _check_session(data_dir: Path, session_id: str, i: int, snapshot: Path | None) -> None:
    path = data_dir / "sessions" / "retail" / f"{session_id}.sqlite"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        customer = _customer(TASKS[i % len(TASKS)])
        default = conn.execute(
            "SELECT line1, line2, zip FROM addresses WHERE customer_id = ? AND is_default = 1",
            (customer,),
        ).fetchall()
        assert default == [(f"{i} Load St", f"Unit {i}", f"{i:05d}")], (i, default)
        audits = conn.execute("SELECT action, detail FROM audit_log WHERE actor = 'agent'")
        assert audits.fetchall() == [("update_default_address", f'{{"zip": "{i:05d}"}}')] * 2, i
        if snapshot is not None:
            _compare_with_snapshot(conn, snapshot, customer, i)
    finally:
        conn.close()


def _compare_with_snapshot(conn: sqlite3.Connection, snapshot: Path, customer: int, i: int) -> None:
    """Nothing but the customer's default address and the two audit rows differ from the seed."""
    conn.execute("ATTACH DATABASE ? AS seed", (f"file:{snapshot}?mode=ro",))
    tables = [
        name for (name,) in conn.execute("SELECT name FROM seed.sqlite_master WHERE type = 'table'")
    ]
    for table in tables:
        mine = _rows(conn, table)
        seeded = conn.execute(f'SELECT * FROM seed."{table}" ORDER BY rowid').fetchall()
        if table not in TOUCHED:
            assert mine == seeded, (i, table)
    changed = conn.execute(
        "SELECT id FROM main.addresses EXCEPT SELECT id FROM "
        "(SELECT * FROM main.addresses INTERSECT SELECT * FROM seed.addresses)"
    ).fetchall()
    owner = conn.execute("SELECT customer_id FROM addresses WHERE id = ?", changed[0]).fetchone()
    assert len(changed) == 1 and owner == (customer,), (i, changed)
    # Change tracking (what verify patches its dump with, read from the log) names exactly these.
    new_audits = conn.execute(
        "SELECT rowid FROM main.audit_log EXCEPT SELECT rowid FROM seed.audit_log"
    ).fetchall()
    changes = tracked_changes(conn, load_environment("retail").metadata.tables)
    assert changes is not None, i
    tracked = {(table, rid) for table, rids in (changes.rows or {}).items() for rid in rids}
    assert tracked == {("addresses", changed[0][0])} | {("audit_log", r) for (r,) in new_audits}
    added = (
        conn.execute("SELECT count(*) FROM main.audit_log").fetchone()[0]
        - conn.execute("SELECT count(*) FROM seed.audit_log").fetchone()[0]
    )
    assert added == 2, (i, added)


@pytest.mark.slow  # load test: make test-slow (CI runs it)
async def test_thousand_sessions_each_hold_only_their_own_changes(tmp_path):
    data_dir = tmp_path / "data"
    server = chaos.start(data_dir, workers=2)
    try:
        started = time.monotonic()
        ids = await _drive(server.url)
        driven = time.monotonic() - started
    finally:
        chaos.stop_group(server)
    control = data_dir / "control.sqlite"
    tasks = dict(
        chaos.query(
            control,
            "SELECT s.id, t.task_json FROM sessions s JOIN task_rows t ON t.digest = s.task_digest",
        )
    )
    store = Store(data_dir, load_environment("retail"))
    checked = time.monotonic()
    for n, (session_id, i) in enumerate(sorted(ids.items(), key=lambda kv: kv[1])):
        # Every session's own values; a full table-by-table comparison for one in ten, against
        # its snapshot (rebuilt from the template and its task: no snapshot is kept on disk).
        snap = None
        if n % 10 == 0:
            task = task_from_data(json.loads(tasks[session_id]))
            snap = tmp_path / "snapshots" / f"{task.snapshot_key}.sqlite"
            if not snap.exists():
                write_image(snap, store.snapshot(task).image, wal=False)
        _check_session(data_dir, session_id, i, snap)
    print(
        f"\nisolation load: {SESSIONS} sessions, {3 * SESSIONS} requests, {IN_FLIGHT} in flight, "
        f"2 workers: driven in {driven:.1f}s ({3 * SESSIONS / driven:.0f} req/s), "
        f"files checked in {time.monotonic() - checked:.1f}s"
    )
