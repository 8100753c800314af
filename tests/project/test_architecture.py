"""The layering app/__init__.py and docs/architecture.md describe, checked on the source with ast.

The graph counts every import in a module, at module level and inside functions alike (a lazy
import that hides a cycle is still a cycle, and a lazy import that points up still points up),
but not those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
ENVS = ROOT / "envs"

# The layers of app/, top to bottom, each a set of module prefixes (a prefix names a module and
# everything under it; the longest prefix decides). A module imports only its own layer and the
# layers below it. `app` is the package root alone (app/__init__.py), not a prefix.
LAYERS: list[tuple[str, set[str]]] = [
    ("cli", {"app.__main__", "app.cli", "app.scaffold"}),
    ("apps", {"app.explorer", "app.integrations", "app.evaluation"}),
    ("server", {"app.server"}),
    # The facades over the engine an author uses (and their old paths: COMPAT_SHIMS).
    (
        "authoring",
        {"app.authoring", "app.sdk.replay", "app.sdk.testing", "app.sdk.taskgen", "app.sdk.sqlite"},
    ),
    ("runtime", {"app.runtime"}),
    ("taskgen", {"app.taskgen"}),
    ("verify", {"app.verify"}),
    ("storage", {"app.storage"}),
    ("registry", {"app.registry"}),
    ("sdk", {"app.sdk"}),
    ("core", {"app.core"}),
    ("shared", {"app", "app.settings", "app.errors", "app.clock", "app.jsonio"}),
]
ROOT_PACKAGE = "app"

# Only app/storage/ names a backend package (app.storage.sqlite, app.storage.postgres); above
# it, a backend is asked through app/storage/base.py, factory.py and images.py.
BACKEND_PACKAGES = ("app.storage.sqlite", "app.storage.postgres")
# What envs/ may import from app beyond app.sdk (envs/*/tests may import more): the shared
# settings and errors; the engine only through the authoring facades (taskgen, replay, testing,
# sqlite).
ENV_IMPORTS = {"app.settings", "app.errors", "app.authoring"}
# The old paths of app.authoring's modules: thin re-exports kept for packages written against
# them (envs/*/taskgen, plugins written from docs/generating_tasks.md). Nothing in app/ imports
# them, and the package graph leaves them out: app.sdk itself points down.
COMPAT_SHIMS = {"app.sdk.replay", "app.sdk.testing", "app.sdk.taskgen", "app.sdk.sqlite"}


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
    return set(_imports_of(path, path.stat().st_mtime_ns))


@functools.cache
def _imports_of(path: Path, mtime_ns: int) -> frozenset[str]:
    """Parsed once per file version: a dozen tests here walk every module of app/."""
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
    return frozenset(found)


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


def _matches(module: str, prefix: str) -> bool:
    if prefix == ROOT_PACKAGE:
        return module == prefix
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str, layers: list[tuple[str, set[str]]] = LAYERS) -> int | None:
    """The rank (0 = top) of the layer holding `module`'s longest matching prefix."""
    best: tuple[int, int] | None = None  # (prefix length, rank)
    for rank, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if _matches(module, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    return None if best is None else best[1]


def upward_imports(
    edges: dict[str, set[str]], layers: list[tuple[str, set[str]]] = LAYERS
) -> list[str]:
    """Every import from a lower layer to a higher one, as `a -> b`."""
    found = []
    for a in sorted(edges):
        rank_a = layer_of(a, layers)
        for b in sorted(edges[a]):
            rank_b = layer_of(b, layers)
            if rank_a is not None and rank_b is not None and rank_b < rank_a:
                found.append(f"{a} -> {b}")
    return found


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module edges collapsed to packages (`app.sdk.tool` -> `app.sdk`; the root package and
    the COMPAT_SHIMS left out)."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for a, targets in edges.items():
        if a in COMPAT_SHIMS or a == ROOT_PACKAGE:
            continue
        out.setdefault(package(a), set()).update(
            package(b) for b in targets if b != ROOT_PACKAGE and package(b) != package(a)
        )
    return out


def test_packages_point_down_with_no_cycle():
    packages = package_graph(graph(APP, "app"))
    cycle = find_cycle(packages)
    assert cycle is None, "a package cycle: " + " -> ".join(cycle or [])
    upward = upward_imports(packages)
    assert upward == [], "packages that import a package above them:\n" + "\n".join(upward)


def test_the_old_facade_paths_only_re_export_and_nothing_in_app_uses_them():
    for name in sorted(COMPAT_SHIMS):
        path = ROOT / (name.replace(".", "/") + ".py")
        modules = {".".join(i.split(".")[:3]) for i in imports_of(path)}
        assert modules == {name.replace("app.sdk.", "app.authoring.")}, name
        body = ast.parse(path.read_text()).body
        assert all(isinstance(node, ast.ImportFrom | ast.Expr) for node in body), name
    users = {m: sorted(e & COMPAT_SHIMS) for m, e in graph(APP, "app").items() if e & COMPAT_SHIMS}
    assert users == {}, f"import app.authoring.* instead: {users}"


def test_every_app_module_is_in_exactly_one_layer():
    prefixes = [p for _, layer in LAYERS for p in layer]
    assert len(prefixes) == len(set(prefixes)), "a prefix is listed in two layers"
    unranked = sorted(m for m in graph(APP, "app") if layer_of(m) is None)
    assert unranked == [], f"add these modules to a layer in LAYERS: {unranked}"


def test_imports_point_down():
    upward = upward_imports(graph(APP, "app"))
    assert upward == [], "imports that point up a layer:\n" + "\n".join(upward)


def test_upward_imports_sees_one():
    layers = [
        ("cli", {"app.cli"}),
        ("sdk facades", {"app.sdk.replay"}),
        ("runtime", {"app.runtime"}),
        ("sdk", {"app.sdk"}),
        ("shared", {"app", "app.errors"}),
    ]
    edges = {
        "app.cli.main": {"app.runtime.x", "app"},  # down
        "app.sdk.replay": {"app.runtime.x"},  # down: the longest prefix ranks the facade
        "app.sdk.tool": {"app.sdk.replay"},  # up
        "app.runtime.x": {"app.cli.main", "app.runtime.y", "app.errors"},  # up, same, down
        "app.errors": {"app"},  # same layer
    }
    assert upward_imports(edges, layers) == [
        "app.runtime.x -> app.cli.main",
        "app.sdk.tool -> app.sdk.replay",
    ]
    assert layer_of("app.unlisted", layers) is None  # the package root is no prefix


def _names_backend(imported: str) -> bool:
    return any(imported == p or imported.startswith(p + ".") for p in BACKEND_PACKAGES)


def test_only_storage_names_a_backend_package():
    offenders = {}
    for path in APP.rglob("*.py"):
        name = module_name(path)
        if name == "app.storage" or name.startswith("app.storage."):
            continue
        direct = sorted(i for i in imports_of(path) if _names_backend(i))
        if not direct:
            continue
        offenders[name] = direct
    assert offenders == {}, f"import app.storage.base / factory / images instead: {offenders}"


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
        bad = sorted(
            i
            for i in imports_of(path)
            if i.startswith("app.")
            and not i.startswith("app.sdk")
            and not any(i == a or i.startswith(a + ".") for a in ENV_IMPORTS)
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
        if name.startswith("app.storage"):
            continue
        found = names_a_driver(path)
        if found:
            offenders[name] = found
    assert offenders == {}, f"ask the backend (app/storage/driver.py, dump_sql.py): {offenders}"


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
