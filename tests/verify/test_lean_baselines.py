"""The lean baselines (bench/lean_server.py), one per environment, over real HTTP.

For every shipped task of every environment, on the lean server's FastAPI app (TestClient: the
same routes, cookie and middleware uvicorn serves): the gold rollout (seed -> every gold call ->
verify -> close) answers without an error and scores 1.0; a rollout that does nothing scores
below 1 on every task whose gold writes. This is what makes the StateGym/lean ratio of
`python -m bench.targets --only rollout` compare like with like.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.authoring.replay import dump, open_task_db, replay
from app.registry import load_environment
from app.storage.sqlite.store import Store
from bench.lean_server import COOKIE, ENVS, Sessions, create_app, run_call, storage
from bench.rollout import env_tasks, verify_body
from bench.targets import LEAN_ENVS

WRITE_VERBS = ("insert", "update", "delete", "replace", "with")


def _writes(env_name: str, task: dict[str, Any]) -> bool:
    """Whether the task's gold changes state: a write tool (for sql, a data-changing statement)."""
    env = load_environment(env_name)
    for call in task["ground_truth"]:
        if call["name"] == "run_sql":
            if call["arguments"]["sql"].lstrip().split()[0].lower() in WRITE_VERBS:
                return True
        elif not env.tool_named(call["name"]).read_only:  # type: ignore[union-attr]
            if call["name"] not in ("submit_answer", "decline_request"):  # the answer row only
                return True
    return False


def _rollout(client: TestClient, task: dict[str, Any], calls: list[dict[str, Any]]) -> float:
    client.cookies.clear()
    seeded = client.post("/seed_session", json=task)
    assert seeded.status_code == 200 and COOKIE in seeded.cookies, seeded.text
    for call in calls:
        reply = client.post(f"/{call['name']}", json=call["arguments"])
        assert reply.status_code == 200, reply.text
        assert "output" in reply.json(), (task["task_id"], call, reply.json())
    verdict = client.post("/verify", json=verify_body(task))
    assert verdict.status_code == 200, verdict.text
    closed = client.post("/close_session", json={})
    assert closed.json() == {"status": "ok", "closed": True}
    return float(verdict.json()["reward"])


def test_every_environment_has_a_lean_server() -> None:
    assert set(LEAN_ENVS) == set(ENVS) == {"retail", "airline", "ledger", "sql", "workplace"}


@pytest.mark.parametrize("env_name", sorted(ENVS))
def test_lean_server_scores_every_gold_rollout(env_name: str, tmp_path: Path) -> None:
    store = Store(tmp_path, load_environment(env_name))
    store.template_image()  # builds the template file the lean server reads its base rows from
    app = create_app(env_name, str(store.template_path), "s" * 48)
    tasks = env_tasks(env_name)
    writing = [t for t in tasks if _writes(env_name, t)]
    with TestClient(app) as client:
        gold = [_rollout(client, t, t["ground_truth"]) for t in tasks]
        noop = [_rollout(client, t, []) for t in writing]
        unsigned = client.post("/verify", json={}, cookies={COOKIE: "forged"})
    failed = [t["task_id"] for t, r in zip(tasks, gold, strict=True) if r != 1]
    assert sum(gold) / len(gold) == 1.0, failed
    assert len(writing) >= len(tasks) // 3, len(writing)  # every env ships writing tasks
    unnoticed = [t["task_id"] for t, r in zip(writing, noop, strict=True) if r >= 1]
    assert not unnoticed
    assert unsigned.status_code == 401


# --- the lean tools write what StateGym's tools write --------------------------------------------
_DATETIME = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def _norm(value: Any) -> Any:
    """One spelling per value: StateGym's '2026-04-15 09:30:00.000000' and a seed's or the lean's
    '2026-04-15T09:30:00' are the same datetime; True is 1."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and _DATETIME.match(value):
        return datetime.fromisoformat(value).isoformat()
    return value


@pytest.mark.parametrize("env_name", ["retail", "airline", "ledger", "sql", "workplace"])
def test_lean_gold_writes_the_rows_stategym_writes(env_name: str, tmp_path: Path) -> None:
    """Per writing task: after the gold, every row StateGym's tools changed or added, and every
    row the lean session holds, is the same row (same id, same values) in both."""
    env = load_environment(env_name)
    store = Store(tmp_path, env)
    store.template_image()
    lean = ENVS[env_name]
    sessions = Sessions(lean, storage(lean).Base(str(store.template_path), lean.TABLES))
    for task in (t for t in env_tasks(env_name) if _writes(env_name, t)):
        db, now = open_task_db(env, task["seed"])
        before = {t: {r[0]: r for r in rows} for t, rows in dump(db, env).items()}
        replay(db, env, task["ground_truth"], now)
        after = {t: {r[0]: r for r in rows} for t, rows in dump(db, env).items()}
        columns = {t: [c.name for c in env.metadata.tables[t].columns] for t in after}
        db.close()
        sid = sessions.seed(task)
        mine, _task, lean_now = sessions.live[sid]
        for call in task["ground_truth"]:
            assert "output" in run_call(lean, mine, call["name"], call["arguments"], lean_now)
        for table in lean.COMPARED:
            if env_name == "sql":
                lean_rows = {
                    r[0]: dict(zip(columns[table], r, strict=True)) for r in mine.dump()[table]
                }
            else:
                lean_rows = {i: mine.get(table, i) for i in mine.own[table]}
            changed = {i for i, r in after[table].items() if before[table].get(i) != r}
            gone = before[table].keys() - after[table].keys()
            for i in changed | gone | lean_rows.keys():
                theirs = after[table].get(i)
                own = i in lean_rows or env_name == "sql"
                ours = lean_rows.get(i) if own else mine.get(table, i)
                where = (task["task_id"], table, i)
                assert (theirs is None) == (ours is None), where
                if theirs is not None and ours is not None:
                    expected = dict(zip(columns[table], theirs, strict=True))
                    assert {k: _norm(v) for k, v in ours.items()} == {
                        k: _norm(expected[k]) for k in ours
                    }, where
        sessions.close(sid)
