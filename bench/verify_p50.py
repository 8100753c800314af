"""Server-side verify p50/p90 over every retail task (gold rollout, X-Process-Time), one request
at a time, last of `passes` passes; a checkout's own code serves (compare two in one run):

    python -m bench.verify_p50 /path/to/checkout [passes]
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

repo = Path(sys.argv[1])
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# envs/retail/ (the package's own), or fixtures/retail/ in a checkout from before they moved.
TASKS = repo / "envs/retail/tasks.jsonl"
if not TASKS.exists():
    TASKS = repo / "fixtures/retail/tasks.jsonl"
tasks = [json.loads(line) for line in TASKS.read_text().splitlines() if line.strip()]
with tempfile.TemporaryDirectory() as d:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(repo),
        "STATEGYM_LOG_LEVEL": "warning",
        "STATEGYM_SECRET_KEY": "k9Vq2ZL7rT4wXy8PbN3mJc6HdF1sGa5eQ0uRiOtE",
    }
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "serve",
            "--env",
            "retail",
            "--port",
            str(port),
            "--data-dir",
            d,
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    times: list[float] = []
    rewards: list[float] = []
    try:
        for n in range(passes):
            for t in tasks:
                with httpx.Client(base_url=url, timeout=60) as c:
                    c.post("/seed_session", json=t)
                    for call in t["ground_truth"]:
                        c.post("/" + call["name"], json=call["arguments"])
                    answer = "Done. " + " ".join(t.get("expected_outputs") or [])
                    body = {
                        **t,
                        "response": {
                            "output": [
                                {
                                    "type": "message",
                                    "role": "assistant",
                                    "content": [{"type": "output_text", "text": answer}],
                                }
                            ]
                        },
                    }
                    r = c.post("/verify", json=body)
                    if n == passes - 1:
                        times.append(float(r.headers["x-process-time"]))
                        rewards.append(r.json()["reward"])
                    c.post("/close_session", json={})
    finally:
        p.terminate()
        p.wait()
times.sort()
p90 = times[int(len(times) * 0.9)]
mean = sum(rewards) / len(rewards)
print(f"{repo}: verify p50 {statistics.median(times):.2f} ms, p90 {p90:.2f} ms, n={len(times)}")
print(f"mean reward {mean:.3f}")
