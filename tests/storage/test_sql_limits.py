"""Hard limits on agent SQL (time, size and pattern bounds), through HTTP on real session files.

Time: no statement keeps a call past the sandbox's 1 s limit by more than a small margin, even
when the work sits inside single function calls where a progress handler never fires; and slow
calls of some sessions do not hold up other sessions' seeds, verifies and closes. Memory and disk:
values, rows and answers are capped, a session database stops at its size cap with a tool error,
and verify evidence is capped where it is returned and where it is stored.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.server.api import create_app
from app.settings import Settings
from app.verify.evidence import MAX_EVIDENCE_BYTES, cap_evidence
from envs.sql import ENVIRONMENT as SQL
from envs.sql import sandbox
from tests.conftest import TEST_SECRET
from tests.support.rollouts import fresh_client, response_object

TASK = json.loads(SQL.tasks_path.read_text().splitlines()[0])  # sql-001, read-only
# What "a small margin" means here (generous: the machine is shared; measured ~0.05 s).
MARGIN_S = 0.5
_X = "printf('%.*c', 65000, 'a')"


async def _client(data_dir: Path, **extra: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=data_dir, secret_key=TEST_SECRET, **extra), SQL)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://stategym", timeout=60
        ) as client:
            yield client


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in _client(tmp_path / "data"):
        yield c


async def _sql(client: httpx.AsyncClient, statement: str) -> dict[str, Any]:
    answer = await client.post("/run_sql", json={"sql": statement})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _many(term: str, n: int) -> str:
    return " + ".join([term] * n)


ATTACKS = {
    # The example (1.2 s on main; 3.7 s in the report) and its long-LIKE sibling (7.3 s).
    "printf_precision": "SELECT length(printf('%.*c', 300000000, 'x')) FROM employees LIMIT 3",
    "printf_width_star": "SELECT length(printf('%*d', '300000000', 1)) FROM employees LIMIT 3",
    "long_like_pattern": f"SELECT count(*) FROM (SELECT {_X} AS x FROM employees LIMIT 3) "
    f"WHERE x LIKE '%' || printf('%.*c', 49000, 'a') || 'b'",
    "long_glob_pattern": f"SELECT {_X} GLOB '*' || printf('%.*c', 49000, 'a') || 'b'",
    # instr on a long haystack and needle: 6.9 s on main.
    "instr_quadratic": "SELECT instr(printf('%.*c', 60000, 'a'), printf('%.*c', 30000, 'a') "
    "|| 'b')",
    # Many calls each under the size caps, in one expression: 3.8 s (trim) and 2.2 s (LIKE) on
    # main; each call now checks the deadline.
    "trim_chain": f"SELECT {_many('length(trim(x, y))', 150)} FROM (SELECT {_X} AS x, "
    "printf('%.*c', 150, 'b') || 'a' AS y)",
    "like_chain": f"SELECT {_many('(x LIKE y)', 150)} FROM (SELECT {_X} AS x, "
    "'%' || printf('%.*c', 150, 'a') || 'b' AS y)",
    "replace_chain": f"SELECT {_many('length(replace(x, y, z))', 150)} FROM (SELECT {_X} AS x, "
    "printf('%.*c', 150, 'a') || 'b' AS y, 'c' AS z)",
    "endless_cte": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
    "SELECT max(x) FROM c",
    "big_sort": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5000000) "
    "SELECT x FROM c ORDER BY -x LIMIT 1",
}


@pytest.mark.parametrize("name", ATTACKS)
async def test_no_statement_runs_past_the_limit(client: httpx.AsyncClient, name: str) -> None:
    assert (await client.post("/seed_session", json=TASK)).status_code == 200
    started, cpu = time.monotonic(), time.process_time()
    result = await _sql(client, ATTACKS[name])
    elapsed, worked = time.monotonic() - started, time.process_time() - cpu
    # The limit is the statement's CPU time (this process runs the server in-process), with a
    # wall-clock backstop for a loaded machine.
    assert worked < sandbox.TIME_LIMIT_S + MARGIN_S, (name, worked, result)
    assert elapsed < sandbox.WALL_LIMIT_S + MARGIN_S, (name, elapsed, result)
    # replace() memcmp's its way through quickly enough to finish; the rest are stopped.
    if name != "replace_chain":
        assert result["error"]["code"] in ("timeout", "too_large"), result
    # The session goes on.
    assert (await _sql(client, "SELECT count(*) FROM employees"))["output"]["rows"][0][0] > 0


@pytest.mark.slow
async def test_slow_calls_do_not_delay_other_sessions_lifecycle(client: httpx.AsyncClient) -> None:
    """Two sessions run statements to the 1 s limit on both tool threads; meanwhile another
    rollout seeds, verifies and closes as fast as on an idle server."""
    # Warm the snapshot and the gold state, so the timed rollout measures waiting only.
    async with fresh_client(client) as warm:
        assert (await warm.post("/seed_session", json=TASK)).status_code == 200
        body = {**TASK, "response": response_object([], "x")}
        assert (await warm.post("/verify", json=body)).status_code == 200
    slow = [fresh_client(client), fresh_client(client)]
    for c in slow:
        assert (await c.post("/seed_session", json=TASK)).status_code == 200

    async def busy(c: httpx.AsyncClient) -> float:
        started = time.monotonic()
        for _ in range(2):
            assert (await _sql(c, ATTACKS["endless_cte"]))["error"]["code"] == "timeout"
        return time.monotonic() - started

    async def lifecycle() -> float:
        await asyncio.sleep(0.2)  # both tool threads are busy by now
        started = time.monotonic()
        async with fresh_client(client) as c:
            assert (await c.post("/seed_session", json=TASK)).status_code == 200
            body = {**TASK, "response": response_object([], "x")}
            assert (await c.post("/verify", json=body)).status_code == 200
            assert (await c.post("/close_session", json={})).status_code == 200
        return time.monotonic() - started

    *busy_for, took = await asyncio.gather(*(busy(c) for c in slow), lifecycle())
    for c in slow:
        await c.aclose()
    assert min(busy_for) > 1.5  # the slow calls really were running meanwhile
    print(f"lifecycle took {took:.3f} s while slow calls ran {busy_for}")
    assert took < MARGIN_S, took


async def test_wide_rows_are_refused_or_capped(client: httpx.AsyncClient) -> None:
    """The issue's 400 columns of 1 MB (1.24 GB RSS) is refused; what fits the limits comes
    back cut to the answer's size."""
    assert (await client.post("/seed_session", json=TASK)).status_code == 200
    for n, size in ((400, 1_000_000), (100, 1_000_000), (400, 60_000), (101, 10)):
        columns = ", ".join(f"printf('%.*c', {size}, 'x') AS c{i}" for i in range(n))
        error = (await _sql(client, f"SELECT {columns}"))["error"]
        assert error["code"] in ("too_large", "sql_error"), error
    columns = ", ".join(f"printf('%.*c', 60000, 'x') AS c{i}" for i in range(100))
    answer = await client.post("/run_sql", json={"sql": f"SELECT {columns} FROM employees"})
    out = answer.json()["output"]
    assert len(answer.content) < sandbox.MAX_BYTES + 30_000
    assert len(out["rows"]) >= 1 and len(json.dumps(out["rows"][0])) <= sandbox.MAX_ROW_CHARS * 2
    # A column's name is its expression: long expressions come back shortened.
    named = (await _sql(client, f"SELECT '{'y' * 5000}'"))["output"]
    assert len(named["columns"][0]) < 300


def _insert(k: int, rows: int = 150, size: int = 60_000) -> str:
    return (
        "INSERT INTO customers (code, name, country, industry, status) "
        f"SELECT 'Z{k}-' || x, printf('%.*c', {size}, 'n') || '{k}-' || x, 'c', 'i', 'active' "
        f"FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {rows}) "
        "SELECT x FROM c)"
    )


async def test_session_database_stops_at_its_size_cap(tmp_path: Path) -> None:
    """150 rows of 1 MB per call grew a session by 143 MB per call: values are now 64 KiB at
    most, and the file stops at `session_max_db_mb` with a tool error the agent can read."""
    data = tmp_path / "data"
    async for client in _client(data, session_max_db_mb=8):
        sid = (await client.post("/seed_session", json=TASK)).json()["session_id"]
        assert (await _sql(client, _insert(0, size=1_000_000)))["error"]["code"] == "too_large"
        results = [await _sql(client, _insert(k, rows=40)) for k in range(1, 6)]
        assert "output" in results[0], results[0]
        error = results[-1]["error"]
        assert error["code"] == "size_limit", error
        assert "8 MiB" in error["message"] and "nothing was changed" in error["message"]
        assert "output" in await _sql(client, "SELECT count(*) FROM customers")
        body = {**TASK, "response": response_object([], "x")}
        verified = await client.post("/verify", json=body)
        assert verified.status_code == 200 and verified.json()["reward"] == 0.0
    path = data / "sessions" / "sql" / f"{sid}.sqlite"
    assert path.stat().st_size <= 8 * 2**20


async def test_verify_evidence_is_capped_where_returned_and_stored(tmp_path: Path) -> None:
    """150 rows of 60 KB made a 1.2 MB verify answer, stored again in control.sqlite."""
    data = tmp_path / "data"
    async for client in _client(data):
        assert (await client.post("/seed_session", json=TASK)).status_code == 200
        # Three statements of 50 rows: one of 150 can pass the sandbox's 1 s on a loaded machine.
        for k in (1, 2, 3):
            assert "output" in await _sql(client, _insert(k, rows=50))
        body = {**TASK, "response": response_object([], "x")}
        verified = await client.post("/verify", json=body)
    assert verified.status_code == 200 and verified.json()["reward"] == 0.0
    evidence = verified.json()["verification"]
    assert evidence["agent_changes"]["customers"]["added"] == 150
    assert len(json.dumps(evidence)) <= MAX_EVIDENCE_BYTES
    assert len(verified.content) < 100_000
    with sqlite3.connect(data / "control.sqlite") as control:
        stored = control.execute("SELECT max(length(verify_json)) FROM sessions").fetchone()[0]
    assert stored <= MAX_EVIDENCE_BYTES


def test_cap_evidence_bounds_any_shape() -> None:
    huge = {"t": {"added_rows": [{"name": "x" * 100_000, "blob": b"y" * 10}] * 50_000}}
    capped = cap_evidence(huge, max_bytes=10_000)
    assert len(json.dumps(capped)) <= 10_000
    small = {"reward": 1.0, "rows": [{"a": 1}]}
    assert cap_evidence(small) == small


def test_typed_tools_get_a_size_limit_error_too(tmp_path: Path) -> None:
    """Any environment: a write past the session's cap is the tool error `size_limit` (not the
    disk-full `storage_full`, nor a 507), and the session's earlier writes stay."""
    from app.sdk.environment import ToolContext
    from app.storage.runner import run_tool
    from app.storage.sqlite import db as sqlite_db
    from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE

    path = tmp_path / "s.sqlite"
    conn = sqlite_db.open_file(path, create=True)
    WAREHOUSE.metadata.create_all(sqlite_db.bind_engine(conn))
    conn.execute("INSERT INTO items VALUES (1, 'SKU-0001', 'x', 5, 1.0)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    sqlite_db.cap_size(conn, (pages + 1) * 4096)
    bind = sqlite_db.bind_connection(conn)
    ctx = ToolContext(now=WAREHOUSE.default_now, session_id="t")
    tool = WAREHOUSE.tool_named("move_stock")
    results = []
    for _ in range(2000):
        results.append(
            run_tool(bind, tool, {"sku": "SKU-0001", "delta": 1, "reason": "r" * 200}, ctx)
        )
        if "error" in results[-1]:
            break
    error = results[-1]["error"]
    assert error["code"] == "size_limit", error
    assert "nothing was changed" in error["message"]
    assert conn.execute("SELECT quantity FROM items").fetchone()[0] == 5 + len(results) - 1
    bind.close()
    conn.close()
