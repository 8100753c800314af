"""The NeMo Gym guide's helpers, without NeMo Gym: the block runner's parsing, the shim's data dir
and transport refusal, the server-venv script's refusals, and the stop script on a real process
tree. `make test-nemo-gym-guide` runs the guide itself with NeMo Gym's launcher."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "nemo_gym.md"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


runner = _load("run_doc_guide", REPO / "scripts" / "run_doc_guide.py")
shim = _load("stategym_shim_for_guide", REPO / "integrations/nemo_gym/stategym_resources/app.py")


def test_runner_reads_blocks_and_directives_in_order() -> None:
    page = """text
<!-- guide: skip needs a model -->
```bash
echo one
```
<!-- guide: wait-for gym.log "servers ready!" 42 -->
<!-- guide: expect "mean_reward\\": 1\\.0" -->
```bash
echo two
```
unrelated prose
```yaml
a: 1
```
```bash
echo three
```
"""
    blocks = runner.parse(page)
    assert [b.code for b in blocks] == ["echo one", "echo two", "echo three"]
    assert blocks[0].skip == "needs a model"
    assert blocks[1].waits == [("gym.log", "servers ready!", 42.0)]
    assert blocks[1].expects == ['mean_reward": 1\\.0']
    assert (blocks[2].skip, blocks[2].waits, blocks[2].expects) == (None, [], [])


def test_the_guide_runs_what_it_can_and_says_why_it_skips_the_rest() -> None:
    blocks = runner.parse(GUIDE.read_text())
    run = [b for b in blocks if b.skip is None]
    assert len(run) >= 10, "the gold-policy flows must be runnable"
    assert all(b.skip.strip() for b in blocks if b.skip is not None)
    text = "\n".join(b.code for b in run)
    # Every launcher run is stopped by the page itself, and only loopback addresses are used.
    assert text.count("gym env start") == text.count("gym-stop.sh $(cat")
    assert "0.0.0.0" not in text
    assert "gym eval reverify" in text and "sessions gc" in text and "--older-than" in text
    # The install fixes come before the first block that needs them.
    first_gym = next(
        i for i, b in enumerate(blocks) if re.search(r"(?m)^\s*(gym|ng_)\w*\s", b.code)
    )
    assert any("gym-server-venvs.sh" in b.code for b in blocks[:first_gym])
    assert any("activate" in b.code for b in blocks[:first_gym])


def test_shim_data_dir_follows_the_launchers_results_dir(tmp_path: Path) -> None:
    block = {"env": "retail", "port": 8123}
    os.environ.pop("STATEGYM_DATA_DIR", None)
    args = shim.serve_arguments(block, "mine", str(tmp_path / "results"))
    assert args["data_dir"] == tmp_path / "results" / "stategym" / "mine"
    assert shim.serve_arguments({**block, "data_dir": "/x"}, "mine", "/r")["data_dir"] == Path("/x")


def _config(transports: list[str], agent: str, expose: bool) -> dict[str, object]:
    return {
        "res": {"resources_servers": {"stategym_resources": {"expose_tools_over_mcp": expose}}},
        "agent": {"responses_api_agents": {agent: {}}},
        "envsrv": {
            "environment_servers": {
                "single_agent_turn_legacy": {
                    "resources_server": {"type": "resources_servers", "name": "res"},
                    "agent_server": {"type": "responses_api_agents", "name": "agent"},
                    "resources_tool_transports": transports,
                }
            }
        },
    }


def test_shim_refuses_mcp_access_its_agent_cannot_take() -> None:
    assert (
        shim.transport_problems(_config(["direct_http"], "simple_agent", True), "res", True) == []
    )
    problems = shim.transport_problems(
        _config(["direct_http", "mcp"], "simple_agent", True), "res", True
    )
    assert len(problems) == 1 and "speaks only direct_http" in problems[0]
    missing = shim.transport_problems(_config(["mcp"], "codex_agent", False), "res", False)
    assert len(missing) == 1 and "expose_tools_over_mcp" in missing[0]
    # Another resources server's environment server is none of this instance's business.
    assert shim.transport_problems(_config(["mcp"], "simple_agent", False), "other", False) == []


def test_server_venv_script_links_nothing_from_a_venv_that_cannot_run_the_servers(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    tree = tmp_path / "tree"
    done = subprocess.run(
        [str(REPO / "scripts/gym-server-venvs.sh"), str(tree), str(venv)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 1
    assert "cannot run the servers" in done.stderr and "nemo_gym" in done.stderr
    assert not tree.exists()
    usage = subprocess.run([str(REPO / "scripts/gym-server-venvs.sh")], capture_output=True)
    assert usage.returncode == 2


def _gone(pid: int) -> bool:
    """No such process, or only its exit status is left (a zombie nobody has reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.slow  # real process trees, ~5 s each
def test_stop_script_leaves_nothing_of_a_launcher_tree(tmp_path: Path) -> None:
    """A stand-in launcher: a server child, and a worker in a process group of its own (as
    Ray's `ray::IDLE` workers are); all of them must be gone afterwards."""
    pids = tmp_path / "pids"
    launcher = subprocess.Popen(
        [
            "bash",
            "-c",
            f"sleep 300 & echo $! >> {pids}; setsid sleep 301 & echo $! >> {pids}; "
            "trap 'exit 0' TERM; while true; do sleep 1; done",
        ],
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while len(pids.read_text().split() if pids.exists() else []) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    children = [int(p) for p in pids.read_text().split()]
    # The stop script tells processes by their command line: wait until both have exec'd `sleep`.
    while not all(Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep") for p in children):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    done = subprocess.run(
        [str(REPO / "scripts/gym-stop.sh"), str(launcher.pid), "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    launcher.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert "none left" in done.stdout
    assert all(_gone(pid) for pid in children)
    # A launcher already gone, with nothing left in its group, is not an error.
    again = subprocess.run(
        [str(REPO / "scripts/gym-stop.sh"), str(launcher.pid)], capture_output=True, text=True
    )
    assert again.returncode == 0 and "nothing left" in again.stdout


@pytest.mark.slow  # real process trees, ~5 s each
def test_stop_script_stops_what_an_exited_launcher_left_in_its_group(tmp_path: Path) -> None:
    """`gym eval reverify` exits and leaves its servers running in its process group."""
    pid_file = tmp_path / "server.pid"
    launcher = subprocess.Popen(
        ["bash", "-c", f"nohup sleep 302 >/dev/null 2>&1 & echo $! > {pid_file}"],
        start_new_session=True,
    )
    launcher.wait(timeout=10)
    server = int(pid_file.read_text())
    try:
        done = subprocess.run(
            [str(REPO / "scripts/gym-stop.sh"), str(launcher.pid), "5"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert _gone(server)
    finally:
        try:
            os.kill(server, signal.SIGKILL)
        except ProcessLookupError:
            pass
