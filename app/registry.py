"""The environments this installation can serve, found through the `stategym.environments`
entry-point group (the way pytest and Datasette find plugins).

An entry point names a module that defines `ENVIRONMENT` (`retail = "envs.retail"`), or an
object directly (`clinic = "clinic_env:ENVIRONMENT"`). The five shipped environments register in
this repository's `pyproject.toml` exactly as a third-party package registers its own, so
`pip install -e my_env/` is all it takes to serve another one.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from app.sdk.environment import Environment

ENTRY_POINT_GROUP = "stategym.environments"
DEFAULT_ENVIRONMENT = "retail"


class EnvironmentConflict(RuntimeError):
    """Two installed distributions register the same environment name."""


def _discover() -> dict[str, str]:
    found: dict[str, str] = {}
    owners: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "?"
        if ep.name in found and found[ep.name] != ep.value:
            raise EnvironmentConflict(
                f"environment {ep.name!r} is registered twice: by {owners[ep.name]} "
                f"({found[ep.name]}) and by {dist} ({ep.value}); uninstall one of them"
            )
        found[ep.name] = ep.value
        owners[ep.name] = dist
    return found


# name -> "module" or "module:attribute". A plain dict, read once at import: tests register
# throw-away environments with `monkeypatch.setitem(ENVIRONMENTS, name, module)`.
ENVIRONMENTS: dict[str, str] = _discover()


def environment_names() -> list[str]:
    return sorted(ENVIRONMENTS)


def environment_module(name: str) -> str:
    """The module an environment lives in (its task generator is `<module>.taskgen`)."""
    target = ENVIRONMENTS.get(name)
    if target is None:
        raise KeyError(_unknown(name))
    return target.partition(":")[0]


def load_environment(name: str) -> Environment:
    target = ENVIRONMENTS.get(name)
    if target is None:
        raise KeyError(_unknown(name))
    module_name, _, attribute = target.partition(":")
    env: Any = importlib.import_module(module_name)
    for part in (attribute or "ENVIRONMENT").split("."):
        env = getattr(env, part, None)
        if env is None:
            raise TypeError(
                f"{target} names no {attribute or 'ENVIRONMENT'} (entry point {name!r})"
            )
    if not isinstance(env, Environment):
        raise TypeError(f"{target} is not an Environment (entry point {name!r})")
    return env


def _unknown(name: str) -> str:
    known = ", ".join(environment_names()) or "none"
    return (
        f"unknown environment {name!r}; known: {known}. An environment is a package that "
        f"registers in the {ENTRY_POINT_GROUP!r} entry-point group (docs/new_environment.md)"
    )
