"""HTML for the explorer's pages: Jinja2 (autoescaped) over the page data, and small SVG charts.

Charts are inline SVG built here from numbers only (no user text enters an SVG but through
`escape`), each with a title for screen readers; nothing is fetched from another origin.
"""

from __future__ import annotations

import json
from datetime import datetime
from html import escape  # plain str: markupsafe's Markup would escape what it is added to
from typing import Any

from jinja2 import DictLoader, Environment, select_autoescape
from markupsafe import Markup

from app.explorer.templates import TEMPLATES


def fmt_reward(value: Any) -> str:
    return "–" if value is None else f"{float(value):.3g}"


def fmt_signed(value: Any) -> str:
    return "–" if value is None else f"{float(value):+.3g}"


def fmt_pct(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.0f}%"


def fmt_time(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value).replace("T", " ")[:19]


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


def compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def histogram_svg(bins: list[int], label: str = "Reward histogram") -> Markup:
    """Counts per reward bin over [0, 1], as bars with a count over each."""
    w, h, pad = 320, 120, 18
    top = max(bins) or 1
    bar = (w - 2 * pad) / len(bins)
    parts: list[str] = [
        f'<svg class="chart" viewBox="0 0 {w} {h + 2 * pad}" width="{w}" height="{h + 2 * pad}" '
        f'role="img" aria-labelledby="hist-title"><title id="hist-title">{escape(label)}: '
        + escape(
            ", ".join(
                f"{i / len(bins):.1f}–{(i + 1) / len(bins):.1f}: {n}" for i, n in enumerate(bins)
            )
        )
        + "</title>"
    ]
    for i, n in enumerate(bins):
        height = (h - 12) * n / top
        x = pad + i * bar
        y = pad + h - height
        parts.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{y:.1f}" width="{bar - 2:.1f}" '
            f'height="{height:.1f}"><title>reward {i / len(bins):.1f}–{(i + 1) / len(bins):.1f}'
            f": {n} run(s)</title></rect>"
        )
        if n:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{n}</text>'
            )
    base = pad + h
    parts.append(f'<line class="axis" x1="{pad}" y1="{base}" x2="{w - pad}" y2="{base}"/>')
    for tick in (0, 0.5, 1):
        x = pad + tick * (w - 2 * pad)
        parts.append(f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle">{tick:g}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def reward_bins(rewards: list[float], bins: int = 10) -> list[int]:
    """Rewards counted per bin over [0, 1], as the runs page counts them (app/explorer/queries.py):
    1.0 falls in the last bin, a reward outside [0, 1] in the nearest end bin."""
    counts = [0] * bins
    for reward in rewards:
        counts[min(bins - 1, max(0, int(reward * bins)))] += 1
    return counts


# The chart rules of CSS, for an SVG that is a file of its own (no page stylesheet around it).
_SVG_STYLE = (
    "text{font:10px system-ui,sans-serif;fill:#57606a}.bar{fill:#4c8dd6}.axis{stroke:#8c959f}"
    ".gain{fill:#2da44e}.loss{fill:#cf222e}.zero{fill:#8c959f}"
    ".running{fill:none;stroke:#0a58ca;stroke-width:2}"
)


def svg_document(chart: Markup) -> str:
    """A chart of this module as a standalone .svg file: the SVG namespace and its styles inside,
    so a Markdown viewer or a browser draws it as the explorer does."""
    svg = str(chart)
    if not svg.startswith("<svg "):
        raise ValueError("not an SVG chart")
    head, rest = svg.split(">", 1)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        + head.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
        + f"><style>{_SVG_STYLE}</style>"
        + rest
        + "\n"
    )


def steps_svg(rewards: list[float | None]) -> Markup:
    """Each step's reward as a bar (up: earned, down: lost) and their running sum as a line."""
    if not rewards:
        return Markup("")
    values = [r or 0.0 for r in rewards]
    running, total = [], 0.0
    for v in values:
        total += v
        running.append(total)
    span = max(1.0, *(abs(v) for v in values), *(abs(v) for v in running))
    n = len(values)
    w, h, pad = max(160, min(640, 24 * n + 40)), 110, 20
    step_w = (w - 2 * pad) / n
    mid = pad + h / 2

    def y(v: float) -> float:
        return mid - (h / 2 - 6) * v / span

    summary = ", ".join(f"step {i + 1}: {v:+.3g}" for i, v in enumerate(values))
    parts = [
        f'<svg class="chart" viewBox="0 0 {w} {h + 2 * pad}" width="{w}" height="{h + 2 * pad}" '
        f'role="img" aria-labelledby="steps-title"><title id="steps-title">Step rewards '
        f"(bars) and their running sum (line): {escape(summary)}</title>",
        f'<line class="axis" x1="{pad}" y1="{mid}" x2="{w - pad}" y2="{mid}"/>',
    ]
    for i, v in enumerate(values):
        x = pad + i * step_w
        top, bottom = sorted((y(v), mid))
        css = "gain" if v > 0 else "loss" if v < 0 else "zero"
        parts.append(
            f'<rect class="{css}" x="{x + 2:.1f}" y="{top:.1f}" width="{max(step_w - 4, 1):.1f}" '
            f'height="{max(bottom - top, 1):.1f}"><title>step {i + 1}: {v:+.3g}</title></rect>'
        )
        if n <= 30 or (i + 1) % 5 == 0:
            parts.append(
                f'<text x="{x + step_w / 2:.1f}" y="{pad + h + 14}" text-anchor="middle">'
                f"{i + 1}</text>"
            )
    points = " ".join(f"{pad + (i + 0.5) * step_w:.1f},{y(v):.1f}" for i, v in enumerate(running))
    parts.append(f'<polyline class="running" points="{points}"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def rate_bar(rate: Any) -> Markup:
    """A pass rate as a short bar and its percentage (the text carries the value)."""
    if rate is None:
        return Markup('<span class="muted">–</span>')
    pct = max(0.0, min(100.0, 100 * float(rate)))
    return Markup(
        f'<span class="rate"><span class="rate-bar" style="width:{pct:.0f}%"></span></span> '
        f"{pct:.0f}%"
    )


_env = Environment(loader=DictLoader(TEMPLATES), autoescape=select_autoescape(default=True))
_env.filters.update(
    reward=fmt_reward,
    signed=fmt_signed,
    pct=fmt_pct,
    when=fmt_time,
    pretty=pretty,
    compact=compact,
    rate_bar=rate_bar,
)
_env.globals.update(histogram_svg=histogram_svg, steps_svg=steps_svg)


def render(template: str, **context: Any) -> str:
    return _env.get_template(template).render(**context)
