"""The layering app/__init__.py and docs/architecture.md describe, checked on the source with ast.

The graph counts every import in a module, at module level and inside functions alike (a lazy
import that hides a cycle is still a cycle), but not those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
ENVS = ROOT / "envs"

# Modules outside app/storage/{sqlite,postgres}/ allowed to name a backend package directly.
BACKEND_PACKAGES = ("app.storage.sqlite", "app.storage.postgres")
BACKEND_IMPORTERS_ALLOWED = {
    "app.storage.factory",  # builds the backend from settings
    "app.storage.images",  # snapshot images are SQLite files on both backends
}
# Outside app/storage/, still naming a dialect (`dialect.name`), the sqlite3 connection type or
# psycopg in code, and why. Shrink this list: such knowledge belongs to a backend's module.
DRIVER_NAMERS_ALLOWED = {
    # The bounded SQL functions of the `sql` environment's SQLite console.
    "app.runtime.sql_functions",
}
# What envs/ may import from app beyond app.sdk (envs/*/tests may import more): the shared
# settings and errors only (the taskgen kit and replay helpers are app.sdk.taskgen/.replay).
TASKGEN_KIT = {"app.settings", "app.errors"}
ENV_IMPORTS_ALLOWED = {
    # envs/sql is a SQLite console (it declares requires=("sqlite",)): its sandbox needs the
    # SQLite connection plumbing, the bounded SQL functions, and its replay the runner.
    "envs.sql": TASKGEN_KIT
    | {
        "app.storage.sqlite",
        "app.storage.seeding",
        "app.runtime.sql_functions",
        "app.runtime.runner",
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports (module-level and in functions; TYPE_CHECKING excluded)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from app.storage import factory` imports the submodule app.storage.factory.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph(root: Path, prefix: str) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in root.rglob("*.py") if ".venv" not in p.parts}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {i for i in imports_of(path) if i in modules and i != name}
        edges[name] = targets
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_app_has_no_import_cycles():
    # A package imports its __init__ implicitly; that edge is not a cycle of the code's making.
    cycle = find_cycle(graph(APP, "app"))
    assert cycle is None, " -> ".join(cycle or [])


def test_find_cycle_sees_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def _names_backend(imported: str) -> bool:
    return any(imported == p or imported.startswith(p + ".") for p in BACKEND_PACKAGES)


def test_only_storage_names_a_backend_package():
    offenders = {}
    for path in APP.rglob("*.py"):
        name = module_name(path)
        if _names_backend(name) or name in BACKEND_IMPORTERS_ALLOWED:
            continue
        direct = sorted(i for i in imports_of(path) if _names_backend(i))
        if not direct:
            continue
        offenders[name] = direct
    assert offenders == {}, f"import app.storage.base / factory instead: {offenders}"


def test_runtime_does_not_branch_on_the_backend():
    """No backend `if`s outside app/storage/: the runtime reads capabilities instead."""
    for path in [*(APP / "runtime").rglob("*.py"), *(APP / "server").rglob("*.py")]:
        text = path.read_text()
        for word in ("uses_postgres", "backend_of(", "PgSessionManager", "SQLITE_ONLY_ENVS"):
            assert word not in text, f"{path.relative_to(ROOT)} uses {word}"


def test_environments_import_only_the_sdk():
    offenders = {}
    for path in ENVS.rglob("*.py"):
        rel = path.relative_to(ENVS).parts
        if "tests" in rel or rel[-1].startswith("test_") or rel[-1] == "conftest.py":
            continue  # environment tests may drive the framework
        env = f"envs.{rel[0]}"
        allowed = ENV_IMPORTS_ALLOWED.get(env, TASKGEN_KIT)
        bad = sorted(
            i
            for i in imports_of(path)
            if i.startswith("app.")
            and not i.startswith("app.sdk")
            and not any(i == a or i.startswith(a + ".") for a in allowed)
        )
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}, offenders


def names_a_driver(path: Path) -> list[str]:
    """Where the code names a dialect (`x.dialect.name`), sqlite3's connection type, or psycopg."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "name":
            value = node.value
            if (isinstance(value, ast.Attribute) and value.attr == "dialect") or (
                isinstance(value, ast.Name) and value.id == "dialect"
            ):
                found.append(f"{node.lineno}: dialect.name")
        elif isinstance(node, ast.Attribute) and node.attr == "Connection":
            if isinstance(node.value, ast.Name) and node.value.id == "sqlite3":
                found.append(f"{node.lineno}: sqlite3.Connection")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any((n or "").split(".")[0] == "psycopg" for n in names):
                found.append(f"{node.lineno}: import psycopg")
    return found


def test_only_storage_names_a_dialect_or_a_driver_connection():
    offenders = {}
    for path in APP.rglob("*.py"):
        name = module_name(path)
        if name.startswith("app.storage") or name in DRIVER_NAMERS_ALLOWED:
            continue
        found = names_a_driver(path)
        if found:
            offenders[name] = found
    assert offenders == {}, f"ask the backend (app/storage/base.py, driver.py): {offenders}"


def test_driver_allow_list_is_current():
    stale = [
        name
        for name in DRIVER_NAMERS_ALLOWED
        if not names_a_driver(APP.joinpath(*name.split(".")[1:]).with_suffix(".py"))
    ]
    assert stale == []


def test_names_a_driver_sees_each_form(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import psycopg\nimport sqlite3\n"
        "def f(conn, c: sqlite3.Connection):\n    return conn.dialect.name\n"
    )
    assert sorted(f.split(": ")[1] for f in names_a_driver(probe)) == [
        "dialect.name",
        "import psycopg",
        "sqlite3.Connection",
    ]
