"""Byte-for-byte record of every shipped task's gold replay: each tool output and the final state.

For every task of `envs/<env>/tasks.jsonl` (the environment's `tasks_path`), on a clone of the
task's snapshot (the one the server seeds sessions from, change-tracking triggers included), the
gold calls run through the real runner (`run_tool`); then they run a second time on the same
database, which exercises the refusals (an order already cancelled, a seat already taken) and any
write that may repeat. The record keeps, per call, the exact JSON of `{"output": ...}` or
`{"error": ...}`, and the final state: every row of every table in the file (framework tables
included), in primary-key order, as `repr` (so 1 and 1.0, or -0.0 and 0.0, differ).

A refactor that must not change behaviour compares the digests before and after
(`tests/verify/test_replay_identical.py` against `tests/golden/replay_digests.json`). To see what
differs, write the full records on both commits and diff them:

    python -m tests.support.replay_record --full /tmp/before.json   # on the base commit
    python -m tests.support.replay_record --full /tmp/after.json
    python -m tests.support.replay_record --digests tests/golden/replay_digests.json  # re-bless
    python -m tests.support.replay_record --env NAME --digests tests/golden/replay_digests.json
                                                       # record a new environment only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from app.core.tasks import task_from_data
from app.registry import environment_names, load_environment
from app.sdk.environment import ToolContext
from app.storage.runner import run_tool
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.store import Store

REPO = Path(__file__).resolve().parents[2]


def _tasks(env_name: str) -> list[dict[str, Any]]:
    path = load_environment(env_name).tasks_path
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def state_rows(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Every table of the database, each row as the `repr` of its values, ordered by primary key
    (by rowid, included, for a table without one).

    Not by rowid everywhere: the framework's change log (`_stategym_changes`, `_stategym_rows`)
    records tables in the order an ORM flush writes them, which varies between processes for
    tables a flush may write in either order (hash randomisation), so only its content is state.
    """
    out: dict[str, list[str]] = {}
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    for (name,) in tables:
        info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        if pk:
            order = ", ".join(f'"{c}"' for c in pk)
            rows = conn.execute(f'SELECT * FROM "{name}" ORDER BY {order}').fetchall()
        else:
            rows = conn.execute(f'SELECT rowid, * FROM "{name}" ORDER BY rowid').fetchall()
        out[name] = [repr(row) for row in rows]
    return out


def record_task(store: Store, data: dict[str, Any]) -> dict[str, Any]:
    env = store.env
    task = task_from_data(data)
    snapshot = store.snapshot(task)
    conn = sqlite_db.memory_from_image(snapshot.image)
    bind = sqlite_db.bind_connection(conn)
    ctx = ToolContext(now=snapshot.now, session_id="replay", task_id=task.task_id)
    outputs = []
    try:
        for _round in range(2):
            for call in task.ground_truth:
                tool = env.tool_named(call.name)
                assert tool is not None, call.name
                outcome = run_tool(bind, tool, call.arguments, ctx)
                outputs.append(json.dumps(outcome, ensure_ascii=False))
    finally:
        bind.close()
    state = state_rows(conn)
    conn.close()
    return {"outputs": outputs, "state": state}


def record_env(env_name: str, data_dir: Path) -> dict[str, dict[str, Any]]:
    store = Store(data_dir, load_environment(env_name))
    return {t["task_id"]: record_task(store, t) for t in _tasks(env_name)}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digests(record: dict[str, Any]) -> dict[str, Any]:
    """Per call, the hash of its output; per table, the hash of its rows."""
    return {
        "outputs": [_sha(o) for o in record["outputs"]],
        "state": {t: _sha("\n".join(rows)) for t, rows in record["state"].items()},
    }


def record_all(data_dir: Path, envs: list[str] | None = None) -> dict[str, Any]:
    return {name: record_env(name, data_dir / name) for name in envs or environment_names()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", type=Path, help="write every output and row here")
    parser.add_argument("--digests", type=Path, help="write the per-call/per-table digests here")
    parser.add_argument("--env", action="append", help="only this environment (repeatable)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        records = record_all(Path(tmp), args.env)
    if args.full:
        args.full.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    if args.digests:
        out = {
            env: {task_id: digests(r) for task_id, r in tasks.items()}
            for env, tasks in records.items()
        }
        if args.env and args.digests.exists():  # only these environments are re-recorded
            out = {**json.loads(args.digests.read_text()), **out}
        args.digests.parent.mkdir(parents=True, exist_ok=True)
        args.digests.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
