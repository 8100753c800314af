"""Fork, rewind, export and restore over HTTP (docs/steps.md), on both backends, and kill -9 in
the middle of forks and rewinds (of a SQLite session; of a PostgreSQL server): every session
stays whole (all-or-nothing)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import load_environment
from app.server.api import create_app
from tests.conftest import REPO, backend_settings, drop_pg_schemas, new_pg_prefix
from tests.support.rollouts import gold_answer, load_tasks

TASKS = {t["task_id"]: t for t in load_tasks(load_environment("retail").tasks_path)}
MULTI = TASKS["retail-044"]  # three writing steps among eight


def _calls(task: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (
            c["name"],
            json.loads(c["arguments"]) if isinstance(c["arguments"], str) else c["arguments"],
        )
        for c in task["ground_truth"]
    ]


def _response(calls: list[tuple[str, Any]], bodies: list[str], answer: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i, ((name, args), body) in enumerate(zip(calls, bodies, strict=True)):
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": name,
                "arguments": json.dumps(args),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": body})
    items.append(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": answer}],
        }
    )
    return {"output": items}


@pytest.fixture
async def app(tmp_path, backend, request):
    """A retail server on each backend (`app.state.test_settings`: its settings)."""
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    settings = backend_settings(backend, tmp_path / "data", prefix)
    application = create_app(settings, load_environment("retail"))
    application.state.test_settings = settings
    async with application.router.lifespan_context(application):
        yield application


def _client(app: Any, cookie: str | None = None) -> httpx.AsyncClient:
    cookies = {"stategym_session": cookie} if cookie else None
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://sg", cookies=cookies)


async def _play(client: httpx.AsyncClient, calls: list[tuple[str, Any]]) -> list[str]:
    bodies = []
    for name, args in calls:
        r = await client.post(f"/{name}", json=args)
        assert r.status_code == 200
        bodies.append(r.text)
    return bodies


async def test_forks_at_every_step_verify_like_a_fresh_rollout(app):
    calls = _calls(MULTI)
    sqlite = app.state.test_settings.database_url is None
    n, steps = (2, range(len(calls) + 1)) if sqlite else (1, (0, 2, 5, len(calls)))  # PG: clones
    async with _client(app) as fresh:
        await fresh.post("/seed_session", json=MULTI)
        bodies = await _play(fresh, calls)
        expected = (
            await fresh.post("/verify", json={**MULTI, "response": _response(calls, bodies, "")})
        ).json()
    async with _client(app) as parent:
        await parent.post("/seed_session", json=MULTI)
        await _play(parent, calls)
        for k in steps:
            forked = await parent.post("/fork_session", json={"n": n, "at_step": k})
            assert forked.status_code == 200, forked.text
            answer = forked.json()
            assert answer["at_step"] == k and len(answer["sessions"]) == n
            for child in answer["sessions"]:
                async with _client(app, child["cookie"]) as c:
                    rest = await _play(c, calls[k:])
                    assert rest == bodies[k:]  # the same outputs as the first time
                    body = {**MULTI, "response": _response(calls, bodies, "")}
                    verified = (await c.post("/verify", json=body)).json()
                assert verified["reward"] == expected["reward"]
                assert verified["reward_components"] == expected["reward_components"]
                assert verified["step_rewards"] == expected["step_rewards"]
                assert verified["verification"]["trajectory"]["ok"]
        # The parent is untouched by all of it.
        mine = (
            await parent.post("/verify", json={**MULTI, "response": _response(calls, bodies, "")})
        ).json()
        assert mine["step_rewards"] == expected["step_rewards"]


async def test_rewind_then_replay_and_export_restore(app):
    settings = app.state.test_settings
    calls = _calls(MULTI)
    async with _client(app) as c:
        await c.post("/seed_session", json=MULTI)
        bodies = await _play(c, calls)
        body = {**MULTI, "response": _response(calls, bodies, gold_answer(MULTI))}
        full = (await c.post("/verify", json={**body})).json()
        assert full["reward"] == 1.0
        for k in (len(calls), 5, 2, 0):
            r = await c.post("/rewind_session", json={"to_step": k})
            assert r.status_code == 200 and r.json()["step"] == k
            assert await _play(c, calls[k:]) == bodies[k:]
            again = (await c.post("/verify", json=body)).json()
            assert again["reward"] == 1.0 and again["step_rewards"] == full["step_rewards"]
        too_far = await c.post("/rewind_session", json={"to_step": len(calls) + 1})
        assert too_far.status_code == 409 and too_far.json()["error"]["type"] == "cannot_rewind"
        # No step number, no rewind (lax validation once read `false` as step 0 and undid all).
        steps_now = len(calls)
        for not_a_step in (False, True, "1", 1.0, None):
            r = await c.post("/rewind_session", json={"to_step": not_a_step})
            assert r.status_code == 422 and "to_step" in r.json()["error"]["message"], r.text
            forked = await c.post("/fork_session", json={"at_step": not_a_step or "0"})
            assert forked.status_code == 422, forked.text
        assert (await c.post("/export_session", json={})).json()["steps"] == steps_now
        exported = (await c.post("/export_session", json={})).json()
        assert exported["steps"] == len(calls) and exported["signature"]
        original = c.cookies.get("stategym_session")
        tampered = {**exported, "snapshot_key": "0" * 32}
        refused = await c.post("/restore_session", json={"export": tampered})
        assert refused.status_code == 422 and refused.json()["error"]["type"] == "invalid_export"
    async with _client(app) as other:
        restored = await other.post("/restore_session", json={"export": exported})
        assert restored.status_code == 200
        child = restored.json()["session_id"]
        verified = (await other.post("/verify", json=body)).json()
        assert verified["session_id"] == child and verified["reward"] == 1.0
        assert verified["step_rewards"] == full["step_rewards"]
        tree = (await other.get("/session_tree")).json()
        # The copy goes on as the original would: a write adds rows with the same new ids.
        name, args = calls[2]
        moved = {**args, "line1": "1 Elsewhere St"}
        async with _client(app, original) as again:
            assert await _play(again, [(name, moved)]) == await _play(other, [(name, moved)])
        assert await _last_ids(app, exported["session_id"]) == await _last_ids(app, child)
    assert tree["children"][0]["session_id"] == child
    assert tree["children"][0]["kind"] == "restore"
    pg = {}
    if settings.database_url:
        pg = {"STATEGYM_DATABASE_URL": settings.database_url,
              "STATEGYM_PG_SCHEMA_PREFIX": settings.pg_schema_prefix}  # fmt: skip
    shown = CliRunner().invoke(
        cli, ["sessions", "tree", child, "--data-dir", str(settings.data_dir)], env=pg
    )
    assert shown.exit_code == 0 and "restore at step 8" in shown.output


async def _last_ids(app: Any, session_id: str) -> list[Any]:
    """The largest id of every table of a live session (where its sequences are)."""
    from sqlalchemy import func, select

    sessions = app.state.protocol.sessions
    handle = await sessions._handle(session_id)
    tables = [t for t in sessions.env.metadata.sorted_tables if "id" in t.c]

    def read(conn: Any) -> list[Any]:
        with conn.begin():
            return [conn.execute(select(func.max(t.c.id))).scalar() for t in tables]

    return sessions.backend.read(handle, read)


async def test_fork_of_a_typed_session_by_resources_id(app):
    seed = {
        "resources_session_id": "rs-parent",
        "episode_id": {"rollout_id": "r-1", "attempt": 0},
        "task_id": {"taskset": "retail", "task_id": MULTI["task_id"]},
        "task_data": {k: v for k, v in MULTI.items() if k != "responses_create_params"},
    }
    episode = seed["episode_id"]
    async with _client(app) as owner:
        assert (await owner.post("/seed_session", json=seed)).status_code == 200
        async with _client(app) as bare:
            # Neither a bare id nor the seed's episode reaches a session: only its cookie.
            for proof in ({}, {"episode_id": episode}):
                body = {"resources_session_id": "rs-parent", "n": 1, **proof}
                refused = await bare.post("/fork_session", json=body)
                assert refused.status_code == 401, refused.text
        forked = await owner.post(
            "/fork_session", json={"resources_session_id": "rs-parent", "n": 2}
        )
        assert forked.status_code == 200, forked.text
        minted = [s["resources_session_id"] for s in forked.json()["sessions"]]
        assert len(set(minted)) == 2 and all(m.startswith("fork-") for m in minted)
        chosen = await owner.post("/fork_session", json={"resources_session_ids": ["rs-a"]})
        assert chosen.status_code == 422 and "minted" in chosen.json()["error"]["message"]
    async with _client(app) as cleanup:  # a child inherits the parent's episode: Gym's close
        closed = await cleanup.post(
            "/close_session", json={"resources_session_id": minted[0], "episode_id": episode}
        )
        assert closed.status_code == 200


# --- kill -9 in the middle of forks and rewinds ---------------------------------------------
_WORKER = r"""
import json, sys
from pathlib import Path
from app.registry import load_environment
from app.storage.runner import run_tool
from app.runtime.steps import StepRecorder
from app.sdk.environment import ToolContext
from app.storage.sqlite import branch, db as sqlite_db
env = load_environment("retail")
session, forks, calls = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
tables = list(env.metadata.tables)
conn = sqlite_db.open_file(session)
bind = sqlite_db.bind_connection(conn)
now = __import__("datetime").datetime.fromisoformat(sys.argv[4])
ctx = ToolContext(now=now, session_id="k", task_id=None)
n = 0
while True:
    k = n % (len(calls) + 1)
    image = branch.state_image(conn, k, tables)
    sqlite_db.write_image(forks / f"{n}-at-{k}.sqlite", image, wal=True)
    branch.rewind(conn, k, tables)
    for name, args in calls[k:]:
        step = StepRecorder(name, args)
        result = run_tool(bind, env.tool_named(name), args, ctx, None, step.on_success)
        if "error" in result:
            step.record_failure(conn, result)
    n += 1
    print(n, flush=True)
"""


def _state_of(path: Path, env: Any) -> tuple[int, Any]:
    from app.storage.sqlite import db as sqlite_db
    from app.storage.steplog import step_count
    from app.verify.state.dump import dump_state

    conn = sqlite_db.open_file(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        bind = sqlite_db.bind_connection(conn, begin="BEGIN")
        try:
            with bind.begin():
                state = dump_state(bind, env.metadata.tables, env.compare, reuse=False)
        finally:
            bind.close()
        return step_count(conn), state
    finally:
        conn.close()


@pytest.mark.slow  # crash under load: ~7 s
def test_kill_9_during_forks_and_rewinds_leaves_every_session_whole(tmp_path):
    from app.core.tasks import task_from_data
    from app.storage.sqlite.store import Store

    env = load_environment("retail")
    store = Store(tmp_path / "data", env)
    snapshot = store.snapshot(task_from_data(MULTI))
    calls = _calls(MULTI)
    # The state after every step, from a clean forward run.
    from app.runtime.steps import StepRecorder
    from app.sdk.environment import ToolContext
    from app.storage.runner import run_tool
    from app.storage.sqlite import db as sqlite_db

    reference = tmp_path / "reference.sqlite"
    sqlite_db.write_image(reference, snapshot.image, wal=True)
    states = [_state_of(reference, env)[1]]
    ctx = ToolContext(now=snapshot.now, session_id="k", task_id=None)
    for name, args in calls:
        conn = sqlite_db.open_file(reference)
        bind = sqlite_db.bind_connection(conn)
        step = StepRecorder(name, args)
        run_tool(bind, env.tool_named(name), args, ctx, None, step.on_success)
        bind.close()
        conn.close()
        states.append(_state_of(reference, env)[1])
    session = tmp_path / "session.sqlite"
    sqlite_db.write_image(session, sqlite_db.image_of_file(reference), wal=True)
    forks = tmp_path / "forks"
    forks.mkdir()
    env_vars = {**os.environ, "PYTHONPATH": str(REPO)}
    for round_ in range(4):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(session),
                str(forks),
                json.dumps(calls),
                snapshot.now.isoformat(),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env_vars,
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # at least one loop done: imports are behind us
        time.sleep(0.05 + 0.07 * round_)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        steps, state = _state_of(session, env)
        assert state == states[steps], (round_, steps)
    for path in sorted(forks.iterdir()):
        if path.name.startswith("."):
            continue  # a temp file the kill interrupted: never a session
        k = int(path.stem.split("-at-")[1])
        steps, state = _state_of(path, env)
        assert steps == k and state == states[k], path.name


def test_an_image_restores_only_on_its_own_backend(tmp_path):
    """A SQLite image given to PostgreSQL's restore, or the converse, is refused with the reason
    (422 invalid_export through /restore_session)."""
    from app.settings import Settings
    from app.storage.factory import make_backend
    from app.storage.postgres.steplog import reopened_export
    from tests.conftest import TEST_SECRET

    env = load_environment("retail")
    with pytest.raises(ValueError, match="SQLite session image"):
        reopened_export(b"SQLite format 3\x00" + bytes(100), env.metadata)
    sqlite = make_backend(Settings(data_dir=tmp_path, secret_key=TEST_SECRET), env)
    try:
        with pytest.raises(ValueError, match="PostgreSQL session export"):
            sqlite.open_image(b'{"format": "stategym-pg-schema/1"}')
    finally:
        sqlite.dispose()


# --- kill -9 of a PostgreSQL server in the middle of forks and rewinds ------------------------
_PG_WORKER = r"""
import asyncio, json, sys
from pathlib import Path
import httpx
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
data_dir, url, prefix, secret, task = sys.argv[1:6]
task = json.loads(task)
calls = [(c["name"], c["arguments"] if isinstance(c["arguments"], dict)
          else json.loads(c["arguments"])) for c in task["ground_truth"]]
settings = Settings(data_dir=Path(data_dir), secret_key=secret, database_url=url,
                    pg_schema_prefix=prefix, pg_schema_pool=0)
app = create_app(settings, load_environment("retail"))

async def main():
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as c:
            assert (await c.post("/seed_session", json=task)).status_code == 200
            for name, args in calls:
                await c.post(f"/{name}", json=args)
            n = 0
            while True:
                k = n % (len(calls) + 1)
                forked = await c.post("/fork_session", json={"n": 1, "at_step": k})
                assert forked.status_code == 200, forked.text
                assert (await c.post("/rewind_session", json={"to_step": k})).status_code == 200
                for name, args in calls[k:]:
                    await c.post(f"/{name}", json=args)
                n += 1
                print(n, flush=True)

asyncio.run(main())
"""


@pytest.mark.slow  # three server processes killed mid-flight: make test-slow
async def test_kill_9_of_a_postgres_server_during_forks_and_rewinds_leaves_sessions_whole(
    tmp_path, pg_prefix
):
    """Each fork and rewind is one PostgreSQL transaction: a server killed in the middle of
    them leaves every session schema at the state after exactly the steps its log holds."""
    from app.errors import SessionNotFound
    from app.storage.steplog import step_log
    from app.verify.state.dump import dump_state
    from tests.conftest import TEST_SECRET

    settings = backend_settings("postgres", tmp_path / "data", pg_prefix)
    env = load_environment("retail")
    calls = _calls(MULTI)

    def state_and_steps(conn: Any) -> tuple[int, Any]:
        with conn.begin():
            log = step_log(conn)
            assert log is not None
            return log.count(), dump_state(conn, env.metadata.tables, env.compare, reuse=False)

    async def read(app: Any, session_id: str) -> tuple[int, Any]:
        sessions = app.state.protocol.sessions
        return sessions.backend.read(await sessions._handle(session_id), state_and_steps)

    # The state after every step, from a clean forward rollout on PostgreSQL.
    reference = create_app(settings, env)
    async with reference.router.lifespan_context(reference):
        async with _client(reference) as client:
            seeded = await client.post("/seed_session", json=MULTI)
            first = seeded.json()["session_id"]
            states = [(await read(reference, first))[1]]
            for name, args in calls:
                await client.post(f"/{name}", json=args)
                states.append((await read(reference, first))[1])
    for round_ in range(3):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _PG_WORKER,
                str(settings.data_dir),
                settings.database_url,
                pg_prefix,
                TEST_SECRET,
                json.dumps(MULTI),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.stdout is not None
        assert proc.stdout.readline(), proc.stderr.read() if proc.stderr else ""  # one loop done
        time.sleep(0.1 + 0.15 * round_)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    after = create_app(settings, env)
    checked = 0
    async with after.router.lifespan_context(after):
        for record in after.state.protocol.sessions.control.list("retail"):
            if record.id == first:
                continue
            try:
                steps, state = await read(after, record.id)
            except SessionNotFound:
                # Killed between the child's control row and its schema: the fork did not
                # happen, and the id is answered as a lost session, never half a database.
                continue
            assert state == states[steps], (record.id, steps)
            checked += 1
    assert checked >= 6  # three parents and their forks
