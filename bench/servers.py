"""Start and stop the servers under test as real processes, and read their resource use."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pids(self) -> list[int]:
        """The server process and its descendants (uvicorn workers)."""
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def rss_mb(self) -> float:
        total_kb = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
            except OSError:
                continue
        return total_kb / 1024

    def open_fds(self) -> int:
        total = 0
        for pid in self.pids():
            try:
                total += len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def disk_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total / (1024 * 1024)


def _wait_healthy(server: ServerProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            tail = server.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{server.name} exited early:\n{tail}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"{server.name} did not answer /health in {timeout}s")


def _spawn(
    name: str,
    argv: list[str],
    data_dir: Path,
    env: dict[str, str],
    port: int,
    root: Path = ROOT,
) -> ServerProcess:
    """`argv` run from the checkout at `root` (another worktree: a before figure)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / f"{name}.log"
    full_env = {**os.environ, "PYTHONPATH": str(root), **env}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=root, env=full_env, stdout=log, stderr=log)
    server = ServerProcess(name, proc, port, data_dir, log_path)
    _wait_healthy(server, 60)
    return server


def start_stategym(
    data_dir: Path,
    *,
    workers: int = 1,
    max_open_sessions: int = 256,
    env_name: str = "retail",
    extra_env: dict[str, str] | None = None,
    root: Path = ROOT,
) -> ServerProcess:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "app",
        "serve",
        "--env",
        env_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--workers",
        str(workers),
    ]
    env = {"STATEGYM_MAX_OPEN_SESSIONS": str(max_open_sessions), "STATEGYM_LOG_LEVEL": "warning"}
    extra = {**env, **(extra_env or {})}
    return _spawn(f"stategym-w{workers}", argv, data_dir, extra, port, root)


def template_of(server: ServerProcess, env_name: str) -> Path:
    """The template database a StateGym server built for an environment (the lean server's base)."""
    return next((server.data_dir / "templates" / env_name).glob("*.sqlite"))


def start_lean(data_dir: Path, env_name: str, template: Path) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "bench.lean_server", "--env", env_name, "--port", str(port)]
    argv += ["--template", str(template)]
    return _spawn(f"lean-{env_name}", argv, data_dir, {}, port)


def start_baseline(data_dir: Path, template: Path) -> ServerProcess:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "bench.baseline_server",
        "--port",
        str(port),
        "--template",
        str(template),
    ]
    return _spawn("baseline", argv, data_dir, {}, port)
