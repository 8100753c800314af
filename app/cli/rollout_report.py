"""A report on a NeMo Gym rollout file: reward by task and environment, failure reasons, and
for each failed rollout its session id and the command that shows its diff.

Each line of the file is a verify response (the task row echoed, `reward`, `failure_reason`,
`session_id`, ...) plus NeMo Gym's `_ng_task_index` / `_ng_rollout_index`.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from app.explorer import render as charts
from app.explorer.render import reward_bins, svg_document
from app.explorer.templates import CSS

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


def histogram_svg(rewards: list[float]) -> str:
    """The reward histogram as a standalone SVG file, the explorer's chart (no plotting library)."""
    label = f"Reward histogram ({len(rewards)} rollouts)"
    return svg_document(charts.histogram_svg(reward_bins(rewards), label))


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


def _section(
    title: str,
    headers: list[str],
    rows: list[list[Any]],
    numeric: frozenset[int] = frozenset(),
    code: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """One table of the HTML report: which columns are numbers (right-aligned) and commands."""
    return {"title": title, "headers": headers, "rows": rows, "numeric": numeric, "code": code}


def _rate_rows(groups: list[dict[str, Any]], key: str) -> list[list[Any]]:
    return [
        [g[key], g["rollouts"], f"{g['mean_reward']:.3f}", f"{g['success_rate']:.0%}"]
        for g in groups
    ]


def render_html(summary: dict[str, Any]) -> str:
    """One self-contained page: the explorer's stylesheet and histogram, Jinja2-autoescaped."""
    rates = ["rollouts", "mean reward", "success"]
    sections = [
        _section(
            "Reward by environment",
            ["env", *rates],
            _rate_rows(summary["by_env"], "env"),
            numeric=frozenset({1, 2, 3}),
        ),
        _section(
            "Reward by task",
            ["task", "env", *rates],
            [[g["task"], *_rate_rows([g], "env")[0]] for g in summary["by_task"]],
            numeric=frozenset({2, 3, 4}),
        ),
        *[
            _section(
                f"Reward by {key}",
                [key, *rates],
                _rate_rows(summary[f"by_{key}"], key),
                numeric=frozenset({1, 2, 3}),
            )
            for key in ("difficulty", "family")
            if summary[f"by_{key}"]
        ],
        _section(
            "Most common failure reasons",
            ["reason", "rollouts", "example"],
            [[f["reason"], f["count"], f["example"]] for f in summary["failure_reasons"]],
            numeric=frozenset({1}),
        ),
        _section(
            "Failed rollouts",
            ["task", "rollout", "reward", "session", "diff"],
            [
                [
                    f["task"],
                    "-" if f["rollout_index"] is None else f["rollout_index"],
                    f"{f['reward']:g}",
                    f["session_id"] or "-",
                    f["diff_command"] or "-",
                ]
                for f in summary["failed"]
            ],
            numeric=frozenset({1, 2}),
            code=frozenset({3, 4}),
        ),
    ]
    return charts.render(
        "report",
        css=CSS,
        s=summary,
        bins=reward_bins(summary["rewards"]),
        sections=sections,
    )


def write_report(summary: dict[str, Any], out: Path) -> list[Path]:
    """Write `out` (.md with an SVG histogram next to it, or .html with the chart inline);
    returns the files written."""
    suffix = out.suffix.lower()
    if suffix == ".html":
        out.write_text(render_html(summary), encoding="utf-8")
        return [out]
    if suffix != ".md":
        raise ReportError(f"--out must end in .md or .html, got {out.name!r}")
    image = out.with_name(out.stem + "-rewards.svg")
    image.write_text(histogram_svg(summary["rewards"]), encoding="utf-8")
    out.write_text(render_markdown(summary, image.name), encoding="utf-8")
    return [out, image]
