"""Render the results: a text table on stdout, JSON, and a PNG plot (matplotlib, Agg)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def rows(results: dict[str, Any]) -> list[list[str]]:
    """One line per measured figure: name, n, p50, p99, server p50, server p99, /s, errors."""
    out: list[list[str]] = []

    def add(name: str, s: dict[str, Any] | None) -> None:
        if not s:
            return
        out.append(
            [
                name,
                _f(s.get("n")),
                _f(s.get("p50_ms")),
                _f(s.get("p99_ms")),
                _f(s.get("server_p50_ms")),
                _f(s.get("server_p99_ms")),
                _f(s.get("per_s"), 1),
                _f(s.get("errors")),
            ]
        )

    for name, seed in results.get("seed", {}).items():
        add(f"seed {name} cold ({seed.get('rows')} seed rows)", seed.get("cold"))
        add(f"seed {name} warm", seed.get("warm"))
    for server in ("stategym", "stategym-2w", "baseline", "lean"):
        for t in results.get("tools", {}).get(server, []):
            add(f"{server} {t['tool']} tool c={t['concurrency']}", t)
    verify = results.get("verify", {})
    add("verify gold cold", verify.get("cold"))
    add("verify gold cached", verify.get("cached"))
    cap = results.get("capacity", {})
    add("capacity: seed sessions (c=64)", cap.get("seeding"))
    add("capacity: read on sampled live sessions", cap.get("sample"))
    add("burst: concurrent in-flight reads", results.get("burst"))
    return out


def table(results: dict[str, Any]) -> str:
    header = ["figure", "n", "p50 ms", "p99 ms", "srv p50", "srv p99", "req/s", "errors"]
    body = rows(results)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *body]
    ]
    lines.insert(1, "-" * len(lines[0]))
    extra = []
    for name, r in results.get("rollouts", {}).items():
        extra.append(
            f"rollouts/s {name}: {_f(r.get('rollouts_per_s'))} (c={r.get('concurrency')},"
            f" n={r.get('rollouts')}, p50 {_f(r.get('rollout_p50_ms'))} ms,"
            f" mean reward {_f(r.get('mean_reward'))}, errors {r.get('request_errors')})"
        )
    cap = results.get("capacity", {})
    if cap:
        extra.append(
            f"capacity: {cap.get('live_sessions')} live sessions, RSS "
            f"{_f(cap.get('rss_mb'), 0)} MB, disk {_f(cap.get('disk_mb'), 0)} MB, open fds "
            f"{cap.get('open_fds')}, sampled reads ok {cap.get('sample', {}).get('n')}/"
            f"{cap.get('sample', {}).get('sampled')}"
        )
    for name, value in results.get("ratios", {}).items():
        extra.append(
            f"ratio stategym/{'lean' if 'vs lean' in name else 'baseline'} {name}: {_f(value)}"
        )
    if "verify_in_process" in results:
        extra.append(f"verify in process (bench/verify_bench.py): {results['verify_in_process']}")
    if "postgres" in results:
        # PostgreSQL backend beside SQLite (bench/pg.py): clone strategies, HTTP, 1 vs 2 replicas.
        extra.append(f"postgres (bench/pg.py): {results['postgres']}")
    return "\n".join(lines + [""] + extra)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    tools = results.get("tools", {})
    for ax, metric, label in (
        (axes[0], "per_s", "tool calls / s"),
        (axes[1], "p99_ms", "tool call p99 (ms, client)"),
    ):
        for server, marker in (("stategym", "o"), ("stategym-2w", "^"), ("baseline", "s")):
            for kind, style in (("read", "-"), ("write", "--")):
                pts = [
                    (t["concurrency"], t.get(metric))
                    for t in tools.get(server, [])
                    if t["tool"] == kind and t.get(metric) is not None
                ]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, style, marker=marker, label=f"{server} {kind}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(label)
        ax.legend(fontsize=8)
    names = list(results.get("rollouts", {}))
    values = [results["rollouts"][n].get("rollouts_per_s") or 0 for n in names]
    axes[2].bar(names, values, color=["tab:blue", "tab:cyan", "tab:orange"][: len(names)])
    axes[2].set_title("full rollouts / s")
    fig.suptitle("StateGym vs dict baseline (127.0.0.1, 2 cores, load generator on the same host)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(results: dict[str, Any], out_dir: Path, stamp: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"bench-{stamp}.json"
    json_path.write_text(json.dumps(results, indent=2, default=str))
    png_path = out_dir / f"bench-{stamp}.png"
    plot(results, png_path)
    return json_path, png_path
