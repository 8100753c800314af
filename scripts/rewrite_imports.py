"""Rewrite imports, dotted names and file paths from the flat `app/` layout to the layered one.

The layout change moved every module of `app/` into a layer package. Branches started
before it can be brought over with:

    python scripts/rewrite_imports.py FILE...        # rewrite in place, print what changed

Run it on code written against the old layout only: it maps old names, and `app.cli` / `app.server`
were modules before and are packages now.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# old dotted module (under `app.`) -> new dotted module (under `app.`)
MOVES: dict[str, str] = {
    "admin": "server.admin",
    "api": "server.api",
    "cookies": "server.cookies",
    "middleware": "server.middleware",
    "timing": "server.timing",
    "protocol_models": "server.models",
    "mcp_server": "server.mcp",
    "server": "server.asgi",
    "cli": "cli.main",
    "cli_browse": "cli.browse",
    "cli_common": "cli.common",
    "cli_export": "cli.export",
    "cli_generate": "cli.generate",
    "cli_mcp": "cli.mcp",
    "cli_migrate": "cli.migrate",
    "cli_report": "cli.report",
    "cli_sessions": "cli.sessions",
    "cli_tasks": "cli.tasks",
    "nemo_gym_config": "cli.nemo_gym_config",
    "compare_spec": "sdk.compare_spec",
    "environment": "sdk.environment",
    "tool_schema": "sdk.tool_schema",
    "inline": "runtime.inline",
    "lifecycle": "runtime.lifecycle",
    "lru": "core.lru",
    "replay": "runtime.replay",
    "runner": "storage.runner",
    "sessions": "runtime.sessions",
    "sql_functions": "storage.sqlite.sql_functions",
    "tasks": "core.tasks",
    "judge": "verify.judge",
    "metrics": "verify.metrics",
    "report": "verify.report",
    "control": "storage.control",
    "migrations": "storage.migrations",
    "meta": "storage.meta",
    "inspection": "runtime.inspection",
    "seeding": "storage.seeding",
    "store": "storage.sqlite.store",
    "sqlite_db": "storage.sqlite.db",
    "backends.pg_control": "storage.postgres.control",
    "backends.pg_db": "storage.postgres.db",
    "backends.pg_migrate": "storage.postgres.migrate",
    "backends.pg_sessions": "storage.postgres.backend",
    "backends.pg_store": "storage.postgres.store",
    "backends": "storage.backend",
}

# Longest names first so `backends.pg_db` wins over `backends`.
_ORDER = sorted(MOVES, key=len, reverse=True)
_DOTTED = re.compile(r"(?<![\w.])app\.(" + "|".join(re.escape(m) for m in _ORDER) + r")(?![\w.])")
# `app.backends.pg_db` style (followed by a dot) for the package that became storage.postgres.
_BACKENDS_PKG = re.compile(r"(?<![\w.])app\.backends\.(?:pg_)?(?=[a-z])")
# `app.runner.run_tool` style: a moved module followed by one of its names.
_DOTTED_ATTR = re.compile(
    r"(?<![\w.])app\.("
    + "|".join(
        re.escape(m) for m in _ORDER if "." not in m and m not in ("server", "cli", "backends")
    )
    + r")(?=\.[a-z_])"
)
_FROM_APP = re.compile(r"^(\s*)from app import (.+)$", re.MULTILINE)
_PATH = re.compile(
    r"(?<![\w/])app/(" + "|".join(re.escape(m.replace(".", "/")) for m in _ORDER) + r")(\.py|/)"
)


def _from_app(match: re.Match[str]) -> str:
    indent, names = match.group(1), match.group(2)
    lines = []
    kept = []
    for part in (n.strip() for n in names.split(",")):
        name, _, alias = part.partition(" as ")
        target = MOVES.get(name.strip())
        if target is None:
            kept.append(part)
            continue
        parent, _, leaf = target.rpartition(".")
        bound = alias.strip() or name.strip()
        suffix = "" if bound == leaf else f" as {bound}"
        lines.append(f"{indent}from app.{parent} import {leaf}{suffix}")
    if kept:
        lines.insert(0, f"{indent}from app import {', '.join(kept)}")
    return "\n".join(lines)


def _path(match: re.Match[str]) -> str:
    old, tail = match.group(1), match.group(2)
    new = MOVES[old.replace("/", ".")].replace(".", "/")
    if tail == "/" and old == "backends":
        return "app/storage/postgres/"
    return f"app/{new}{tail}"


def rewrite(text: str) -> str:
    text = _FROM_APP.sub(_from_app, text)
    text = _DOTTED.sub(lambda m: "app." + MOVES[m.group(1)], text)
    text = _DOTTED_ATTR.sub(lambda m: "app." + MOVES[m.group(1)], text)
    text = _BACKENDS_PKG.sub("app.storage.postgres.", text)
    return _PATH.sub(_path, text)


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        old = path.read_text()
        new = rewrite(old)
        if new != old:
            path.write_text(new)
            print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
