"""app/verify/ is grouped by what it verifies: `state` (dumps, diffs, checks) at the bottom,
`answers` (what the agent submitted or said) and `steps` (the trajectory) above it and apart,
and the flat modules the package's front (the pipeline, its result, reward, judge, gold)."""

from __future__ import annotations

from tests.project.test_architecture import APP, find_cycle, graph

SUBPACKAGES = ("app.verify.state", "app.verify.answers", "app.verify.steps")
# Each subpackage and what it may import of the others.
MAY_IMPORT = {
    "app.verify.state": set(),
    "app.verify.answers": {"app.verify.state"},
    "app.verify.steps": {"app.verify.state"},
}
FRONT = {
    "app.verify",
    "app.verify.session_verify",
    "app.verify.result",
    "app.verify.reward",
    "app.verify.evidence",
    "app.verify.judge",
    "app.verify.gold",
    "app.verify.request_task",
    "app.verify.metrics",
}


def _group(module: str) -> str:
    return next((p for p in SUBPACKAGES if module == p or module.startswith(p + ".")), module)


def test_verify_subpackages_point_down_with_no_cycle() -> None:
    edges = graph(APP, "app")
    grouped: dict[str, set[str]] = {}
    for a, targets in edges.items():
        if not a.startswith("app.verify"):
            continue
        grouped.setdefault(_group(a), set()).update(
            _group(b) for b in targets if b.startswith("app.verify") and _group(b) != _group(a)
        )
    assert find_cycle(grouped) is None
    for package, allowed in MAY_IMPORT.items():
        reached = {b for b in grouped.get(package, set()) if b in SUBPACKAGES}
        assert reached <= allowed, f"{package} imports {sorted(reached - allowed)}"
        front = grouped.get(package, set()) & FRONT
        assert not front, f"{package} imports the front: {sorted(front)}"


def test_only_the_front_is_flat() -> None:
    flat = {
        m for m in graph(APP, "app") if m.startswith("app.verify") and _group(m) not in SUBPACKAGES
    }
    assert flat == FRONT
