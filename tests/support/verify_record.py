"""Byte-for-byte record of verify results over every shipped task: gold, no-op, partial and
wrong trajectories, each verified twice on its open session, once more after close (replayed),
and the verify result the control database stored.

Per task of `envs/<env>/tasks.jsonl`, through `SessionManager` in process (the server's code
below its routes), four rollouts: `gold` (the reference calls, the final message naming every
expected output), `noop` (nothing), `partial` (the first half of the reference calls, the
response listing all of them: a trajectory mismatch) and `wrong` (the next task's reference
calls: errors and collateral changes). Each result is kept as the exact JSON the route renders
(app/jsonio), so 1 and 1.0, key order and rounding all count. Every session of a task is
verified while the sessions of other tasks are, so per-task caches serve several rollouts (a
GRPO group) and are checked against tasks in between.

A change that must not alter verify compares the digests before and after
(`tests/verify/test_verify_identical.py` against `tests/golden/verify_digests.json`). To see what
differs, write the full records on both commits and diff them:

    python -m tests.support.verify_record --full /tmp/before.json    # on the base commit
    python -m tests.support.verify_record --full /tmp/after.json
    python -m tests.support.verify_record --digests tests/golden/verify_digests.json  # re-bless
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from app import jsonio
from app.registry import environment_names, load_environment
from app.runtime.sessions import SessionManager
from app.runtime.steps import body_text
from app.server.models import parse_seed_body
from app.settings import Settings

REPO = Path(__file__).resolve().parents[2]
KINDS = ("gold", "noop", "partial", "wrong")
SECRET = "verify-record-0123456789-abcdefghijklmnopqrstuvwxyz"


def _tasks(env_name: str) -> list[dict[str, Any]]:
    path = load_environment(env_name).tasks_path
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _plan(tasks: list[dict[str, Any]], i: int, kind: str) -> tuple[list[Any], list[Any], str]:
    """(calls made, calls the response lists, final text) of rollout `kind` of task i."""
    gold = list(tasks[i].get("ground_truth") or [])
    if kind == "gold":
        text = "Done. " + " ".join(str(x) for x in tasks[i].get("expected_outputs") or [])
        return gold, gold, text
    if kind == "noop":
        return [], [], "I cannot help with that."
    if kind == "partial":
        return gold[: len(gold) // 2], gold, "Done."
    other = list(tasks[(i + 1) % len(tasks)].get("ground_truth") or [])
    return other, other, "Done."


def _item(n: int, call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments", {})
    return {
        "type": "function_call",
        "call_id": f"call_{n}",
        "name": call["name"],
        "arguments": args if isinstance(args, str) else json.dumps(args),
    }


async def _rollout(mgr: SessionManager, tasks: list[dict[str, Any]], i: int, kind: str) -> Any:
    task, env = tasks[i], mgr.env
    made, listed, text = _plan(tasks, i, kind)
    sid = (await mgr.seed(parse_seed_body(task))).session_id
    outputs = []
    for call in made:
        tool = env.tool_named(call["name"])
        args = call.get("arguments", {})
        if isinstance(args, str):
            args = json.loads(args or "{}")
        outputs.append(body_text(await mgr.call_tool(sid, tool, args)) if tool else None)
    items: list[dict[str, Any]] = []
    for n, call in enumerate(listed):
        items.append(_item(n, call))
        if n < len(outputs) and outputs[n] is not None:
            output = {"type": "function_call_output", "call_id": f"call_{n}", "output": outputs[n]}
            items.append(output)
    message = {"type": "output_text", "text": text}
    items.append({"type": "message", "role": "assistant", "content": [message]})
    return sid, {**task, "response": {"id": f"resp-{kind}", "output": items}}


async def _record(env_name: str, data_dir: Path) -> dict[str, dict[str, str]]:
    settings = Settings(data_dir=data_dir, secret_key=SECRET)
    mgr = SessionManager(settings, load_environment(env_name))
    tasks = _tasks(env_name)
    out: dict[str, dict[str, str]] = {}
    try:
        rollouts = []
        for i, task in enumerate(tasks):
            for kind in KINDS:
                rollouts.append((task["task_id"], kind, *await _rollout(mgr, tasks, i, kind)))
        # Interleaved: every first verify, then every second one (caches warm, other tasks'
        # entries in between), then after close.
        for rnd in ("first", "again"):
            for task_id, kind, sid, body in rollouts:
                result = await mgr.verify(sid, body)
                out.setdefault(task_id, {})[f"{kind}.{rnd}"] = jsonio.dumps(result).decode()
        for task_id, kind, sid, _body in rollouts:
            record = mgr.control.get(sid)
            stored = record.verify if record is not None else None
            out[task_id][f"{kind}.stored"] = jsonio.dumps(stored).decode()
            await mgr.close(sid)
        for task_id, kind, sid, body in rollouts:
            if kind in ("gold", "partial"):
                result = await mgr.verify(sid, body)
                out[task_id][f"{kind}.replayed"] = jsonio.dumps(result).decode()
    finally:
        await mgr.aclose()
    return out


def record_env(env_name: str, data_dir: Path) -> dict[str, dict[str, str]]:
    return asyncio.run(_record(env_name, data_dir))


def digests(records: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {
        task_id: {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in sorted(r.items())}
        for task_id, r in records.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", action="append", help="only these (default: every one)")
    parser.add_argument("--full", type=Path, help="write every result's JSON here")
    parser.add_argument("--digests", type=Path, help="write (or update) the digests here")
    args = parser.parse_args()
    names = args.env or environment_names()
    full: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            full[name] = record_env(name, Path(tmp) / name)
    if args.full:
        args.full.write_text(json.dumps(full, indent=1, sort_keys=True))
    if args.digests:
        known = json.loads(args.digests.read_text()) if args.digests.exists() else {}
        known.update({name: digests(r) for name, r in full.items()})
        args.digests.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
