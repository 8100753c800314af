"""The explicit list of environments this server can serve: name -> module with `ENVIRONMENT`."""

from __future__ import annotations

import importlib

from app.sdk.environment import Environment

ENVIRONMENTS: dict[str, str] = {
    "retail": "envs.retail",
    "airline": "envs.airline",
    "workplace": "envs.workplace",
    "ledger": "envs.ledger",
    "sql": "envs.sql",
}
DEFAULT_ENVIRONMENT = "retail"


def environment_names() -> list[str]:
    return sorted(ENVIRONMENTS)


def load_environment(name: str) -> Environment:
    module = ENVIRONMENTS.get(name)
    if module is None:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(environment_names())}")
    env = importlib.import_module(module).ENVIRONMENT
    if not isinstance(env, Environment):
        raise TypeError(f"{module}.ENVIRONMENT is not an Environment")
    return env
