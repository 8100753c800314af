"""OpenAI function-tool schemas generated from a tool's pydantic argument model and docstring.

The schemas are `strict`-compatible: every property is listed in `required` (optional ones admit
null), `additionalProperties` is false, and pydantic's titles and defaults are dropped as schema
keywords only: an argument *named* `title` or `default` (a key of `properties`) stays.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

_DROP_KEYS = {"title", "default"}
# Keywords whose value maps names (of arguments, of definitions) to schemas: the names are data.
_NAMED_SCHEMAS = {"properties", "patternProperties", "$defs", "definitions"}


def _clean(node: Any) -> Any:
    if isinstance(node, dict):
        out = {
            k: {name: _clean(sub) for name, sub in v.items()}
            if k in _NAMED_SCHEMAS and isinstance(v, dict)
            else _clean(v)
            for k, v in node.items()
            if k not in _DROP_KEYS
        }
        if out.get("type") == "object" and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def parameters_schema(args_model: type) -> dict[str, Any]:
    # A copy: callers own what they get; the schema itself is computed once per model.
    return copy.deepcopy(_parameters_schema(args_model))


@functools.cache
def _parameters_schema(args_model: type) -> dict[str, Any]:
    schema = _clean(args_model.model_json_schema())  # type: ignore[attr-defined]
    if "properties" not in schema:
        schema.update(properties={}, required=[], additionalProperties=False)
    schema["type"] = "object"
    return schema


def function_tool_schema(name: str, description: str, args_model: type) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": parameters_schema(args_model),
        "strict": True,
    }
