"""Run a guide's ```bash blocks in order, in one shell, as a new user would type them.

    python scripts/run_doc_guide.py docs/nemo_gym.md --venv .venv-gym [--keep]

The blocks run in one `bash` with job control on (as in a terminal, so a block's `cmd &` gets a
process group of its own) under a fresh `$HOME`, where `~/stategym` is this checkout and
`~/gym-venv` the given virtualenv, so the page's paths work word for word. An HTML comment right
before a block steers the runner (the page shows it to nobody):

    <!-- guide: skip REASON -->                 not run; REASON is printed (model, network, ...)
    <!-- guide: wait-for FILE REGEX [SECONDS] --> after the block, wait until FILE (relative to
                                                the shell's working directory) matches REGEX
    <!-- guide: expect REGEX -->                 the block's output must match REGEX

Fails (exit 1) on the first block that exits non-zero, times out or misses its expectation; on
any process the page started that is still running at the end (each is killed and named); and
on files the page left in the checkout outside `--allow` paths (git's view, ignored files
included). Block output goes to `<home>/guide-logs/block-NN.log`.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIRECTIVE = re.compile(r"<!--\s*guide:\s*(skip|wait-for|expect)\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Block:
    """One fenced block of the page and the directives written right above it."""

    line: int
    code: str
    skip: str | None = None
    waits: list[tuple[str, str, float]] = field(default_factory=list)
    expects: list[str] = field(default_factory=list)


def parse(page: str) -> list[Block]:
    """The page's ```bash blocks, in order, with their `<!-- guide: ... -->` directives."""
    blocks: list[Block] = []
    pending: list[tuple[str, str]] = []
    lines = page.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            pending += DIRECTIVE.findall(lines[i])
            if lines[i].strip() and not DIRECTIVE.search(lines[i]):
                pending = []  # a directive steers the block right below it only
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if match.group(1) == "bash":
            block = Block(line=i + 1, code="\n".join(lines[i + 1 : end]))
            for kind, argument in pending:
                if kind == "skip":
                    block.skip = argument or "marked skip"
                elif kind == "expect":
                    block.expects.append(shlex.split(argument)[0])
                else:
                    parts = shlex.split(argument)
                    block.waits.append((parts[0], parts[1], float(parts[2]) if parts[2:] else 300))
            blocks.append(block)
        pending = []
        i = end + 1
    return blocks


def checkout_files() -> set[str]:
    """Untracked and ignored paths of the checkout, as git lists them."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = {line[3:] for line in out.splitlines() if line[:2] in ("??", "!!")}
    # Bytecode and linters' caches are no data of the page's.
    caches = ("__pycache__", ".ruff_cache", ".mypy_cache", ".pytest_cache")
    return {path for path in paths if not any(cache in path for cache in caches)}


class Shell:
    """One long-lived `bash` (job control on) that runs blocks and reports each exit status."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            cwd=home,
            env=env,
            text=True,
            start_new_session=True,
        )
        self.home = home
        self.run("set -m", home / "guide-logs" / "setup.log", 30)

    def run(self, code: str, log: Path, timeout: float) -> int:
        """Runs `code` in the shell (cd and exports persist), output to `log`; its exit status."""
        status = log.with_suffix(".status")
        status.unlink(missing_ok=True)
        script = log.with_suffix(".sh")
        script.write_text(code + "\n")
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            f"{{ source {shlex.quote(str(script))}; }} >{shlex.quote(str(log))} 2>&1 </dev/null; "
            f"echo $? >{shlex.quote(str(status))}\n"
        )
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while not status.exists() or not status.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                return -1
            time.sleep(0.5)
        return int(status.read_text())

    def cwd(self) -> Path:
        return Path(os.readlink(f"/proc/{self.proc.pid}/cwd"))


SETTLE_SECONDS = 15


def descendants(root: int) -> list[int]:
    """Every live process below `root` (by parent links), and those in `root`'s session; a
    zombie (exited, its parent not yet told) runs nothing and is not one."""
    table = subprocess.run(
        ["ps", "-eo", "pid=,ppid=,sid=,stat="], capture_output=True, text=True, check=True
    ).stdout.split()
    cells = [table[i : i + 4] for i in range(0, len(table), 4)]
    rows = [(int(p), int(pp), int(sid)) for p, pp, sid, stat in cells if not stat.startswith("Z")]
    found = {pid for pid, _, sid in rows if sid == root and pid != root}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid, _ in rows:
            if ppid == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--venv", type=Path, required=True, help="stands in for ~/gym-venv")
    parser.add_argument("--block-timeout", type=float, default=300)
    parser.add_argument("--allow", action="append", default=[], help="checkout path it may write")
    parser.add_argument("--keep", action="store_true", help="keep the temporary $HOME")
    args = parser.parse_args()

    blocks = parse(args.page.read_text())
    home = Path(tempfile.mkdtemp(prefix="guide-home-"))
    (home / "guide-logs").mkdir()
    (home / "stategym").symlink_to(REPO)
    (home / "gym-venv").symlink_to(args.venv.resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "NEMO_GYM"))}
    env |= {"HOME": str(home), "PYTHONUNBUFFERED": "1", "TERM": "dumb"}
    before = checkout_files()
    shell = Shell(home, env)
    failure = None
    started = time.monotonic()
    for number, block in enumerate(blocks, 1):
        where = f"block {number} ({args.page}:{block.line})"
        if block.skip is not None:
            print(f"SKIPPED {where}: {block.skip}", flush=True)
            continue
        log = home / "guide-logs" / f"block-{number:02d}.log"
        t0 = time.monotonic()
        code = shell.run(block.code, log, args.block_timeout)
        output = log.read_text(errors="replace")
        if code != 0:
            failure = f"{where} exited with {code}:\n{output[-3000:]}"
            break
        for regex in block.expects:
            if not re.search(regex, output):
                failure = f"{where}: output does not match {regex!r}:\n{output[-3000:]}"
        for name, regex, seconds in block.waits:
            target = shell.cwd() / name
            deadline = time.monotonic() + seconds
            while not (target.exists() and re.search(regex, target.read_text(errors="replace"))):
                if time.monotonic() > deadline:
                    tail = target.read_text(errors="replace")[-3000:] if target.exists() else ""
                    failure = f"{where}: {name} did not match {regex!r} in {seconds:.0f}s:\n{tail}"
                    break
                time.sleep(1)
        print(f"ok      {where} in {time.monotonic() - t0:.0f}s", flush=True)
        if failure:
            break

    # A server the page's last block stopped may still be shutting down: a few seconds to end.
    deadline = time.monotonic() + SETTLE_SECONDS
    leftovers = descendants(shell.proc.pid)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.5)
        leftovers = descendants(shell.proc.pid)
    for pid in leftovers:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
        if failure is None:
            print(f"LEFT RUNNING by the page: {pid} {command[:120]}", flush=True)
            failure = failure or "the page left processes running (killed now)"
    shell.proc.stdin.close()  # type: ignore[union-attr]
    shell.proc.wait(timeout=30)
    stray = sorted(
        path
        for path in checkout_files() - before
        if not any(path.startswith(allowed) for allowed in args.allow)
    )
    if stray and failure is None:
        failure = "the page left files in the checkout:\n  " + "\n  ".join(stray[:20])
    print(f"guide: {len(blocks)} blocks in {time.monotonic() - started:.0f}s; $HOME was {home}")
    if not args.keep and failure is None:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    if failure:
        print(f"FAILED {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
