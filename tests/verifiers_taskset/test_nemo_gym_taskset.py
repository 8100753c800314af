"""verifiers 0.4.0's own `NeMoGymTaskset` against a live StateGym: its task setup (legacy seed,
cookies, the `mcp` key), its toolset (tools over MCP, or `POST /<tool>` without MCP) and its
`nemo_gym` reward (verify) run unchanged; the trace the harness would record is built from the
gold calls and their real results. Gold scores 1.0, a no-op 0.0, and no session stays open:
closed at verify, or without that by the idle timeout.

verifiers needs mcp 2.x and StateGym mcp 1.x, so they live in two virtualenvs: this file runs in
one with verifiers (`make test-verifiers`, pytest --noconftest) and starts the server with
$STATEGYM_PYTHON (the project's virtualenv). It imports nothing from StateGym.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("verifiers", reason="verifiers is not installed (make test-verifiers)")

from verifiers.v1.graph import MessageNode  # noqa: E402
from verifiers.v1.mcp import SharedToolsetConfig  # noqa: E402
from verifiers.v1.mcp.server import _call_state  # noqa: E402
from verifiers.v1.tasksets.nemo_gym.taskset import (  # noqa: E402
    NeMoGymConfig,
    NeMoGymTask,
    NeMoGymTaskConfig,
    NeMoGymTaskset,
)
from verifiers.v1.tasksets.nemo_gym.toolset import NeMoGymState, NeMoGymToolset  # noqa: E402
from verifiers.v1.trace import AgentInfo, Trace, TraceTask  # noqa: E402
from verifiers.v1.types import AssistantMessage, ToolCall, ToolMessage, UserMessage  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "envs" / "retail" / "tasks.jsonl"  # the retail package's shipped tasks
SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
STATEGYM_PYTHON = os.environ.get("STATEGYM_PYTHON") or str(REPO / ".venv" / "bin" / "python")
TASK_INDEXES = (0, 7, 20, 30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, data_dir: Path, mcp: bool, extra_env: dict[str, str] | None = None):
        self.data_dir, self.port, self.mcp = data_dir, _free_port(), mcp
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "STATEGYM_SECRET_KEY": SECRET,
            "STATEGYM_LOG_LEVEL": "warning",
            # verifiers never calls /close_session: verify closes (docs/integrations.md).
            "STATEGYM_CLOSE_ON_VERIFY": "true",
            "STATEGYM_EXPOSE_TOOLS_OVER_MCP": "true" if mcp else "false",
            **(extra_env or {}),
        }
        argv = [STATEGYM_PYTHON, "-m", "app", "serve", "--env", "retail", "--port", str(self.port)]
        argv += ["--host", "127.0.0.1", "--data-dir", str(data_dir)]
        self.log = data_dir.parent / f"{data_dir.name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=environ, stdout=out, stderr=out)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server did not start:\n{self.log.read_text()}")

    def open_sessions(self) -> list[str]:
        argv = [STATEGYM_PYTHON, "-m", "app", "sessions", "list", "--data-dir", str(self.data_dir)]
        listed = subprocess.run(
            [*argv, "--json", "--limit", "10000"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            check=True,
        )
        return [s["id"] for s in json.loads(listed.stdout) if s["status"] != "closed"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module", params=["mcp", "http"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with tempfile.TemporaryDirectory() as tmp:
        started = Server(Path(tmp) / "data", mcp=request.param == "mcp")
        try:
            yield started
        finally:
            started.stop()


def tasks(url: str) -> list[NeMoGymTask]:
    config = NeMoGymConfig(dataset=DATASET, task=NeMoGymTaskConfig(resources_url=url))
    return list(NeMoGymTaskset(config).load())


async def rollout(task: NeMoGymTask, *, gold: bool) -> tuple[float, Trace]:
    """The taskset's setup, its toolset's calls (the gold ones, or none), its reward."""
    state = NeMoGymState()
    trace = Trace(
        task=TraceTask(type=type(task).__name__, data=task.data),
        agent=AgentInfo(config={}),
        state=state,
    )
    await task.setup(trace, None)  # type: ignore[arg-type]  # setup does not use the runtime
    toolset = NeMoGymToolset(SharedToolsetConfig())
    _call_state.set(state)  # what the toolset's MCP wrapper does around every call
    listed = {tool.name for tool in await toolset.list_tools()}
    row: dict[str, Any] = task.data.row
    nodes = [MessageNode(message=UserMessage(content="the task"))]
    for i, call in enumerate(row["ground_truth"] if gold else []):
        assert call["name"] in listed
        result = await toolset.call_tool(call["name"], call["arguments"])
        assert not result.is_error, result.content
        tool_call = ToolCall(id=f"c{i}", name=call["name"], arguments=json.dumps(call["arguments"]))
        assistant = AssistantMessage(tool_calls=[tool_call])
        nodes.append(MessageNode(parent=len(nodes) - 1, sampled=True, message=assistant))
        reply = ToolMessage(tool_call_id=f"c{i}", content=result.content[0].text)
        nodes.append(MessageNode(parent=len(nodes) - 1, message=reply))
    answer = "Done. " + " ".join(row.get("expected_outputs") or []) if gold else "Sorry."
    final = AssistantMessage(content=answer)
    nodes.append(MessageNode(parent=len(nodes) - 1, sampled=True, message=final))
    trace.nodes = nodes
    return await task.nemo_gym(trace), trace


@pytest.mark.parametrize("index", TASK_INDEXES)
async def test_gold_scores_one_and_noop_zero(server: Server, index: int):
    task = tasks(server.url)[index]
    gold, trace = await rollout(task, gold=True)
    assert gold == 1.0, trace.info["nemo_gym"].get("failure_reason")
    assert trace.state.mcp_url == (server.url + "/mcp" if server.mcp else None)
    noop, _ = await rollout(task, gold=False)
    assert noop == 0.0


async def test_a_conversational_task_scores_one(server: Server):
    """The user is a tool: verifiers' toolset talks to it with `message_user` like any other."""
    talk = [t for t in tasks(server.url) if t.data.row.get("user")]
    assert talk, "the shipped retail set has conversational tasks"
    gold, trace = await rollout(talk[0], gold=True)
    assert gold == 1.0, trace.info["nemo_gym"].get("failure_reason")
    noop, _ = await rollout(talk[0], gold=False)
    assert noop == 0.0


def test_no_session_is_left_open(server: Server):
    assert server.open_sessions() == []


def test_the_seed_answer_has_the_mcp_key_exactly_when_mcp_is_on(server: Server):
    with httpx.Client(base_url=server.url) as http:
        seeded = http.post("/seed_session", json=tasks(server.url)[0].data.row)
        seeded.raise_for_status()
        assert ("mcp" in seeded.json()) == server.mcp
        if server.mcp:  # the taskset refuses an `mcp` block without it
            assert seeded.json()["mcp"]["transport"] == "http"
        http.post("/close_session", json={}).raise_for_status()


async def test_a_session_left_open_is_closed_by_the_idle_timeout():
    """Without close_on_verify only the reaper closes what the taskset leaves open: a second of
    idleness here (an hour by default), a reaper pass every second."""
    idle = {
        "STATEGYM_CLOSE_ON_VERIFY": "false",
        "STATEGYM_SESSION_IDLE_TTL_SECONDS": "1",
        "STATEGYM_REAPER_INTERVAL_SECONDS": "1",
    }
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", mcp=True, extra_env=idle)
        try:
            gold, trace = await rollout(tasks(server.url)[7], gold=True)
            assert gold == 1.0, trace.info["nemo_gym"].get("failure_reason")
            deadline = time.monotonic() + 15
            while server.open_sessions() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert server.open_sessions() == []
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "--noconftest", "-q"]))
