"""Size figures for the code a reader meets first, on any checkout (docs/architecture.md).

    python scripts/code_metrics.py [ROOT]      # ROOT: a checkout, default this one

Prints: the lines of the verify entry point and of `SessionManager` (with its method count),
functions over 60 lines in `app/`, how often `app/` spells `dict[str, Any]`, and the edges and
cycles between `app/`'s packages (every import, lazy ones inside functions too). Reads files
only, so an old commit can be measured from a `git worktree` of it.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

LONG = 60
VERIFY_ENTRIES = ("verify_result", "verify_state")
# Re-exports at the facades' old paths, left out of the package graph as
# tests/project/test_architecture.py leaves them (COMPAT_SHIMS).
COMPAT_SHIMS = {"app.sdk.replay", "app.sdk.testing", "app.sdk.taskgen", "app.sdk.sqlite"}


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _length(node: ast.AST) -> int:
    return int(node.end_lineno or node.lineno) - node.lineno + 1  # type: ignore[attr-defined]


def _body_length(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring: a CLI command's option list is
    its signature, not its logic."""
    body = fn.body[1:] if ast.get_docstring(fn) is not None and len(fn.body) > 1 else fn.body
    return int(fn.end_lineno or fn.lineno) - body[0].lineno + 1


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "app" else None


def _imports(tree: ast.AST, here: str) -> set[str]:
    """Modules `tree` imports, relative imports resolved against `here` (a dotted module)."""
    found: set[str] = set()
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: -node.level]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def measure(root: Path) -> dict[str, object]:
    app = root / "app"
    long_functions: list[tuple[int, str]] = []
    long_bodies = 0
    verify_lines = 0
    manager = (0, 0)
    spelled = 0
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(app.rglob("*.py")):
        text = path.read_text()
        spelled += text.count("dict[str, Any]")
        tree = ast.parse(text)
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for fn in _functions(tree):
            long_bodies += _body_length(fn) > LONG
            if _length(fn) > LONG:
                long_functions.append((_length(fn), f"{path.relative_to(root)}:{fn.name}"))
            if fn.name in VERIFY_ENTRIES and "verify" in path.parts:
                verify_lines = max(verify_lines, _length(fn))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            if cls.name == "SessionManager":
                manager = (_length(cls), len(_functions(cls)))
        if module in COMPAT_SHIMS and "app.authoring" in text:
            continue  # a re-export (before the facades moved, the facade itself)
        source = _package(module if path.name != "__init__.py" else module + ".x")
        for target in _imports(tree, module):
            dest = _package(target if "." in target[4:] else target + ".x")
            if source and dest and dest != source:
                edges[source].add(dest)
    return {
        "verify entry (lines)": verify_lines,
        "SessionManager (lines, methods)": manager,
        f"functions over {LONG} lines in app/": len(long_functions),
        "longest": sorted(long_functions, reverse=True)[:5],
        f"function bodies over {LONG} lines (signature and docstring left out)": long_bodies,
        "dict[str, Any] in app/": spelled,
        "package edges": sum(len(v) for v in edges.values()),
        "package cycles": _cycles(edges),
    }


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    for name, value in measure(root).items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
