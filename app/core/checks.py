"""The shape of a task's `expected_state` checks (app/verify/state/checks.py compiles, runs them).

Read when a task row is validated, with no environment: keys, kinds, operators and literal
types. Table and column names are checked later, against the environment's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.errors import InvalidTask

MAX_CHECKS = 200
_KINDS = ("expect", "count", "unchanged")
_CHECK_KEYS = {"table", "where", "expect", "count", "unchanged", "match", "name"}
_OPS = {"eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "is_null", "contains"}
_MATCH = ("all", "one", "any")
_SCALAR = (str, int, float, bool, type(None))


def fail(index: int, message: str) -> InvalidTask:
    return InvalidTask(f"expected_state[{index}]: {message}")


def _check_condition(index: int, where: str, value: Any, *, allow_ref: bool) -> None:
    if isinstance(value, _SCALAR):
        return
    if not isinstance(value, Mapping) or not value:
        raise fail(index, f"{where} must be a literal or an object of operators")
    if "ref" in value:
        if not allow_ref or len(value) != 1 or not isinstance(value["ref"], Mapping):
            raise fail(index, f"{where}: 'ref' is allowed alone, in `where`, as an object")
        for col, cond in value["ref"].items():
            _check_condition(index, f"{where}.ref.{col}", cond, allow_ref=False)
        return
    unknown = set(value) - _OPS
    if unknown:
        raise fail(index, f"{where}: unknown operator(s) {sorted(unknown)}; use {sorted(_OPS)}")
    for op, operand in value.items():
        if op in ("in", "not_in"):
            if not isinstance(operand, list) or not all(isinstance(v, _SCALAR) for v in operand):
                raise fail(index, f"{where}.{op} must be a list of literals")
        elif op == "is_null":
            if not isinstance(operand, bool):
                raise fail(index, f"{where}.is_null must be true or false")
        elif op == "contains":
            if not isinstance(operand, str):
                raise fail(index, f"{where}.contains must be a string")
        elif (
            not isinstance(operand, _SCALAR)
            or isinstance(operand, bool | type(None))
            and op in ("gt", "gte", "lt", "lte")
        ):
            raise fail(index, f"{where}.{op} must be a number or a string")


def parse_checks(raw: Any) -> tuple[dict[str, Any], ...]:
    """Validate the shape of `expected_state` (a list of checks); names are checked at compile."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidTask("expected_state must be a list of checks like {'table': ..., ...}")
    if len(raw) > MAX_CHECKS:
        raise InvalidTask(f"expected_state holds {len(raw)} checks; at most {MAX_CHECKS}")
    out = []
    for i, check in enumerate(raw):
        if not isinstance(check, Mapping) or not isinstance(check.get("table"), str):
            raise fail(i, "each check must be an object with a string 'table'")
        unknown = set(check) - _CHECK_KEYS
        if unknown:
            raise fail(i, f"unknown key(s) {sorted(unknown)}; keys are {sorted(_CHECK_KEYS)}")
        kinds = [k for k in _KINDS if k in check]
        if len(kinds) != 1:
            raise fail(i, f"give exactly one of {list(_KINDS)}, got {kinds or 'none'}")
        where = check.get("where", {})
        if not isinstance(where, Mapping):
            raise fail(i, "where must be an object of column -> condition")
        for col, cond in where.items():
            _check_condition(i, f"where.{col}", cond, allow_ref=True)
        if "unchanged" in check and (check["unchanged"] is not True or "where" in check):
            raise fail(i, "unchanged must be true and applies to the whole table (no where)")
        if "count" in check:
            count = check["count"]
            if isinstance(count, bool) or not isinstance(count, int | Mapping):
                raise fail(i, "count must be an integer or an object of operators")
            if isinstance(count, int) and count < 0:
                raise fail(i, "count must be >= 0")
            if isinstance(count, Mapping):
                _check_condition(i, "count", count, allow_ref=False)
        if "expect" in check:
            expect = check["expect"]
            if not isinstance(expect, Mapping) or not expect:
                raise fail(i, "expect must be a non-empty object of column -> condition")
            for col, cond in expect.items():
                _check_condition(i, f"expect.{col}", cond, allow_ref=False)
        if check.get("match", "all") not in _MATCH or ("match" in check and "expect" not in check):
            raise fail(i, f"match must be one of {list(_MATCH)} and goes with expect")
        if "name" in check and not isinstance(check["name"], str):
            raise fail(i, "name must be a string")
        out.append(dict(check))
    return tuple(out)
