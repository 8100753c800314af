"""`/aggregate_metrics`: averages over a batch of verify responses, in NeMo Gym's shape."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from app.errors import BadRequest


def _numeric(value: Any) -> bool:
    """A number a mean can take; one too large for a float is refused (10**400 was a 500)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise BadRequest(f"aggregate_metrics: {str(value)[:40]} is not a finite number")
    return True


def aggregate(verify_responses: list[Any]) -> dict[str, Any]:
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    by_task: dict[str, list[float]] = defaultdict(list)
    rows = [r for r in verify_responses if isinstance(r, Mapping)]
    for row in rows:
        values: dict[str, Any] = {"reward": row.get("reward")}
        components = row.get("reward_components")
        if isinstance(components, Mapping):
            values.update({f"reward_components/{k}": v for k, v in components.items()})
        for name, value in values.items():
            if _numeric(value):
                sums[name] += float(value)
                counts[name] += 1
        if _numeric(row.get("reward")):
            by_task[str(row.get("task_id", row.get("_ng_task_index", "?")))].append(row["reward"])
    means = {f"mean/{k}": sums[k] / counts[k] for k in sorted(sums)}
    rewards = [r for group in by_task.values() for r in group]
    key_metrics: dict[str, float] = {
        "num_rollouts": float(len(rows)),
        "mean_reward": (sum(rewards) / len(rewards)) if rewards else 0.0,
        "success_rate": (sum(1 for r in rewards if r >= 1.0) / len(rewards)) if rewards else 0.0,
        # pass@k over the rollouts of each task: any rollout of the task reached reward 1.
        "pass_at_k": (
            sum(1 for g in by_task.values() if max(g) >= 1.0) / len(by_task) if by_task else 0.0
        ),
    }
    return {"group_level_metrics": [], "agent_metrics": means, "key_metrics": key_metrics}
