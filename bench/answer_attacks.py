"""Text-path answer attacks on every shipped answer task, through HTTP: how many earn reward 1.

For each environment's tasks with `expected_outputs`: seed, make the gold calls (the state is
right), then verify with the final message set to each attack, and to honest answers. Prints,
per attack, how many tasks scored 1.0, over all tasks and over the hedgeable ones (those where
the plain listing "expected or rivals" already scores 0: keyword answers such as `fraud` have no
rivals on the text path, a known limit). Runs on any checkout (it imports only what main has):

    PYTHONPATH=/work/main /work/main/.venv/bin/python bench/answer_attacks.py   # before
    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/answer_attacks.py         # after
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from app.verify.answers.text import infer_kind

ROOT = Path(__file__).resolve().parents[1]
ENVS = ("airline", "ledger", "retail", "sql", "workplace")
VERBOSE = "-v" in sys.argv  # print each attack that wins and each honest answer that loses
SECRET = "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
ARABIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
SPELLED = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
).split()

Attack = Callable[[list[str], list[str]], str]
ATTACKS: dict[str, Attack] = {
    "expected + glued rivals (q..q)": lambda e, r: " ".join(e + [f"q{x}q" for x in r]),
    "all glued (q..q)": lambda e, r: " ".join(f"q{x}q" for x in e + r),
    "expected + _rivals_": lambda e, r: " ".join(e + [f"_{x}_" for x in r]),
    "all _glued_": lambda e, r: " ".join(f"_{x}_" for x in e + r),
    "expected + digits between letters": lambda e, r: " ".join(e + [f"abc{x}def" for x in r]),
    "expected + other-script digits": lambda e, r: " ".join(e + [x.translate(ARABIC) for x in r]),
    "expected + spelled-out rival": lambda e, r: " ".join(e + [_spelled(x) for x in r]),
    "expected or rivals (unglued)": lambda e, r: " or ".join(e + r),
}
HONEST: dict[str, Attack] = {
    "honest: Done. <expected>": lambda e, r: "Done. " + " ".join(e),
    "honest: a sentence": lambda e, r: "The answer you asked for is " + " and ".join(e) + ".",
}


def _spelled(value: str) -> str:
    digits = re.sub(r"[^0-9]", "", value.split(".")[0])
    return SPELLED[int(digits) % 21] if digits else value


def _rivals(task: dict[str, Any], every: list[dict[str, Any]]) -> list[str]:
    expected = task["expected_outputs"]
    kinds = {infer_kind(e) for e in expected}
    others = sorted(
        {o for t in every for o in t["expected_outputs"] if infer_kind(o) in kinds} - set(expected)
    )[:3]
    for e in expected:
        if infer_kind(e) == "amount":
            others.append(f"{float(e) + 1:.2f}")
        elif infer_kind(e) == "number":
            others.append(str(int(e) + 1))
    return others


def _load(env: str) -> list[dict[str, Any]]:
    lines = (ROOT / "envs" / env / "tasks.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _message(text: str) -> dict[str, Any]:
    item = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    return {"id": "resp_bench", "object": "response", "output": [item]}


def _applies(name: str, expected: list[str], rivals: list[str]) -> bool:
    """Spelled-out and other-script rivals only mean something where the values have digits."""
    if not rivals:
        return False
    if name == "expected + spelled-out rival":
        return all(infer_kind(e) in ("amount", "number") for e in expected)
    if name == "expected + other-script digits":
        return any(c.isdigit() for r in rivals for c in r)
    return True


async def _reward(c: httpx.AsyncClient, task: dict[str, Any], answer: str) -> float:
    c.cookies.clear()
    assert (await c.post("/seed_session", json=task)).status_code == 200
    for call in task["ground_truth"]:
        args = call["arguments"]
        await c.post(f"/{call['name']}", json=json.loads(args) if isinstance(args, str) else args)
    body = {**task, "response": _message(answer)}
    return float((await c.post("/verify", json=body)).json().get("reward", 0.0))


async def run_env(env: str, data_dir: Path, score: Counter[str]) -> None:
    """score[(name, column)]: column 'tried'/'won' over all tasks, 'htried'/'hwon' over the
    hedgeable ones (where the unglued listing 'expected or rivals' scores 0)."""
    app = create_app(Settings(data_dir=data_dir / env, secret_key=SECRET), load_environment(env))
    every = [t for t in _load(env) if t.get("expected_outputs")]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            for task in every:
                expected, rivals = list(task["expected_outputs"]), _rivals(task, every)
                plain = "expected or rivals (unglued)"
                hedgeable = (
                    bool(rivals) and await _reward(c, task, ATTACKS[plain](expected, rivals)) == 0
                )
                for name, attack in {**ATTACKS, **HONEST}.items():
                    if name in ATTACKS and not _applies(name, expected, rivals):
                        continue
                    answer = attack(expected, rivals)
                    won = await _reward(c, task, answer) == 1.0
                    for column, counted in (("", True), ("h", hedgeable or name in HONEST)):
                        if counted:
                            score[f"{name}|{column}tried"] += 1
                            score[f"{name}|{column}won"] += won
                    if VERBOSE and won == (name in ATTACKS):
                        print(f"{name}: {task['task_id']} {answer[:100]!r}", file=sys.stderr)


async def main() -> None:
    score: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for env in ENVS:
            await run_env(env, Path(tmp), score)
    print(f"{'answer':40} reward 1 / tried: all tasks | hedgeable tasks")
    for name in [*ATTACKS, *HONEST]:
        s = {k.split("|")[1]: v for k, v in score.items() if k.startswith(name + "|")}
        print(
            f"{name:40} {s.get('won', 0):3d} / {s.get('tried', 0):3d}"
            f"        | {s.get('hwon', 0):3d} / {s.get('htried', 0):3d}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
