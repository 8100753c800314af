"""`python -m bench NAME [args]`: run one benchmark of bench/ by name; `--list` names them all.

Each benchmark stays a module with its own arguments (`python -m bench NAME --help`); this entry
point only finds it and runs it as `python -m bench.NAME` would. What each one measures, its
target and its latest figure: bench/README.md (the index), which a test keeps in step with the
names below.
"""

from __future__ import annotations

import ast
import runpy
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Benchmarks: modules that measure something and print or write their figures.
BENCHMARKS = (
    "suite",
    "targets",
    "cpu_split",
    "profile_ops",
    "profile_hot",
    "api_layer",
    "verify_bench",
    "verify_p50",
    "verify_cpu",
    "verify_attack",
    "verify_stall",
    "answer_attacks",
    "cold_path",
    "cold_parts",
    "first_call",
    "open_ahead",
    "seed_ab",
    "steps",
    "typed_sessions",
    "taskgen",
    "soak",
    "control_growth",
    "packing",
    "pg",
    "pg_ab",
    "explorer_pages",
    "openenv_overhead",
    "mcp_latency",
    "eval_overhead",
    "message_user",
)
# Servers the benchmarks start as baselines; runnable on their own too.
SERVERS = ("baseline_server", "lean_server")
# Libraries the benchmarks import; nothing to run.
SUPPORT = (
    "client",
    "phases",
    "report",
    "rollout",
    "servers",
    "tasks",
    "lean_db",
    "lean_retail",
    "lean_airline",
    "lean_ledger",
    "lean_sql",
    "lean_workplace",
)
RUNNABLE = BENCHMARKS + SERVERS


def summary(name: str, width: int = 96) -> str:
    """The first paragraph of the module's docstring on one line, read without importing it
    (a benchmark may need extras, such as aiohttp or matplotlib, that --list does not)."""
    doc = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return textwrap.shorten(first, width=width, placeholder=" ...")


def listing() -> str:
    rows = [f"  {name:<17} {summary(name)}" for name in BENCHMARKS]
    rows += ["", "baseline servers (started by the benchmarks; runnable alone):"]
    rows += [f"  {name:<17} {summary(name)}" for name in SERVERS]
    head = "usage: python -m bench NAME [args]   (python -m bench NAME --help for its arguments)"
    return "\n".join([head, "", "benchmarks (figures and targets: bench/README.md):", *rows])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("--list", "-l", "--help", "-h", "list"):
        print(listing())
        return 0
    name, rest = args[0].removeprefix("bench.").removesuffix(".py"), args[1:]
    if name not in RUNNABLE:
        print(f"python -m bench: no benchmark named {args[0]!r}\n\n{listing()}", file=sys.stderr)
        return 2
    sys.argv = [f"python -m bench {name}", *rest]
    runpy.run_module(f"bench.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
