"""scripts/code_metrics.py on this checkout: the figures docs/architecture.md quotes, held."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _metrics():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "scripts/code_metrics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_metrics"] = module
    spec.loader.exec_module(module)
    return module


def test_the_verify_entry_and_the_session_manager_stay_small():
    figures = _metrics().measure(ROOT)
    assert figures["verify entry (lines)"] <= 60
    lines, methods = figures["SessionManager (lines, methods)"]
    assert 0 < lines <= 150 and methods <= 12
    assert figures["package cycles"] == []


def test_a_lazy_import_is_an_edge_and_a_type_checking_one_is_not():
    code = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from app.server import api\n"
        "def f():\n    from app.verify import gold\n"
    )
    found = _metrics()._imports(code, "app.storage.x")
    assert "app.verify.gold" in found and "app.server.api" not in found


def test_a_body_is_measured_without_its_signature_and_docstring():
    fn = ast.parse('def f(\n    a: int,\n    b: int,\n) -> int:\n    """Doc."""\n    return a\n')
    node = fn.body[0]
    assert isinstance(node, ast.FunctionDef)
    assert _metrics()._body_length(node) == 1
