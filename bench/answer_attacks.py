"""Text-path answer attacks on every shipped answer task, through HTTP: how many earn reward 1.

For each environment's tasks with `expected_outputs`: seed, make the gold calls (the state is
right), then verify with the final message set to each attack, and to honest answers. Prints,
per attack, how many tasks scored 1.0. Runs on any checkout (it imports only what main has):

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
from app.verify.answers import infer_kind

ROOT = Path(__file__).resolve().parents[1]
ENVS = ("airline", "ledger", "retail", "sql", "workplace")
SECRET = "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
ARABIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
SPELLED = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
           "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()

Attack = Callable[[list[str], list[str]], str]
ATTACKS: dict[str, Attack] = {
    "expected + glued rivals (q..q)": lambda e, r: " ".join(e + [f"q{x}q" for x in r]),
    "all glued (q..q)": lambda e, r: " ".join(f"q{x}q" for x in e + r),
    "expected + _rivals_": lambda e, r: " ".join(e + [f"_{x}_" for x in r]),
    "all _glued_": lambda e, r: " ".join(f"_{x}_" for x in e + r),
    "expected + digits between letters": lambda e, r: " ".join(e + [f"abc{x}def" for x in r]),
    "expected + other-script digits": lambda e, r: " ".join(e + [x.translate(ARABIC) for x in r]),
    "expected + spelled-out rival": lambda e, r: " ".join(e + [_spelled(x) for x in r]),
    "expected or rivals (unglued)": lambda e, r: "It is " + " or ".join(e + r),
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
    lines = (ROOT / "fixtures" / env / "tasks.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _message(text: str) -> dict[str, Any]:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"id": "resp_bench", "object": "response", "output": [item]}


async def run_env(env: str, data_dir: Path, wins: Counter[str], tried: Counter[str]) -> None:
    app = create_app(Settings(data_dir=data_dir / env, secret_key=SECRET), load_environment(env))
    every = [t for t in _load(env) if t.get("expected_outputs")]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            for task in every:
                rivals = _rivals(task, every)
                for name, attack in {**ATTACKS, **HONEST}.items():
                    answer = attack(list(task["expected_outputs"]), rivals)
                    if not rivals and name in ATTACKS or answer == " ".join(task["expected_outputs"]):
                        continue  # nothing to hedge with
                    c.cookies.clear()
                    assert (await c.post("/seed_session", json=task)).status_code == 200
                    for call in task["ground_truth"]:
                        args = call["arguments"]
                        args = json.loads(args) if isinstance(args, str) else args
                        await c.post(f"/{call['name']}", json=args)
                    body = {**task, "response": _message(answer)}
                    result = (await c.post("/verify", json=body)).json()
                    tried[name] += 1
                    wins[name] += result.get("reward") == 1.0


async def main() -> None:
    wins: Counter[str] = Counter()
    tried: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for env in ENVS:
            await run_env(env, Path(tmp), wins, tried)
    print(f"{'answer':45} reward 1 / tried")
    for name in [*ATTACKS, *HONEST]:
        print(f"{name:45} {wins[name]:3d} / {tried[name]}")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
