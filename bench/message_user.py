"""A `message_user` call's server-side time with the scripted user (X-Process-Time), next to a
read-only retail tool in the same run, on a real server over HTTP, one call at a time:

    python -m bench message_user [calls]

Target (docs/conversations.md): message_user p50 <= 2 ms server-side. Each session takes up to
50 messages (the budget is 60), alternating a question that gets a fact and one that does not.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SECRET = "k9Vq2ZL7rT4wXy8PbN3mJc6HdF1sGa5eQ0uRiOtE"
PER_SESSION = 50


def _task() -> dict[str, Any]:
    """A shipped conversational retail task, or the first task given a user of its own."""
    rows = [
        json.loads(line)
        for line in (ROOT / "envs/retail/tasks.jsonl").read_text().split("\n")
        if line
    ]
    talk = next((t for t in rows if t.get("user")), None)
    if talk is not None:
        return talk
    task = dict(rows[0])
    task["user"] = {
        "goal": "Find out about my order.",
        "facts": [
            {"key": "zip", "value": "10001", "asked_by": ["zip"], "reply": "My zip is 10001."}
        ],
        "unclear": "I have a question about my order.",
    }
    return task


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    task = _task()
    read = next(c for c in task["ground_truth"] if c["name"].startswith(("get_", "find_", "list_")))
    with tempfile.TemporaryDirectory() as d:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "STATEGYM_LOG_LEVEL": "warning"}
        env["STATEGYM_SECRET_KEY"] = SECRET
        server = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--env", "retail", "--port", str(port)]
            + ["--data-dir", d],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx.get(url + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            talk: list[float] = []
            tool: list[float] = []
            messages = ["Could you tell me your zip code?", "How are you today?"]
            while len(talk) < calls:
                with httpx.Client(base_url=url, timeout=60) as c:
                    c.post("/seed_session", json=task).raise_for_status()
                    for i in range(min(PER_SESSION, calls - len(talk))):
                        r = c.post("/message_user", json={"text": messages[i % 2]})
                        assert "output" in r.json(), r.text
                        talk.append(float(r.headers["X-Process-Time"]))
                        r = c.post("/" + read["name"], json=read["arguments"])
                        tool.append(float(r.headers["X-Process-Time"]))
                    c.post("/close_session", json={})
        finally:
            server.terminate()
            server.wait(timeout=30)
    for name, values in (("message_user", talk), (read["name"], tool)):
        print(
            f"{name:>22}: p50 {_p(values, 50):.2f} ms  p90 {_p(values, 90):.2f} ms  n={len(values)}"
        )
    ratio = statistics.median(talk) / statistics.median(tool)
    verdict = "met" if statistics.median(talk) <= 2.0 else "MISSED"
    print(f"message_user / {read['name']} p50: {ratio:.2f}x; target p50 <= 2 ms: {verdict}")


if __name__ == "__main__":
    main()
