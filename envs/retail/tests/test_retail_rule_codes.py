"""Every retail rule answers with its own error code: the decline reason code naming the rule.

An agent that hits a rule learns which rule from the error (and declines with that code); a
generic `rule_violation` told it nothing and let a policy decline with any code it liked.
"""

from __future__ import annotations

import ast
from pathlib import Path

from envs.retail.ops import STATUS_RULES
from envs.retail.policy import DECLINE_REASONS

RETAIL = Path(__file__).resolve().parents[1]
NOT_RULES = {"not_found", "invalid_arguments"}  # a wrong argument, not a rule saying no


def _tool_errors() -> list[tuple[str, int, ast.expr | None]]:
    found = []
    for path in sorted(RETAIL.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ToolError":
                code = next((k.value for k in node.keywords if k.arg == "code"), None)
                found.append((path.name, node.lineno, code))
    return found


def test_every_tool_error_names_its_code():
    errors = _tool_errors()
    assert len(errors) > 15
    missing = [(f, line) for f, line, code in errors if code is None]
    assert not missing, f"ToolError without a code (the generic rule_violation): {missing}"


def test_every_rule_code_is_a_decline_reason():
    for name, line, code in _tool_errors():
        if isinstance(code, ast.Constant):
            known = NOT_RULES | set(DECLINE_REASONS)
            assert code.value in known, (name, line, code.value)
        else:  # the status rule's code comes from STATUS_RULES
            assert isinstance(code, ast.Subscript), (name, line)
    assert set(STATUS_RULES.values()) <= set(DECLINE_REASONS)
