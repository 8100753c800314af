"""A report on a NeMo Gym rollout file: reward by task and environment, failure reasons, and
for each failed rollout its session id and the command that shows its diff.

Each line of the file is a verify response (the task row echoed, `reward`, `failure_reason`,
`session_id`, ...) plus NeMo Gym's `_ng_task_index` / `_ng_rollout_index`.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import shlex
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

_DETAIL_RE = re.compile(r"\s*[(\[:].*$")  # the specifics after a reason's headline


class ReportError(ValueError):
    """The rollout file cannot be read as NeMo Gym rollouts."""


@dataclass(frozen=True)
class Rollout:
    task: str
    env: str
    task_index: int | None
    rollout_index: int | None
    reward: float
    failure_reason: str | None
    session_id: str | None
    # From the task row (generated tasks carry them) or joined from --tasks: curriculum views.
    difficulty: int | None = None
    family: str | None = None


def _env_of(row: dict[str, Any]) -> str:
    if isinstance(row.get("env"), str):
        return row["env"]
    agent = row.get("agent_ref")
    if isinstance(agent, dict) and isinstance(agent.get("name"), str):
        return agent["name"]
    return "unknown"


def _rollout(row: Any, line_no: int) -> Rollout:
    if not isinstance(row, dict):
        raise ReportError(f"line {line_no}: expected a JSON object, got {type(row).__name__}")
    reward = row.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise ReportError(f"line {line_no}: no numeric 'reward' (is this a rollouts file?)")
    try:
        finite = math.isfinite(float(reward))
    except OverflowError:  # 10**400
        finite = False
    if not finite:
        raise ReportError(f"line {line_no}: reward {str(reward)[:40]} is not a finite number")
    task_index = row.get("_ng_task_index")
    task = row.get("task_id")
    if task is None:
        task = f"task #{task_index}" if task_index is not None else "unknown"
    session_id = row.get("session_id")
    return Rollout(
        task=str(task),
        env=_env_of(row),
        task_index=task_index if isinstance(task_index, int) else None,
        rollout_index=row.get("_ng_rollout_index")
        if isinstance(row.get("_ng_rollout_index"), int)
        else None,
        reward=float(reward),
        failure_reason=row.get("failure_reason")
        if isinstance(row.get("failure_reason"), str)
        else None,
        session_id=session_id if isinstance(session_id, str) else None,
        difficulty=row["difficulty"] if isinstance(row.get("difficulty"), int) else None,
        family=row["family"] if isinstance(row.get("family"), str) else None,
    )


def with_task_fields(rollouts: list[Rollout], tasks: Iterable[dict[str, Any]]) -> list[Rollout]:
    """Fill difficulty and family from the task rows (by task_id) where a rollout lacks them."""
    by_id = {t.get("task_id"): t for t in tasks}
    out = []
    for r in rollouts:
        task = by_id.get(r.task, {})
        difficulty = r.difficulty if r.difficulty is not None else task.get("difficulty")
        family = r.family if r.family is not None else task.get("family")
        out.append(replace(r, difficulty=difficulty, family=family))
    return out


def load_rollouts(path: Path) -> list[Rollout]:
    if not path.is_file():
        raise ReportError(f"{path}: no such file")
    rollouts = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line_no, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReportError(f"line {line_no}: not valid JSON ({exc.msg})") from None
            rollouts.append(_rollout(row, line_no))
    if not rollouts:
        raise ReportError(f"{path}: no rollouts in the file")
    return rollouts


def reason_headlines(reason: str | None) -> list[str]:
    """'final state differs from gold (orders: 1 changed); final answer lacks [...]' ->
    ['final state differs from gold', 'final answer lacks']: comparable across rollouts."""
    if not reason:
        return ["no failure_reason given"]
    return [_DETAIL_RE.sub("", part).strip() or part.strip() for part in _top_level(reason)]


def _top_level(reason: str) -> list[str]:
    """Split on '; ' outside brackets (the details inside may hold '; ' themselves)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(reason):
        depth += (char in "([{") - (char in ")]}")
        if depth == 0 and reason.startswith("; ", i):
            parts.append(reason[start:i])
            start = i + 2
    parts.append(reason[start:])
    return [p for p in parts if p.strip()]


def diff_command(session_id: str, data_dir: Path | None = None) -> str:
    cmd = ["stategym", "sessions", "diff", session_id, "--against", "gold"]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    return shlex.join(cmd)


def _group(rollouts: Iterable[Rollout], key: str) -> list[dict[str, Any]]:
    groups: dict[Any, list[float]] = defaultdict(list)
    envs: dict[Any, str] = {}
    for r in rollouts:
        if getattr(r, key) is None:  # difficulty/family: only tasks that carry them
            continue
        groups[getattr(r, key)].append(r.reward)
        envs[getattr(r, key)] = r.env
    out = []
    for name in sorted(groups, key=str):
        rewards = groups[name]
        row = {
            key: name,
            "rollouts": len(rewards),
            "mean_reward": sum(rewards) / len(rewards),
            "success_rate": sum(1 for x in rewards if x >= 1.0) / len(rewards),
        }
        if key == "task":
            row["env"] = envs[name]
        out.append(row)
    return out


def summarize(
    rollouts: list[Rollout], data_dir: Path | None = None, top: int = 10
) -> dict[str, Any]:
    failed = [r for r in rollouts if r.reward < 1.0]
    reasons: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for r in failed:
        for headline in reason_headlines(r.failure_reason):
            reasons[headline] += 1
            examples.setdefault(headline, r.failure_reason or "")
    rewards = [r.reward for r in rollouts]
    return {
        "rollouts": len(rollouts),
        "mean_reward": sum(rewards) / len(rewards),
        "success_rate": sum(1 for x in rewards if x >= 1.0) / len(rewards),
        "by_env": _group(rollouts, "env"),
        "by_task": _group(rollouts, "task"),
        "by_difficulty": _group(rollouts, "difficulty"),
        "by_family": _group(rollouts, "family"),
        "failure_reasons": [
            {"reason": reason, "count": n, "example": examples[reason]}
            for reason, n in reasons.most_common(top)
        ],
        "failed": [
            {
                **asdict(r),
                "diff_command": diff_command(r.session_id, data_dir) if r.session_id else None,
            }
            for r in failed
        ],
        "rewards": rewards,
    }


def histogram_png(rewards: list[float]) -> bytes:
    """A reward histogram as PNG bytes (matplotlib's Agg canvas, no pyplot global state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.hist(rewards, bins=10, range=(0.0, 1.0), color="#4c72b0", edgecolor="white")
    ax.set_xlabel("reward")
    ax.set_ylabel("rollouts")
    ax.set_title(f"Reward histogram ({len(rewards)} rollouts)")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _md(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_markdown(summary: dict[str, Any], image_name: str) -> str:
    lines = [
        "# Rollout report",
        "",
        f"{summary['rollouts']} rollouts, mean reward {summary['mean_reward']:.3f}, "
        f"success rate {summary['success_rate']:.1%}.",
        "",
        f"![reward histogram]({image_name})",
        "",
        "## Reward by environment",
        "",
        "| env | rollouts | mean reward | success |",
        "|---|---:|---:|---:|",
    ]
    for g in summary["by_env"]:
        lines.append(
            f"| {_md(g['env'])} | {g['rollouts']} | {g['mean_reward']:.3f} | "
            f"{g['success_rate']:.0%} |"
        )
    lines += [
        "",
        "## Reward by task",
        "",
        "| task | env | rollouts | mean reward | success |",
        "|---|---|---:|---:|---:|",
    ]
    for g in summary["by_task"]:
        lines.append(
            f"| {_md(g['task'])} | {_md(g['env'])} | {g['rollouts']} | "
            f"{g['mean_reward']:.3f} | {g['success_rate']:.0%} |"
        )
    for key in ("difficulty", "family"):
        if summary[f"by_{key}"]:
            head = f"| {key} | rollouts | mean reward | success |"
            lines += ["", f"## Reward by {key}", "", head, "|---|---:|---:|---:|"]
            lines += [
                f"| {_md(g[key])} | {g['rollouts']} | {g['mean_reward']:.3f} | "
                f"{g['success_rate']:.0%} |"
                for g in summary[f"by_{key}"]
            ]
    lines += [
        "",
        "## Most common failure reasons",
        "",
        "| reason | rollouts | example |",
        "|---|---:|---|",
    ]
    for f in summary["failure_reasons"]:
        lines.append(f"| {_md(f['reason'])} | {f['count']} | {_md(f['example'])} |")
    lines += [
        "",
        "## Failed rollouts",
        "",
        "| task | rollout | reward | session | diff |",
        "|---|---:|---:|---|---|",
    ]
    for f in summary["failed"]:
        cmd = f"`{f['diff_command']}`" if f["diff_command"] else "-"
        lines.append(
            f"| {_md(f['task'])} | {f['rollout_index']} | {f['reward']:g} | "
            f"{f['session_id'] or '-'} | {cmd} |"
        )
    return "\n".join(lines) + "\n"


def render_html(summary: dict[str, Any], png: bytes) -> str:
    def table(headers: list[str], rows: list[list[Any]]) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
            for row in rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    image = base64.b64encode(png).decode()
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Rollout report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>",
        "<h1>Rollout report</h1>",
        f"<p>{summary['rollouts']} rollouts, mean reward {summary['mean_reward']:.3f}, "
        f"success rate {summary['success_rate']:.1%}.</p>",
        f"<img alt='reward histogram' src='data:image/png;base64,{image}'>",
        "<h2>Reward by environment</h2>",
        table(
            ["env", "rollouts", "mean reward", "success"],
            [
                [g["env"], g["rollouts"], f"{g['mean_reward']:.3f}", f"{g['success_rate']:.0%}"]
                for g in summary["by_env"]
            ],
        ),
        "<h2>Reward by task</h2>",
        table(
            ["task", "env", "rollouts", "mean reward", "success"],
            [
                [
                    g["task"],
                    g["env"],
                    g["rollouts"],
                    f"{g['mean_reward']:.3f}",
                    f"{g['success_rate']:.0%}",
                ]
                for g in summary["by_task"]
            ],
        ),
        *[
            part
            for key in ("difficulty", "family")
            if summary[f"by_{key}"]
            for part in (
                f"<h2>Reward by {key}</h2>",
                table(
                    [key, "rollouts", "mean reward", "success"],
                    [
                        [
                            g[key],
                            g["rollouts"],
                            f"{g['mean_reward']:.3f}",
                            f"{g['success_rate']:.0%}",
                        ]
                        for g in summary[f"by_{key}"]
                    ],
                ),
            )
        ],
        "<h2>Most common failure reasons</h2>",
        table(
            ["reason", "rollouts", "example"],
            [[f["reason"], f["count"], f["example"]] for f in summary["failure_reasons"]],
        ),
        "<h2>Failed rollouts</h2>",
        table(
            ["task", "rollout", "reward", "session", "diff"],
            [
                [
                    f["task"],
                    f["rollout_index"],
                    f"{f['reward']:g}",
                    f["session_id"] or "-",
                    f["diff_command"] or "-",
                ]
                for f in summary["failed"]
            ],
        ),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(summary: dict[str, Any], out: Path) -> list[Path]:
    """Write `out` (.md with a PNG next to it, or .html with the PNG inlined); returns files."""
    png = histogram_png(summary["rewards"])
    suffix = out.suffix.lower()
    if suffix == ".html":
        out.write_text(render_html(summary, png), encoding="utf-8")
        return [out]
    if suffix != ".md":
        raise ReportError(f"--out must end in .md or .html, got {out.name!r}")
    image = out.with_name(out.stem + "-rewards.png")
    image.write_bytes(png)
    out.write_text(render_markdown(summary, image.name), encoding="utf-8")
    return [out, image]
