"""What an eval run's rows add up to: pass@k, pass^k, mean reward by environment, family and
difficulty, and the calibration a curriculum reads (each task's success rate; the "mixed band"
of tasks solved sometimes, neither always nor never).

pass@k is the chance that at least one of k samples succeeds, pass^k that all k do (τ-bench's
reliability figure), both estimated without bias from n >= k samples with c successes:
pass@k = 1 - C(n-c, k)/C(n, k), pass^k = C(c, k)/C(n, k). A success is a reward of 1. Masked
rollouts (a model or simulator failure) count in no figure; `masked` says how many there were.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from math import comb
from typing import Any

SUCCESS = 1.0 - 1e-9


def pass_at(n: int, c: int, k: int) -> float:
    """At least one of k samples succeeds (unbiased, from n samples with c successes)."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat(n: int, c: int, k: int) -> float:
    """All k samples succeed (τ-bench's pass^k)."""
    if n < k:
        raise ValueError(f"pass^{k} needs at least {k} samples, got {n}")
    return comb(c, k) / comb(n, k)


def _group_key(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    return "-" if value is None else str(value)


def summarize(rows: Iterable[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """The run's figures; `k` is the samples asked per task."""
    rows = list(rows)
    scored = [r for r in rows if not r.get("mask_sample")]
    per_task: dict[str, list[float]] = defaultdict(list)
    info: dict[str, Mapping[str, Any]] = {}
    for row in scored:
        per_task[str(row.get("task_id"))].append(float(row["reward"]))
        info[str(row.get("task_id"))] = row
    summary: dict[str, Any] = {
        "rollouts": len(rows),
        "masked": len(rows) - len(scored),
        "tasks": len(per_task),
        "mean_reward": _mean([float(r["reward"]) for r in scored]),
    }
    for j in range(1, k + 1):
        full = [(len(v), sum(x >= SUCCESS for x in v)) for v in per_task.values() if len(v) >= j]
        summary[f"pass@{j}"] = _mean([pass_at(n, c, j) for n, c in full])
        summary[f"pass^{j}"] = _mean([pass_hat(n, c, j) for n, c in full])
    for key in ("env", "family", "difficulty"):
        groups: dict[str, list[float]] = defaultdict(list)
        for row in scored:
            groups[_group_key(row, key)].append(float(row["reward"]))
        summary[f"by_{key}"] = {
            name: {"rollouts": len(v), "mean_reward": _mean(v), "success": _success(v)}
            for name, v in sorted(groups.items())
        }
    summary["calibration"] = calibration(per_task, info)
    return summary


def calibration(
    per_task: Mapping[str, list[float]], info: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Each task's success rate, and the mixed band (solved in some samples, not all)."""
    tasks: list[dict[str, Any]] = []
    mixed: list[str] = []
    for task_id, rewards in sorted(per_task.items()):
        row = info[task_id]
        successes = sum(x >= SUCCESS for x in rewards)
        tasks.append(
            {
                "task_id": task_id,
                "env": row.get("env"),
                "family": row.get("family"),
                "difficulty": row.get("difficulty"),
                "samples": len(rewards),
                "successes": successes,
                "success_rate": round(successes / len(rewards), 6),
                "mean_reward": round(_mean(rewards), 6),
            }
        )
        if 0 < successes < len(rewards):
            mixed.append(task_id)
    return {"tasks": tasks, "mixed_band": mixed}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 6) if values else 0.0


def _success(values: list[float]) -> float:
    return round(sum(x >= SUCCESS for x in values) / len(values), 6) if values else 0.0
