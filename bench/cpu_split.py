"""Where a rollout's CPU goes, per server thread, StateGym and the lean server in one run.

    python -m bench.cpu_split                       # retail, c=32, 14 s per server
    python -m bench.cpu_split --env sql --seconds 10
    python -m bench.cpu_split --ab before=/path/to/other/checkout --ab after=. --rounds 3

Each server (one uvicorn worker) gets the rollout traffic of `bench.targets` (every task warm,
then seed -> gold calls -> verify -> close, c=32); the CPU time of each of its threads is read
from /proc before and after the timed part, and so is the load generator's (this process). The
table gives ms of CPU per rollout and per request by thread: what the 2 cores spend on one
rollout, and so what bounds requests/s when both cores are busy (they are: the client takes the
rest). Thread names come from `py-spy dump` (the bench extras install it); without it, the
thread ids. StateGym's threads: MainThread (HTTP, routing, cookies and the tool calls run on the
event loop), `stategym_N` (seed, open, verify, close, the control database), `stategym-tool_N`
(tool calls sent to a thread), `stategym-close_N` (closing connections: the WAL checkpoint).
`--ab LABEL=CHECKOUT[:VAR=VALUE...]` (twice or more): StateGym only, from each checkout (with
those environment variables) in turn, `--rounds` times (A/B alternated on a shared machine); one
line per run, then the mean per label.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import rollout
from bench.servers import ServerProcess, start_lean, start_stategym, template_of

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def thread_cpu_ms(pid: int) -> dict[str, float]:
    """CPU ms (user + system) of each thread of `pid`, by thread id."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = (int(fields[11]) + int(fields[12])) * TICK_MS
    return out


def thread_names(pid: int) -> dict[str, str]:
    """Thread id -> Python thread name, from `py-spy dump` when it is installed."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        dump = subprocess.run(
            [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {
        m[0]: m[1]
        for m in re.findall(r"Thread (?:0x[0-9A-Fa-f]+ \()?(\d+)\)? \(\w+\): \"([^\"]+)\"", dump)
    }


def _own_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000


def measure(
    server: ServerProcess, env: str, concurrency: int, seconds: float, warm_seconds: float = 3
) -> dict[str, Any]:
    rollout.rollout_traffic(server.url, env, concurrency, 400, warm_seconds)  # snapshots, golds
    before, client_before = thread_cpu_ms(server.proc.pid), _own_cpu_ms()
    res = rollout.rollout_traffic(server.url, env, concurrency, 1_000_000, seconds)
    after, client_after = thread_cpu_ms(server.proc.pid), _own_cpu_ms()
    names = thread_names(server.proc.pid)
    by_thread: dict[str, float] = {}
    for tid, ms in after.items():
        label = re.sub(r"_\d+$", "_N", names.get(tid, f"thread {tid}"))
        by_thread[label] = by_thread.get(label, 0.0) + ms - before.get(tid, 0.0)
    return {
        "requests": res["requests"],
        "rollouts": res["rollouts"],
        "requests_per_s": res["requests_per_s"],
        "mean_reward": res["mean_reward"],
        "errors": res["errors"],
        "threads_ms": {k: round(v, 1) for k, v in by_thread.items() if v > 0},
        "client_ms": round(client_after - client_before, 1),
    }


def report(name: str, m: dict[str, Any]) -> str:
    rollouts, requests = max(m["rollouts"], 1), max(m["requests"], 1)
    lines = [
        f"{name}: {m['requests_per_s']} req/s, {m['rollouts']} rollouts "
        f"({requests / rollouts:.1f} requests each), mean reward {m['mean_reward']}, "
        f"errors {m['errors']}",
        f"  {'thread':22s} {'ms/rollout':>11s} {'ms/request':>11s}",
    ]
    total = 0.0
    for label, ms in sorted(m["threads_ms"].items(), key=lambda kv: -kv[1]):
        total += ms
        lines.append(f"  {label:22s} {ms / rollouts:11.2f} {ms / requests:11.3f}")
    lines.append(f"  {'server, all threads':22s} {total / rollouts:11.2f} {total / requests:11.3f}")
    client = m["client_ms"]
    lines.append(f"  {'load generator':22s} {client / rollouts:11.2f} {client / requests:11.3f}")
    return "\n".join(lines)


def _server_ms(m: dict[str, Any]) -> float:
    return sum(m["threads_ms"].values()) / max(m["rollouts"], 1)


def run_ab(args: argparse.Namespace) -> None:
    """StateGym from each `--ab` checkout in turn, `--rounds` times: server CPU per rollout."""
    roots = []
    for spec in args.ab:
        label, _, rest = spec.partition("=")
        root, *assignments = rest.split(":")
        extra = dict(a.split("=", 1) for a in assignments)
        roots.append((label, Path(root).resolve(), extra))
    figures: dict[str, list[float]] = {label: [] for label, _, _ in roots}
    for round_no in range(args.rounds):
        for label, root, extra in roots:
            load = os.getloadavg()[0]
            work = Path(tempfile.mkdtemp(prefix="stategym-cpu-"))
            try:
                sg = start_stategym(
                    work / "sg",
                    env_name=args.env,
                    max_open_sessions=2_048,
                    root=root,
                    extra_env=extra,
                )
                try:
                    m = measure(sg, args.env, args.concurrency, args.seconds)
                finally:
                    sg.stop()
            finally:
                shutil.rmtree(work, ignore_errors=True)
            figures[label].append(_server_ms(m))
            rollouts = max(m["rollouts"], 1)
            threads = ", ".join(
                f"{k} {v / rollouts:.2f}"
                for k, v in sorted(m["threads_ms"].items(), key=lambda kv: -kv[1])
            )
            print(
                f"round {round_no + 1} {label}: {_server_ms(m):.2f} ms server CPU per rollout "
                f"({m['requests'] / rollouts:.1f} requests; {threads}); {m['requests_per_s']} "
                f"req/s, reward {m['mean_reward']}, errors {m['errors']}, load {load:.1f}",
                flush=True,
            )
    for label, values in figures.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{label}: mean {sum(values) / len(values):.2f} ms per rollout ({shown})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", default="retail")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=14.0)
    parser.add_argument(
        "--ab",
        action="append",
        default=[],
        metavar="LABEL=CHECKOUT[:VAR=VALUE...]",
        help="StateGym from this checkout (give two or more; no lean server)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --ab: runs per checkout")
    args = parser.parse_args(argv)
    if args.ab:
        run_ab(args)
        return
    work = Path(tempfile.mkdtemp(prefix="stategym-cpu-"))
    try:
        sg = start_stategym(work / "sg", env_name=args.env, max_open_sessions=2_048)
        template = template_of(sg, args.env)
        try:
            ours = measure(sg, args.env, args.concurrency, args.seconds)
        finally:
            sg.stop()
        lean = start_lean(work / "lean", args.env, template)
        try:
            theirs = measure(lean, args.env, args.concurrency, args.seconds)
        finally:
            lean.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(f"StateGym ({args.env})", ours))
    print(report(f"lean server ({args.env})", theirs))
    per_request = [sum(m["threads_ms"].values()) / max(m["requests"], 1) for m in (ours, theirs)]
    print(
        f"requests/s StateGym / lean: {ours['requests_per_s'] / theirs['requests_per_s']:.2f}; "
        f"server CPU per request StateGym / lean: {per_request[0] / per_request[1]:.1f}x"
    )


if __name__ == "__main__":
    main()
