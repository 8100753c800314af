"""Source conventions the formatter cannot check: `# fmt: skip` only on literal data tables.

The layout of code is ruff format's at line length 100 (pyproject.toml); a marker that keeps the
formatter off is allowed only where it would explode a table of literal rows one value per line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"#\s*fmt:\s*skip\s*$")
SOURCES = ("app", "envs", "tests", "bench", "scripts", "migrations")


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant | ast.Name | ast.Attribute):
        return True
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_literal(k) for k in node.keys if k is not None) and all(
            _literal(v) for v in node.values
        )
    if isinstance(node, ast.Call):
        return all(_literal(a) for a in node.args) and all(_literal(k.value) for k in node.keywords)
    return False


def misplaced_markers(path: Path) -> list[int]:
    """Lines holding a formatter marker that does not end a literal table's assignment."""
    text = path.read_text()
    if "fmt:" not in text:  # most files: no marker, nothing to parse
        return []
    tables = {
        node.end_lineno
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.Expr)
        and isinstance(node.value, ast.Tuple | ast.List | ast.Dict | ast.Set)
        and _literal(node.value)
    }
    return [
        number
        for number, line in enumerate(text.splitlines(), 1)
        if MARK.search(line) and number not in tables
    ]


def test_formatter_markers_only_on_data_tables():
    offenders = {
        str(path.relative_to(ROOT)): lines
        for top in SOURCES
        for path in (ROOT / top).rglob("*.py")
        if ".venv" not in path.parts and (lines := misplaced_markers(path))
    }
    assert offenders == {}, f"let ruff format lay these out (drop the marker): {offenders}"


def test_the_check_sees_a_marker_on_code(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "ROWS = (\n    (1, 'a'),\n    (2, 'b'),\n)  # fmt: skip\nx = f(1,\n      2)  # fmt: skip\n"
    )
    assert misplaced_markers(probe) == [6]
